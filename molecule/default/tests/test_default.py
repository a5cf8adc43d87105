"""What a converged host must look like: ROCm from the signed mirror, GPU groups, the build compiler, linker entries."""

import json

import pytest

# The qemu guest; the build host beside it (an nspawn machine) is checked in test_stack.py.
testinfra_hosts = ["inference_hosts"]

ROCM = "/opt/rocm-7.0.2"


def test_systemd_is_pid1(host):
    assert host.process.get(pid=1).comm == "systemd"
    assert host.run("systemctl is-system-running").stdout.strip() in ("running", "degraded")


def test_rocm_keyring_and_signed_by_source(host):
    key = host.file("/etc/apt/keyrings/rocm.asc")
    assert key.user == "root" and key.mode == 0o644
    assert "BEGIN PGP PUBLIC KEY BLOCK" in key.content_string
    # One deb822 file per repository, as ansible.builtin.deb822_repository writes them.
    releases = {"rocm": "/rocm/apt/7.0.2", "amdgpu": "/amdgpu/30.10.2/ubuntu"}
    for name, path in releases.items():
        sources = host.file("/etc/apt/sources.list.d/%s.sources" % name)
        assert sources.mode == 0o644
        fields = dict(line.split(": ", 1) for line in sources.content_string.splitlines() if ": " in line)
        assert fields["X-Repolib-Name"] == name
        assert fields["Types"] == "deb" and fields["Suites"] == "jammy" and fields["Components"] == "main"
        assert fields["Signed-By"] == "/etc/apt/keyrings/rocm.asc"
        assert fields["URIs"].endswith(path), fields["URIs"]
    # apt reads them: the ROCm packages come from those URIs (test_apt_pin_prefers_the_rocm_repository).
    assert host.package("python3-debian").is_installed


def test_apt_pin_prefers_the_rocm_repository(host):
    assert "Pin-Priority: 600" in host.file("/etc/apt/preferences.d/rocm-pin").content_string
    policy = host.check_output("apt-cache policy rocm-core")
    assert " 600 http://mirror.molecule.internal:" in policy


@pytest.mark.parametrize(
    "package", ["rocm", "rocm-core", "rocminfo", "hipcc", "hipblas", "hipblas-dev", "hipblaslt", "amdgpu-dkms"]
)
def test_rocm_packages_installed(host, package):
    assert host.package(package).is_installed


def test_opt_rocm_alternative_points_at_the_release(host):
    assert host.file("/opt/rocm").linked_to == ROCM
    assert host.file(ROCM + "/.info/version").content_string.startswith("7.0.2-")


def test_user_in_gpu_groups(host):
    assert {"video", "render"} <= set(host.user("ansible").groups)


def test_reboot_pending_from_the_driver_not_from_a_marker(host):
    # The real amdgpu-dkms, like the fixture, writes no /var/run/reboot-required: the rocm role found the pending
    # reboot from the installed and the loaded module, and with rocm_reboot=defer the host goes on.
    assert not host.file("/var/run/reboot-required").exists
    with host.sudo():
        record = json.loads(host.file("/var/lib/instinct-stack/amdgpu-driver.json").content_string)
    assert record["boot_id"] == host.file("/proc/sys/kernel/random/boot_id").content_string.strip()
    assert record["installed_module"] == "6.14.14" and record["package_version"].startswith("1:6.14.14.")
    driver = host.ansible("instinct.stack.amdgpu_driver", check=True, become=True)
    assert driver["reboot_pending"] is True and driver["load_failed"] is False and driver["changed"] is False
    assert "reboot to load it" in driver["reason"] and driver["loaded_module"] is None


@pytest.mark.parametrize(
    "command, target",
    [("gcc", "/usr/bin/gcc-11"), ("g++", "/usr/bin/g++-11"), ("cc", "/usr/bin/gcc-11"), ("c++", "/usr/bin/g++-11")],
)
def test_compiler_alternatives(host, command, target):
    query = host.check_output("update-alternatives --query %s", command)
    assert "Value: %s" % target in query
    assert "Alternative: /usr/bin/%s-12\nPriority: 10" % ("gcc" if command in ("gcc", "cc") else "g++") in query
    assert host.check_output("%s -dumpversion", command).startswith("11")


def test_linker_entries_derived_from_the_installed_tree(host):
    conf = host.file("/etc/ld.so.conf.d/20-instinct-rocm.conf").content_string.split()
    assert ROCM + "/lib" in conf and ROCM + "/lib/llvm/lib" in conf
    cache = host.check_output("/sbin/ldconfig -p")
    assert "libhipblas.so.2 (libc6,x86-64) => %s/lib/libhipblas.so.2" % ROCM in cache
    assert "libhipblaslt.so.1" in cache and "libamdhip64.so.7" in cache


def test_hipcc_on_login_path_and_binaries_link_without_ld_library_path(host):
    env = host.check_output("bash -lc 'echo $HIP_PATH; command -v hipcc'").split()
    assert env == [ROCM, ROCM + "/bin/hipcc"]
    source = 'extern "C" int hipblas_fixture_version(void);\nint main() { return hipblas_fixture_version() - 1; }\n'
    host.check_output("printf '%s' >/tmp/hipblas_probe.cpp" % source)
    host.check_output(
        "bash -lc 'hipcc --offload-arch=gfx942 -o /tmp/hipblas_probe /tmp/hipblas_probe.cpp -L$HIP_PATH/lib -lhipblas'"
    )
    run = host.run("env -u LD_LIBRARY_PATH /tmp/hipblas_probe")
    assert run.rc == 0, run.stderr


def test_gfx_arch_detects_the_captured_mi300x(host):
    result = host.ansible("instinct.stack.gfx_arch", "source=auto", check=False, become=True)
    assert result["source_used"] == "rocminfo"
    assert result["pytorch_rocm_arch"] == "gfx942"
    assert len(result["gpus"]) == 8
