import shutil

import pytest

from ansible_collections.instinct.stack.plugins.module_utils.gfx_detect import (
    DetectionError,
    detect,
    detect_kfd,
    detect_pci,
    kfd_agents,
    parse_kfd_properties,
    parse_rocminfo,
    pci_address,
    select_gpus,
    summarize,
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


RADEON_W7900_EXCLUDED = {
    "node": 1,
    "pci_address": "0000:03:00.0",
    "pci_device_id": "0x7448",
    "gfx": "gfx1100",
    "marketing_name": None,
    "reason": "gfx1100 is a Radeon architecture, a compute target only with allow_radeon=true",
}


def test_kfd_mixed_host_keeps_instinct_and_excludes_the_display_card(fixture_path):
    result = detect("kfd", fixture_path("kfd", "mi300x-radeon-display"), None)
    assert [(g["node"], g["gfx"], g["pci_address"]) for g in result["gpus"]] == [
        (2, "gfx942", "0000:0c:00.0"),
        (3, "gfx942", "0000:22:00.0"),
    ]
    assert result["excluded"] == [RADEON_W7900_EXCLUDED]
    # The display card is KFD's first GPU node, so HIP numbers it 0 and the MI300X cards 1 and 2.
    assert result["hip_visible_devices"] == "1,2"
    assert result["pytorch_rocm_arch"] == "gfx942"
    assert result["sources_tried"] == ["kfd: found 2 GPU(s), excluded 1"]


def test_kfd_mixed_host_excludes_the_apu_graphics_between_the_cards(fixture_path):
    for allow_radeon in (False, True):
        result = detect("kfd", fixture_path("kfd", "mi210-ryzen-igpu"), None, allow_radeon=allow_radeon)
        assert [(g["node"], g["gfx"], g["compute_units"]) for g in result["gpus"]] == [
            (1, "gfx90a", 104),
            (3, "gfx90a", 104),
        ]
        assert [(e["node"], e["gfx"], e["pci_device_id"], e["pci_address"]) for e in result["excluded"]] == [
            (2, "gfx1036", "0x164e", "0000:13:00.0")
        ]
        assert result["excluded"][0]["reason"].startswith("gfx1036 is not a compute target")
        assert result["hip_visible_devices"] == "0,2"


def test_rocminfo_mixed_hosts_agree_with_kfd(fixture_path, rocminfo_text):
    for name in ("mi300x-radeon-display", "mi210-ryzen-igpu"):
        kfd = detect("kfd", fixture_path("kfd", name), None)
        rocminfo = detect("rocminfo", fixture_path("kfd", "cpu-only"), runner(rocminfo_text(name)))

        def without_xnack(gpus):
            return [{key: value for key, value in gpu.items() if key != "xnack"} for gpu in gpus]

        assert without_xnack(rocminfo["gpus"]) == without_xnack(kfd["gpus"])
        assert rocminfo["hip_visible_devices"] == kfd["hip_visible_devices"]
        assert [dict(entry, marketing_name=None) for entry in rocminfo["excluded"]] == kfd["excluded"]


def test_rocminfo_mixed_host_names_the_excluded_gpu(rocminfo_text):
    result = detect("rocminfo", "/nonexistent", runner(rocminfo_text("mi210-ryzen-igpu")))
    assert [(e["node"], e["gfx"], e["marketing_name"]) for e in result["excluded"]] == [
        (2, "gfx1036", "AMD Radeon Graphics")
    ]
    assert [g["xnack"] for g in result["gpus"]] == [False, False]
    assert parse_rocminfo(rocminfo_text("mi300x-radeon-display"))[0]["marketing_name"] == "AMD Instinct MI300X"


def test_pci_mixed_host_excludes_display_gpus_by_device_table(pci_sysfs):
    result = detect("pci", pci_sysfs("mi300x-radeon-display"), None)
    assert [(g["pci_address"], g["gfx"], g["marketing_name"]) for g in result["gpus"]] == [
        ("0000:0c:00.0", "gfx942", "AMD Instinct MI300X"),
        ("0000:22:00.0", "gfx942", "AMD Instinct MI300X"),
    ]
    (excluded,) = result["excluded"]
    assert (excluded["pci_address"], excluded["pci_device_id"], excluded["gfx"], excluded["node"]) == (
        "0000:03:00.0",
        "0x7448",
        None,
        None,
    )
    assert "1002:7448 is not in the AMD Instinct device table" in excluded["reason"]
    assert result["hip_visible_devices"] == "1,2"
    result = detect("pci", pci_sysfs("mi210-ryzen-igpu"), None)
    assert [g["pci_address"] for g in result["gpus"]] == ["0000:03:00.0", "0000:43:00.0"]
    assert [e["pci_device_id"] for e in result["excluded"]] == ["0x164e"]
    assert result["hip_visible_devices"] == "0,2"


def test_pci_source_reads_virtual_functions(pci_sysfs):
    gpus = detect_pci(pci_sysfs("mi300x-vf-guest"))
    assert [(g["gfx"], g["marketing_name"]) for g in gpus] == [
        ("gfx942", "AMD Instinct MI300X VF"),
        ("gfx942", "AMD Instinct MI300X VF"),
        ("gfx942", "AMD Instinct MI325X VF"),
    ]


def test_radeon_is_a_compute_target_when_allowed(fixture_path, rocminfo_text):
    result = detect("kfd", fixture_path("kfd", "mi300x-radeon-display"), None, allow_radeon=True)
    assert result["gfx_arch"] == ["gfx1100", "gfx942"]
    assert result["pytorch_rocm_arch"] == "gfx1100;gfx942"
    assert result["excluded"] == [] and result["hip_visible_devices"] == "0,1,2"
    gpus = parse_rocminfo(rocminfo_text("rx7900xtx-unsupported"), allow_radeon=True)
    assert [(g["gfx"], g["marketing_name"]) for g in gpus] == [("gfx1100", "Radeon RX 7900 XTX")]
    assert [g["gfx"] for g in detect_kfd(fixture_path("kfd", "rx7900xtx-unsupported"), allow_radeon=True)] == [
        "gfx1100"
    ]


def test_pci_source_cannot_tell_a_radeon_arch_even_when_allowed(pci_sysfs):
    with pytest.raises(UnknownArchError, match="1002:744c.*kfd and rocminfo sources"):
        detect("pci", pci_sysfs("rx7900xtx-unsupported"), None, allow_radeon=True)


def test_host_with_only_unsupported_gpus_fails_naming_each(fixture_path, rocminfo_text):
    with pytest.raises(UnknownArchError) as info:
        detect("auto", fixture_path("kfd", "rx7900xtx-unsupported"), runner(rocminfo_text("mi300x-8gpu")))
    message = str(info.value)
    assert message.startswith("no AMD GPU on this host is a compute target (supported: gfx908, gfx90a, gfx942, gfx950;")
    assert "KFD node 1 (" in message and "gfx_target_version 110000): gfx1100 is a Radeon architecture" in message
    assert "require_gpu=false" in message


def test_host_with_only_unsupported_gpus_without_require_gpu(fixture_path, rocminfo_text):
    result = detect("auto", fixture_path("kfd", "rx7900xtx-unsupported"), runner(rocminfo_text("mi300x-8gpu")), False)
    assert result["gpus"] == [] and result["gfx_arch"] == [] and result["pytorch_rocm_arch"] == ""
    assert result["hip_visible_devices"] == ""
    assert [(e["node"], e["gfx"]) for e in result["excluded"]] == [(1, "gfx1100")]
    assert result["source_used"] == "kfd"
    assert result["sources_tried"] == ["kfd: found 0 GPU(s), excluded 1"]


def test_unknown_instinct_accelerator_on_pci_is_an_error_not_excluded(pci_sysfs):
    with pytest.raises(
        UnknownArchError, match=r"PCI device 1002:75a8 at 0000:83:00\.0 is an AMD processing accelerator"
    ):
        detect("pci", pci_sysfs("mi350p-unknown-accelerator"), None)


def test_unknown_data_center_arch_in_kfd_is_an_error_not_excluded(fixture_path, tmp_path):
    root = tmp_path / "sysfs"
    shutil.copytree(fixture_path("kfd", "mi300x-radeon-display"), str(root))
    properties = root / "class" / "kfd" / "kfd" / "topology" / "nodes" / "3" / "properties"
    properties.write_text(properties.read_text().replace("gfx_target_version 90402", "gfx_target_version 90403"))
    with pytest.raises(UnknownArchError, match=r"KFD node 3 .*gfx_target_version 90403\) is gfx943, which is not a"):
        detect("kfd", str(root), None)


def test_instinct_pci_id_with_an_unknown_arch_is_an_error(rocminfo_text):
    text = rocminfo_text("mi300x-radeon-display").replace(
        "  Name:                    gfx942   ", "  Name:                    gfx90c   ", 1
    )
    with pytest.raises(UnknownArchError, match=r"rocminfo agent on node 2 \(Name: gfx90c\) is gfx90c"):
        parse_rocminfo(text)


def test_select_gpus_counts_hip_indices_over_every_gpu(fixture_path):
    agents = kfd_agents(fixture_path("kfd", "mi210-ryzen-igpu"))
    assert len(agents) == 3
    selection = select_gpus(agents)
    assert [g["node"] for g in selection["gpus"]] == [1, 3]
    assert selection["hip_visible_devices"] == "0,2"
    assert select_gpus([]) == {"gpus": [], "excluded": [], "hip_visible_devices": ""}


def test_summarize_numbers_every_gpu_when_none_is_excluded(fixture_path):
    result = summarize(detect_kfd(fixture_path("kfd", "mi300x-8gpu")), "kfd")
    assert result["hip_visible_devices"] == "0,1,2,3,4,5,6,7" and result["excluded"] == []
