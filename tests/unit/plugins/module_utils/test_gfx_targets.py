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


@pytest.mark.parametrize(
    "device_id, gfx, product",
    [
        (0x738C, "gfx908", "MI100"),
        (0x740F, "gfx90a", "MI210"),
        (0x740C, "gfx90a", "MI250"),
        (0x74A1, "gfx942", "MI300X"),
        (0x75A3, "gfx950", "MI355X"),
    ],
)
def test_pci_table(device_id, gfx, product):
    found_gfx, name = pci_device(device_id)
    assert found_gfx == gfx
    assert product in name


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
