"""One build on the build host serves both inference hosts of the same arch."""

import json

CACHE = "/var/cache/instinct-stack/wheels"


def stack(host):
    current = host.file("/opt/instinct-stack/current")
    return json.loads(host.file(current.linked_to + "/.verified").content_string)


def build_infos(host, component):
    listing = host.check_output("sudo find %s/%s -mindepth 2 -maxdepth 2 -name build-info.json", CACHE, component)
    return listing.split()


def test_only_the_build_host_builds(host):
    name = host.backend.get_hostname()
    has_checkout = host.file("/var/lib/instinct-stack/src/pytorch").exists
    assert has_checkout is (name == "node1")
    if name != "node1":
        # node2 holds no build and no wheel cache at all: its stack came whole, as node1's archive.
        assert not host.file(CACHE).exists
        return
    for component in ("pytorch", "triton", "vllm"):
        infos = build_infos(host, component)
        assert len(infos) == 1, (name, component, infos)


def test_the_torch_build_went_through_ccache_and_records_its_hits(host):
    if host.backend.get_hostname() != "node1":
        return
    assert host.exists("ccache")
    (info_path,) = build_infos(host, "pytorch")
    info = json.loads(host.check_output("sudo cat %s", info_path))
    # build_ccache is on by default: the build compiled through ccache, which counted its compiles.
    stats = info["ccache"]
    assert stats["hits"] + stats["misses"] > 0, stats
    assert 0.0 <= stats["hit_rate"] <= 1.0, stats


def test_both_hosts_run_the_same_verified_stack(host):
    mine = stack(host)
    node1 = host.get_host("ansible://node1", ansible_inventory=host.backend.ansible_inventory)
    assert mine["key"] == stack(node1)["key"]
    assert mine["hip"].startswith("7.0.2") and mine["arch"] == "gfx942" and mine["platform"] == "rocm"


def test_one_archive_serves_both_hosts_and_the_build_host_took_its_own_in_place(host):
    # node1 assembled the stack where it serves it and packed it; node2 unpacked that archive and ran no pip.
    mine = stack(host)
    for wheel in mine["wheels"]:
        assert wheel["path"].startswith(CACHE + "/" + wheel["component"] + "/" + wheel["key"] + "/")
    node1 = host.get_host("ansible://node1", ansible_inventory=host.backend.ansible_inventory)
    assert mine["archive"]["sha256"] and mine["archive"] == stack(node1)["archive"]
    assert not host.file(CACHE).exists or host.backend.get_hostname() == "node1"


def test_service_answers_on_each_host(host):
    assert host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == "200"


def test_each_stack_holds_its_runtime_closure(host):
    check = host.run("/opt/instinct-stack/current/venv/bin/pip check")
    assert check.rc == 0, check.stdout + check.stderr


def test_hipcc_finds_cxx_headers_beside_two_gccs(host):
    # The toolchain role made GCC 11 the default (update-alternatives), but ROCm's clang ignores that and takes the
    # newest GCC installation, 12: hipcc compiles only because the role installed that one's C++ headers.
    gccs = host.check_output("ls /usr/lib/gcc/x86_64-linux-gnu").split()
    assert {"11", "12"} <= set(gccs), gccs
    assert host.check_output("g++ -dumpversion").split(".")[0] == "11"
    selected = host.run("/opt/rocm/lib/llvm/bin/clang++ -v -x c++ -fsyntax-only /dev/null")
    assert "Selected GCC installation: /usr/lib/gcc/x86_64-linux-gnu/12" in selected.stderr, selected.stderr
    assert host.package("libstdc++-12-dev").is_installed
    source = '#include <cmath>\n#include <cstdio>\nint main() { std::printf("%.1f", std::sqrt(16.0)); }\n'
    probe = host.check_output("mktemp -d")  # the ansible user's own directory
    host.check_output("printf '%%s' %s > %s/cmath_probe.cpp", source, probe)
    build = host.run("/opt/rocm/bin/hipcc --offload-arch=gfx942 -o %s/cmath_probe %s/cmath_probe.cpp", probe, probe)
    assert build.rc == 0, build.stderr
    assert host.check_output("%s/cmath_probe", probe) == "4.0"


def test_both_hosts_hold_the_same_locked_closure(host):
    mine = stack(host)
    node1 = host.get_host("ansible://node1", ansible_inventory=host.backend.ansible_inventory)
    lock = mine["lock"]
    assert lock["sha256"] == stack(node1)["lock"]["sha256"]
    assert host.file(lock["file"]).sha256sum == lock["sha256"]
    # Every installed distribution is a locked one at the locked version (amdsmi comes from ROCm's own tree).
    installed = json.loads(host.check_output("/opt/instinct-stack/current/venv/bin/pip list --format json"))
    versions = {entry["name"].lower().replace("_", "-"): entry["version"] for entry in installed}
    versions.pop("amdsmi")
    versions.pop("pip", None)  # the virtualenv's own; setuptools is locked (vLLM's rocm.txt pins it)
    assert versions == {name: entry["version"] for name, entry in lock["packages"].items()}
    for name in ("torch", "triton", "vllm", "sympy"):
        assert name in lock["packages"] or name.replace("triton", "pytorch-triton-rocm") in lock["packages"], name


def test_torch_was_built_with_a_cmake_every_build_of_the_shared_venv_accepts(host):
    # One build virtualenv serves torch, Triton and vLLM: PyTorch's requirements-build.txt asks cmake>=3.27 only,
    # vLLM's requirements/rocm-build.txt and Triton's pyproject.toml exclude CMake 4. The torch build, the first one,
    # ran with a cmake inside all three bounds (the fixture torch records the cmake it ran).
    python = "/opt/instinct-stack/current/venv/bin/python"
    cmake = host.check_output("%s -c 'import torch.version as v; print(v.cmake_version)'", python)
    version = tuple(int(part) for part in cmake.split(".")[:3])
    assert (3, 27) <= version < (4,), cmake
