# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of AMD GPU architectures this collection supports.

Every role, module and filter reads it from here; nothing else lists gfx names,
KFD target versions or PCI device IDs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

AMD_PCI_VENDOR_ID = 0x1002

# gfx name -> facts about the architecture. Only architectures that ROCm 7.x
# builds PyTorch, Triton and vLLM for are listed; anything else is refused.
GFX_ARCHS = {
    "gfx908": {"family": "CDNA", "products": ["AMD Instinct MI100"]},
    "gfx90a": {"family": "CDNA2", "products": ["AMD Instinct MI210", "AMD Instinct MI250", "AMD Instinct MI250X"]},
    "gfx942": {
        "family": "CDNA3",
        "products": ["AMD Instinct MI300A", "AMD Instinct MI300X", "AMD Instinct MI308X", "AMD Instinct MI325X"],
    },
    "gfx950": {"family": "CDNA4", "products": ["AMD Instinct MI350X", "AMD Instinct MI355X"]},
}

# PCI device ID (vendor 0x1002) -> (gfx name, marketing name), as the amdgpu
# driver and libdrm's amdgpu.ids name them. Lets the arch be known before ROCm is installed.
PCI_DEVICES = {
    0x738C: ("gfx908", "AMD Instinct MI100"),
    0x738E: ("gfx908", "AMD Instinct MI100"),
    0x7408: ("gfx90a", "AMD Instinct MI250X"),
    0x740C: ("gfx90a", "AMD Instinct MI250X / MI250"),
    0x740F: ("gfx90a", "AMD Instinct MI210"),
    0x74A0: ("gfx942", "AMD Instinct MI300A"),
    0x74A1: ("gfx942", "AMD Instinct MI300X"),
    0x74A2: ("gfx942", "AMD Instinct MI308X"),
    0x74A5: ("gfx942", "AMD Instinct MI325X"),
    0x74A8: ("gfx942", "AMD Instinct MI308X HF"),
    0x74A9: ("gfx942", "AMD Instinct MI300X HF"),
    0x74B5: ("gfx942", "AMD Instinct MI300X VF"),
    0x74B6: ("gfx942", "AMD Instinct MI308X"),
    0x74BD: ("gfx942", "AMD Instinct MI300X HF"),
    0x75A0: ("gfx950", "AMD Instinct MI350X"),
    0x75A3: ("gfx950", "AMD Instinct MI355X"),
    0x75B0: ("gfx950", "AMD Instinct MI350X VF"),
    0x75B3: ("gfx950", "AMD Instinct MI355X VF"),
}


class UnknownArchError(ValueError):
    """A value names no architecture in the table."""


def gfx_from_target_version(target_version):
    """Decode KFD's gfx_target_version (major*10000 + minor*100 + stepping) to a gfx name.

    >>> gfx_from_target_version(90010)
    'gfx90a'
    """
    value = int(target_version)
    major, minor, stepping = value // 10000, (value // 100) % 100, value % 100
    if value <= 0 or minor > 15 or stepping > 15:
        raise UnknownArchError("gfx_target_version %r is not a valid KFD target version" % target_version)
    return "gfx%d%x%x" % (major, minor, stepping)


def supported_arch(gfx, what):
    """Return gfx if the table knows it, else raise naming the value and where it came from."""
    if gfx not in GFX_ARCHS:
        raise UnknownArchError(
            "%s is %s, which is not a supported architecture (supported: %s); "
            "add it to plugins/module_utils/gfx_targets.py if ROCm 7 supports it"
            % (what, gfx, ", ".join(sorted(GFX_ARCHS)))
        )
    return gfx


def pci_device(device_id):
    """Return (gfx, marketing name) for an AMD PCI device ID, or raise naming it."""
    try:
        return PCI_DEVICES[device_id]
    except KeyError:
        raise UnknownArchError(
            "PCI device 1002:%04x is not in the AMD Instinct device table (known: %s)"
            % (device_id, ", ".join("%04x" % known for known in sorted(PCI_DEVICES)))
        ) from None


def validate_arch_list(archs):
    """Validate a list (or ';'/','/space separated string) of gfx names; return the sorted unique list."""
    if isinstance(archs, str):
        archs = archs.replace(";", " ").replace(",", " ").split()
    names = [str(arch).split(":", maxsplit=1)[0].strip() for arch in archs]
    if not names:
        raise UnknownArchError("the arch list is empty")
    for name in names:
        supported_arch(name, "arch list entry %r" % name)
    return sorted(set(names))


def pytorch_rocm_arch(archs):
    """The PYTORCH_ROCM_ARCH value for a list of gfx names."""
    return ";".join(validate_arch_list(archs))
