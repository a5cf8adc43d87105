"""Every scenario's hosts start as minimal servers (molecule/shared/vm/build-image.sh): what a stack needs at run time,
the roles installed, and the service used it (verifier.additional_files_or_dirs in each scenario's molecule.yml).

Triton compiles its launcher as a CPython extension at the first kernel (triton/runtime/build.py), which needs a C
compiler and the Python headers on the inference host; the fixture vLLM does that before it answers /health, into
the service user's ~/.triton/cache.
"""

testinfra_hosts = ["inference_hosts"]

SERVICE_HOME = "/var/lib/vllm"
UNIT = "vllm-fixture.service"


def test_the_roles_installed_what_a_stack_needs_at_run_time(host):
    for package in ("python3-venv", "python3-dev", "python3-apt"):
        assert host.package(package).is_installed, package
    assert host.run("command -v gcc || command -v clang").rc == 0


def test_the_service_compiled_tritons_launcher_against_the_hosts_python_headers(host):
    assert host.service(UNIT).is_running
    with host.sudo():
        launchers = host.check_output("find %s/.triton/cache -name '__triton_launcher*.so'", SERVICE_HOME)
        assert launchers, "the service compiled no launcher"
        launcher = host.file(launchers.splitlines()[0])
        # A shared object the service's user built: an ELF file, written by the service, not put there by a role.
        assert launcher.user == "vllm" and launcher.size > 0
        assert host.check_output("head -c 4 %s | tail -c 3", launcher.path) == "ELF"
    journal = host.check_output("sudo journalctl -u %s --no-pager -o cat", UNIT)
    assert "Triton launcher:" in journal
