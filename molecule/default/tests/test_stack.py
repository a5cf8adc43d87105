"""The source-built stack: wheels built once per key from the mirror on the build host (an nspawn machine), installed
in a verified venv behind `current` on the inference host (the qemu guest)."""

import json

import pytest

STACK_ROOT = "/opt/instinct-stack"
CACHE = "/var/cache/instinct-stack/wheels"
SOURCES = "/var/lib/instinct-stack/src"

testinfra_hosts = ["inference_hosts"]


@pytest.fixture
def builder(host):
    return host.get_host("ansible://instinct-builder", ansible_inventory=host.backend.ansible_inventory)


def build_infos(host, component):
    listing = host.check_output("sudo find %s/%s -mindepth 2 -maxdepth 2 -name build-info.json", CACHE, component)
    return [json.loads(host.check_output("sudo cat %s", path)) for path in listing.split()]


def test_one_build_per_component_on_the_build_host_alone(host, builder):
    for component in ("pytorch", "triton", "vllm"):
        infos = build_infos(builder, component)
        assert len(infos) == 1, (component, infos)
    # The inference host holds no build and no wheel cache at all: its stack came whole, as the build host's archive.
    assert not host.file(CACHE).exists
    assert not host.file(SOURCES + "/pytorch").exists


def test_torch_wheel_metadata_records_arch_and_refs(builder):
    (torch,) = build_infos(builder, "pytorch")
    assert torch["metadata"]["arch"] == "gfx942"
    assert torch["metadata"]["ref"] == "v2.9.0-fixture"
    assert len(torch["metadata"]["commit"]) == 40
    assert torch["steps"] == ["hipify", "bdist_wheel"]
    assert torch["wheel_files"][0].startswith("torch-2.9.0a0+rocm7.0.2-cp311-cp311-linux_x86_64")
    # Bound by the build host's memory at 4 GiB a job (2 GiB kept back) as well as by its cores.
    facts = builder.ansible("setup", "filter=ansible_memtotal_mb,ansible_processor_vcpus")["ansible_facts"]
    fit = (facts["ansible_memtotal_mb"] - 2048) // 4096
    assert int(torch["metadata"]["max_jobs"]) == max(1, min(facts["ansible_processor_vcpus"], fit))


def test_triton_is_the_commit_pytorch_pins(builder):
    (triton,) = build_infos(builder, "triton")
    pin = builder.check_output("sudo cat %s/pytorch/.ci/docker/ci_commit_pins/triton.txt", SOURCES)
    assert triton["metadata"]["commit"] == pin.strip()
    assert triton["metadata"]["pinned_by_pytorch"] is True


def test_vllm_built_against_the_source_built_torch(builder):
    (vllm,) = build_infos(builder, "vllm")
    (torch,) = build_infos(builder, "pytorch")
    assert vllm["metadata"]["torch_key"] == torch["key"]
    assert "use existing torch" in vllm["steps"]


def test_current_points_at_a_verified_stack(host):
    current = host.file(STACK_ROOT + "/current")
    assert current.is_symlink
    verified = json.loads(host.file(current.linked_to + "/.verified").content_string)
    assert verified["hip"].startswith("7.0.2") and verified["arch"] == "gfx942"
    assert verified["gpu"] is False  # no /dev/kfd in the guest
    # vLLM's own platform detection, through the amdsmi installed from ROCm's share/amd_smi.
    assert verified["platform"] == "rocm" and verified["amdsmi"].startswith("26.0.0")


def test_stack_venv_imports_the_rocm_build(host):
    out = host.check_output(
        STACK_ROOT + '/current/venv/bin/python -c "import json, torch, triton, vllm, vllm._build_info as b; '
        'print(json.dumps([torch.version.hip, torch.version.rocm_arch, torch.backend(), triton.commit, b.torch]))"'
    )
    hip, arch, backend, triton_commit, vllm_torch = json.loads(out)
    assert hip.startswith("7.0.2") and arch == "gfx942" and backend == "hip"
    assert vllm_torch.startswith("2.9.0a0+rocm7.0.2") and len(triton_commit) == 40
    assert host.file(STACK_ROOT + "/current/venv/bin/vllm").exists


def test_submodules_checked_out_recursively(builder):
    assert "fixture-lib" in builder.check_output("sudo cat %s/pytorch/third_party/fixture-lib/VERSION", SOURCES)


def test_amdsmi_comes_from_rocms_share_amd_smi_and_answers_for_the_gpus(host):
    out = host.check_output(
        STACK_ROOT + '/current/venv/bin/python -c "import amdsmi; amdsmi.amdsmi_init(); '
        'print(len(amdsmi.amdsmi_get_processor_handles()), amdsmi.__file__)"'
    )
    count, path = out.split()
    # Installed into the stack's virtualenv, not imported from ROCm's tree.
    assert count == "8" and path.startswith(STACK_ROOT + "/current/venv/lib/") and "/site-packages/amdsmi/" in path
    assert host.file("/opt/rocm-7.0.2/share/amd_smi/pyproject.toml").exists
    # pip built in the stack's copy: ROCm's own tree stays as the package installed it.
    assert not host.file("/opt/rocm-7.0.2/share/amd_smi/build").exists


def test_torch_built_by_cmake_and_ninja_from_the_build_venv(host, builder):
    # The checkout's requirements-build.txt went into the build virtualenv, whose bin leads the build's PATH.
    cmake = builder.check_output("/var/lib/instinct-stack/build-venv/bin/cmake --version").split()[2]
    assert tuple(int(part) for part in cmake.split(".")[:2]) >= (3, 27)
    assert builder.file("/var/lib/instinct-stack/build-venv/bin/ninja").exists
    assert not host.file("/var/lib/instinct-stack/build-venv").exists
    generator = host.check_output(
        STACK_ROOT + '/current/venv/bin/python -c "import torch; print(torch.version.cmake_generator)"'
    )
    assert generator == "Ninja"


def test_stack_venv_holds_the_whole_locked_closure_from_the_build_hosts_archive(host, builder):
    # The guest unpacked the stack the build host assembled (at the same path) and packed; it ran no pip.
    verified = json.loads(host.file(host.file(STACK_ROOT + "/current").linked_to + "/.verified").content_string)
    archive = verified["archive"]
    assert archive["file"] == "%s-%s.tar.zst" % (verified["key"], archive["sha256"][:16])
    assert (
        builder.check_output("sudo sha256sum /var/cache/instinct-stack/stacks/%s", archive["file"]).split()[0]
        == (archive["sha256"])
    )
    assert not host.file("/var/cache/instinct-stack/wheels").exists
    check = host.run(STACK_ROOT + "/current/venv/bin/pip check")
    assert check.rc == 0, check.stdout + check.stderr
    assert host.file(verified["lock"]["file"]).sha256sum == verified["lock"]["sha256"]


def test_builds_took_their_downloads_from_the_mirror(host, builder):
    # Triton built offline against the prebuilt LLVM its cmake/llvm-hash.txt names; torch against AOTriton's runtime and
    # the gfx942 image pack that cmake/External/aotriton.cmake names; both fetched from the mirror's files/.
    (triton,) = build_infos(builder, "triton")
    (torch,) = build_infos(builder, "pytorch")
    assert triton["metadata"]["llvm"] == "llvm-7d5de303-ubuntu-x64"
    assert torch["metadata"]["aotriton"].startswith("aotriton-0.11b-rocm7.0-")
    inputs = "/var/cache/instinct-stack/downloads/"
    assert builder.file(inputs + "llvm-7d5de303-ubuntu-x64/lib/cmake/mlir/MLIRConfig.cmake").exists
    images = builder.check_output("ls %s%s/lib/aotriton.images", inputs, torch["metadata"]["aotriton"]).split()
    assert images == ["amd-gfx942"]
    python = STACK_ROOT + "/current/venv/bin/python"
    assert (
        host.check_output(python + " -c 'import triton._build_info as b; print(b.llvm)'") == "llvm-7d5de303-ubuntu-x64"
    )
    flash = host.check_output(python + " -c 'import torch; print(torch.backends.cuda.is_flash_attention_available())'")
    assert flash == "True"
