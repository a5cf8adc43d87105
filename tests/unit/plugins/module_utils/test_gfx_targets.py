import pytest

from ansible_collections.instinct.stack.plugins.module_utils import gfx_targets
from ansible_collections.instinct.stack.plugins.module_utils.gfx_targets import (
    UnknownArchError,
    gfx_from_target_version,
    pci_device,
    pytorch_rocm_arch,
    validate_arch_list,
)


@pytest.mark.parametrize(
    "target_version, gfx",
    [
        (90008, "gfx908"),
        (90010, "gfx90a"),
        (90402, "gfx942"),
        (90500, "gfx950"),
        (110000, "gfx1100"),
        (100300, "gfx1030"),
    ],
)
def test_target_version_decodes_to_gfx_name(target_version, gfx):
    assert gfx_from_target_version(target_version) == gfx


@pytest.mark.parametrize("bad", [0, -1, 91600, 90016])
def test_invalid_target_version_is_refused(bad):
    with pytest.raises(UnknownArchError, match=str(bad)):
        gfx_from_target_version(bad)


def test_unknown_pci_device_names_the_id():
    with pytest.raises(UnknownArchError, match="1002:744c"):
        pci_device(0x744C)


def test_every_pci_device_maps_to_a_supported_arch():
    assert {entry[0] for entry in gfx_targets.PCI_DEVICES.values()} <= set(gfx_targets.GFX_ARCHS)


def test_arch_list_accepts_strings_and_feature_suffixes():
    assert validate_arch_list("gfx942;gfx90a,gfx942 gfx90a:xnack+") == ["gfx90a", "gfx942"]
    assert pytorch_rocm_arch(["gfx942", "gfx90a"]) == "gfx90a;gfx942"


@pytest.mark.parametrize("bad", ["gfx1100", "sm_90", "gfx9422"])
def test_arch_list_refuses_unknown_names(bad):
    with pytest.raises(UnknownArchError, match=bad):
        validate_arch_list(["gfx942", bad])


def test_empty_arch_list_is_refused():
    with pytest.raises(UnknownArchError, match="empty"):
        validate_arch_list("")


# Every Instinct PCI ID, virtual functions included, with the arch and product the upstream tables give
# (see the comment above PCI_DEVICES for which of amdgpu_drv.c, libdrm amdgpu.ids and pci.ids lists each).
@pytest.mark.parametrize(
    "device_id, gfx, product",
    [
        (0x7388, "gfx908", "MI100"),
        (0x738C, "gfx908", "MI100"),
        (0x738E, "gfx908", "MI100"),
        (0x7390, "gfx908", "MI100"),
        (0x7408, "gfx90a", "MI250X"),
        (0x740C, "gfx90a", "MI250"),
        (0x740F, "gfx90a", "MI210"),
        (0x7410, "gfx90a", "MI200"),
        (0x74A0, "gfx942", "MI300A"),
        (0x74A1, "gfx942", "MI300X"),
        (0x74A2, "gfx942", "MI308X"),
        (0x74A5, "gfx942", "MI325X"),
        (0x74A8, "gfx942", "MI308X HF"),
        (0x74A9, "gfx942", "MI300X HF"),
        (0x74B5, "gfx942", "MI300X VF"),
        (0x74B6, "gfx942", "MI308X"),
        (0x74B9, "gfx942", "MI325X VF"),
        (0x74BD, "gfx942", "MI300X HF"),
        (0x75A0, "gfx950", "MI350X"),
        (0x75A3, "gfx950", "MI355X"),
        (0x75B0, "gfx950", "MI350X VF"),
        (0x75B3, "gfx950", "MI355X VF"),
    ],
)
def test_instinct_pci_ids_including_vfs(device_id, gfx, product):
    found_gfx, name = pci_device(device_id)
    assert found_gfx == gfx
    assert product in name
    assert name.startswith("AMD Instinct")


def test_radeon_archs_are_separate_from_the_instinct_table():
    assert set(gfx_targets.RADEON_ARCHS) == {"gfx1100", "gfx1101", "gfx1200", "gfx1201"}
    assert not set(gfx_targets.RADEON_ARCHS) & set(gfx_targets.GFX_ARCHS)
    assert not {entry[0] for entry in gfx_targets.PCI_DEVICES.values()} & set(gfx_targets.RADEON_ARCHS)


def test_radeon_arch_list_needs_the_opt_in():
    with pytest.raises(UnknownArchError, match="gfx1201.*with allow_radeon=true also"):
        validate_arch_list("gfx942;gfx1201")
    assert validate_arch_list("gfx942;gfx1201", allow_radeon=True) == ["gfx1201", "gfx942"]
    assert pytorch_rocm_arch(["gfx1100", "gfx90a"], allow_radeon=True) == "gfx1100;gfx90a"
    with pytest.raises(UnknownArchError, match="gfx1036"):
        validate_arch_list("gfx1036", allow_radeon=True)


@pytest.mark.parametrize(
    "gfx, instinct",
    [
        ("gfx908", True),
        ("gfx90a", True),
        ("gfx940", True),
        ("gfx942", True),
        ("gfx943", True),
        ("gfx950", True),
        ("gfx9a0", True),
        ("gfx900", False),
        ("gfx906", False),
        ("gfx90c", False),
        ("gfx1036", False),
        ("gfx1100", False),
        ("gfx1201", False),
        ("", False),
    ],
)
def test_looks_like_instinct_arch(gfx, instinct):
    assert gfx_targets.looks_like_instinct_arch(gfx) is instinct


def test_compute_target_exclusion_reasons():
    assert gfx_targets.compute_target_exclusion("gfx942") is None
    assert "allow_radeon=true" in gfx_targets.compute_target_exclusion("gfx1100")
    assert gfx_targets.compute_target_exclusion("gfx1100", allow_radeon=True) is None
    assert "gfx1036 is not a compute target" in gfx_targets.compute_target_exclusion("gfx1036", allow_radeon=True)
