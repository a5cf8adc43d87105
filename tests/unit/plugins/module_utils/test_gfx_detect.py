import pytest

from ansible_collections.instinct.stack.plugins.module_utils.gfx_detect import (
    DetectionError,
    detect,
    detect_kfd,
    detect_pci,
    parse_kfd_properties,
    parse_rocminfo,
    pci_address,
)
from ansible_collections.instinct.stack.plugins.module_utils.gfx_targets import UnknownArchError


def runner(text, rc=0):
    return lambda: (rc, text, "")


def test_rocminfo_mi300x_host(rocminfo_text):
    gpus = parse_rocminfo(rocminfo_text("mi300x-8gpu"))
    assert len(gpus) == 8
    assert [gpu["node"] for gpu in gpus] == list(range(2, 10))
    first = gpus[0]
    assert first == {
        "node": 2,
        "gfx": "gfx942",
        "marketing_name": "AMD Instinct MI300X",
        "pci_device_id": "0x74a1",
        "pci_address": "0000:0c:00.0",
        "compute_units": 304,
        "xnack": False,
    }


def test_rocminfo_mi250x_gcds(rocminfo_text):
    gpus = parse_rocminfo(rocminfo_text("mi250x-2gcd"))
    assert [(g["gfx"], g["compute_units"], g["pci_device_id"]) for g in gpus] == [("gfx90a", 110, "0x740c")] * 2
    assert gpus[1]["pci_address"] == "0000:c6:00.0"


def test_rocminfo_mi210(rocminfo_text):
    gpus = parse_rocminfo(rocminfo_text("mi210-2gpu"))
    assert {g["marketing_name"] for g in gpus} == {"AMD Instinct MI210"}
    assert {g["gfx"] for g in gpus} == {"gfx90a"}


def test_rocminfo_mixed_host_reads_xnack_per_agent(rocminfo_text):
    gpus = parse_rocminfo(rocminfo_text("mixed-mi100-mi210"))
    assert [(g["gfx"], g["xnack"]) for g in gpus] == [("gfx908", False), ("gfx90a", True)]


def test_rocminfo_unsupported_gpu_names_the_arch(rocminfo_text):
    with pytest.raises(UnknownArchError, match="gfx1100"):
        parse_rocminfo(rocminfo_text("rx7900xtx-unsupported"))


def test_kfd_properties_parse():
    props = parse_kfd_properties("simd_count 440\ngfx_target_version 90010\nbogus line here\nname notanumber\n")
    assert props == {"simd_count": 440, "gfx_target_version": 90010}


def test_kfd_mi300x_tree_agrees_with_rocminfo(fixture_path, rocminfo_text):
    kfd = detect_kfd(fixture_path("kfd", "mi300x-8gpu"))
    rocminfo = parse_rocminfo(rocminfo_text("mi300x-8gpu"))

    def without_xnack(gpus):
        return [{key: value for key, value in gpu.items() if key != "xnack"} for gpu in gpus]

    assert without_xnack(kfd) == without_xnack(rocminfo)
    assert all(g["xnack"] is None for g in kfd)


def test_kfd_skips_cpu_nodes_and_sorts_numerically(fixture_path):
    gpus = detect_kfd(fixture_path("kfd", "mixed-mi100-mi210"))
    assert [(g["node"], g["gfx"], g["compute_units"]) for g in gpus] == [(1, "gfx908", 120), (2, "gfx90a", 104)]


def test_kfd_unsupported_target_names_value_and_node(fixture_path):
    with pytest.raises(UnknownArchError, match=r"KFD node 1 .*gfx_target_version 110000.*gfx1100"):
        detect_kfd(fixture_path("kfd", "rx7900xtx-unsupported"))


def test_kfd_absent_tree_is_none(tmp_path):
    assert detect_kfd(str(tmp_path)) is None


def test_pci_ignores_audio_functions_and_other_vendors(pci_sysfs):
    gpus = detect_pci(pci_sysfs("mi210-with-audio"))
    assert [(g["pci_address"], g["gfx"], g["marketing_name"]) for g in gpus] == [
        ("0000:03:00.0", "gfx90a", "AMD Instinct MI210")
    ]
    assert gpus[0]["node"] is None and gpus[0]["compute_units"] is None


def test_pci_unknown_device_names_the_id(pci_sysfs):
    with pytest.raises(UnknownArchError, match="1002:744c"):
        detect_pci(pci_sysfs("rx7900xtx-unsupported"))


def test_pci_address_format():
    assert pci_address(0, 0xC100) == "0000:c1:00.0"
    assert pci_address(1, 0x0309) == "0001:03:01.1"


def test_auto_prefers_kfd(fixture_path, rocminfo_text):
    result = detect("auto", fixture_path("kfd", "mi250x-2gcd"), runner(rocminfo_text("mi300x-8gpu")))
    assert result["source_used"] == "kfd"
    assert result["gfx_arch"] == ["gfx90a"]
    assert result["pytorch_rocm_arch"] == "gfx90a"


def test_auto_falls_back_to_rocminfo_then_pci(tmp_path, rocminfo_text, pci_sysfs):
    result = detect("auto", str(tmp_path), runner(rocminfo_text("mixed-mi100-mi210")))
    assert result["source_used"] == "rocminfo"
    assert result["pytorch_rocm_arch"] == "gfx908;gfx90a"
    root = pci_sysfs("mi300x-2gpu")
    result = detect("auto", root, None)
    assert result["source_used"] == "pci"
    assert len(result["gpus"]) == 2
    assert result["sources_tried"][:2] == [
        "kfd: no KFD topology under %s (amdgpu kernel driver not loaded?)" % root,
        "rocminfo: rocminfo not found",
    ]


def test_rocminfo_failure_is_reported(tmp_path, rocminfo_text):
    with pytest.raises(DetectionError) as info:
        detect("rocminfo", str(tmp_path), runner(rocminfo_text("no-gpu"), rc=1))
    assert "rocminfo exited 1: ROCk module is NOT loaded" in str(info.value)


def test_no_gpu_lists_every_source_tried(pci_sysfs):
    root = pci_sysfs("no-amd-gpu")
    with pytest.raises(DetectionError) as info:
        detect("auto", root, None)
    message = str(info.value)
    for expected in ("kfd: no KFD topology", "rocminfo: rocminfo not found", "pci: no AMD GPU found", "require_gpu"):
        assert expected in message


def test_no_gpu_allowed(fixture_path):
    result = detect("auto", fixture_path("kfd", "cpu-only"), None, require_gpu=False)
    assert result["gpus"] == [] and result["gfx_arch"] == [] and result["pytorch_rocm_arch"] == ""
    assert result["source_used"] is None


def test_explicit_source_does_not_fall_back(fixture_path):
    with pytest.raises(DetectionError, match="pci: no PCI device tree"):
        detect("pci", fixture_path("kfd", "mi250x-2gcd"), None)


def test_unknown_arch_stops_auto_instead_of_trying_next_source(fixture_path, rocminfo_text):
    with pytest.raises(UnknownArchError):
        detect("auto", fixture_path("kfd", "rx7900xtx-unsupported"), runner(rocminfo_text("mi300x-8gpu")))
