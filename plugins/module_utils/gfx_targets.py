# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of AMD GPU architectures this collection supports.

Every role, module and filter reads it from here; nothing else lists gfx names,
KFD target versions or PCI device IDs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

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

# Radeon architectures vLLM's ROCm support covers (Radeon RX 7900 series gfx1100/gfx1101, Radeon RX 9000
# series gfx1200/gfx1201). They are compute targets only when the user opts in (gfx_arch's allow_radeon);
# otherwise a host's Radeon GPUs are left out of the build and reported as excluded.
RADEON_ARCHS = {
    "gfx1100": {
        "family": "RDNA3",
        "products": ["AMD Radeon RX 7900 XTX", "AMD Radeon RX 7900 XT", "AMD Radeon PRO W7900"],
    },
    "gfx1101": {
        "family": "RDNA3",
        "products": ["AMD Radeon RX 7800 XT", "AMD Radeon RX 7700 XT", "AMD Radeon PRO W7700"],
    },
    "gfx1200": {"family": "RDNA4", "products": ["AMD Radeon RX 9060 XT"]},
    "gfx1201": {
        "family": "RDNA4",
        "products": ["AMD Radeon RX 9070 XT", "AMD Radeon RX 9070", "AMD Radeon AI PRO R9700"],
    },
}

# PCI device ID (vendor 0x1002) -> (gfx name, marketing name) of every AMD Instinct part, virtual functions
# (VFs, what an SR-IOV guest sees) included. Lets the arch be known before ROCm is installed. Sources, checked
# per ID; names follow libdrm where it lists the ID, else pci.ids, else the kernel's chip name:
#   [kernel] Linux drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c, pciidlist: the Arcturus (CHIP_ARCTURUS, GC 9.4.1)
#            and Aldebaran (CHIP_ALDEBARAN, GC 9.4.2) IDs; drivers/gpu/drm/amd/amdkfd/kfd_device.c gives
#            GC 9.4.1 gfx_target_version 90008 (gfx908) and GC 9.4.2 90010 (gfx90a). MI300 and later are not
#            listed there: the driver binds them by PCI class (IP discovery).
#   [libdrm] libdrm data/amdgpu.ids (device, revision, product name).
#   [pci.ids] The PCI ID Repository's pci.ids, vendor 1002 ("Arcturus", "Aldebaran/MI200", "Aqua Vanjaram").
PCI_DEVICES = {
    # MI100 family, gfx908 (Arcturus).
    0x7388: ("gfx908", "AMD Instinct MI100 family (Arcturus GL-XL)"),  # kernel, pci.ids (no product name)
    0x738C: ("gfx908", "AMD Instinct MI100"),  # kernel, libdrm, pci.ids
    0x738E: ("gfx908", "AMD Instinct MI100"),  # kernel, pci.ids
    0x7390: ("gfx908", "AMD Instinct MI100 family (Arcturus)"),  # kernel only
    # MI200 family, gfx90a (Aldebaran).
    0x7408: ("gfx90a", "AMD Instinct MI250X"),  # kernel, libdrm, pci.ids
    0x740C: ("gfx90a", "AMD Instinct MI250X / MI250"),  # kernel, libdrm, pci.ids
    0x740F: ("gfx90a", "AMD Instinct MI210"),  # kernel, libdrm, pci.ids
    0x7410: ("gfx90a", "AMD Instinct MI200 family (Aldebaran)"),  # kernel only
    # MI300 family, gfx942 (Aqua Vanjaram).
    0x74A0: ("gfx942", "AMD Instinct MI300A"),  # libdrm, pci.ids
    0x74A1: ("gfx942", "AMD Instinct MI300X"),  # libdrm, pci.ids
    0x74A2: ("gfx942", "AMD Instinct MI308X"),  # libdrm, pci.ids
    0x74A5: ("gfx942", "AMD Instinct MI325X"),  # libdrm, pci.ids
    0x74A8: ("gfx942", "AMD Instinct MI308X HF"),  # libdrm
    0x74A9: ("gfx942", "AMD Instinct MI300X HF"),  # libdrm, pci.ids
    0x74B5: ("gfx942", "AMD Instinct MI300X VF"),  # libdrm, pci.ids
    0x74B6: ("gfx942", "AMD Instinct MI308X"),  # libdrm
    0x74B9: ("gfx942", "AMD Instinct MI325X VF"),  # pci.ids
    0x74BD: ("gfx942", "AMD Instinct MI300X HF"),  # libdrm, pci.ids
    # MI350 family, gfx950.
    0x75A0: ("gfx950", "AMD Instinct MI350X"),  # libdrm, pci.ids
    0x75A3: ("gfx950", "AMD Instinct MI355X"),  # libdrm, pci.ids
    0x75B0: ("gfx950", "AMD Instinct MI350X VF"),  # libdrm
    0x75B3: ("gfx950", "AMD Instinct MI355X VF"),  # libdrm
}

_GFX_NAME = re.compile(r"^gfx(\d+)([0-9a-f])([0-9a-f])$")


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


def compute_archs(allow_radeon=False):
    """The gfx names that are compute targets: the Instinct table, plus the Radeon one when allowed."""
    archs = set(GFX_ARCHS)
    if allow_radeon:
        archs.update(RADEON_ARCHS)
    return archs


def looks_like_instinct_arch(gfx):
    """True for a data-center (CDNA) gfx9 name: gfx908, gfx90a, and gfx940 onwards within gfx9.

    Such a name that the table does not know is a new Instinct part to add, never a GPU to leave out.
    The other gfx9 names are Vega cards and APU graphics (gfx900-gfx90c).

    >>> looks_like_instinct_arch("gfx943"), looks_like_instinct_arch("gfx90c")
    (True, False)
    """
    match = _GFX_NAME.match(str(gfx))
    if not match or match.group(1) != "9":
        return False
    minor, stepping = int(match.group(2), 16), int(match.group(3), 16)
    return minor >= 4 or (minor == 0 and stepping in (0x8, 0xA))


def compute_target_exclusion(gfx, allow_radeon=False):
    """Why gfx is not a compute target, or None when it is one."""
    if gfx in compute_archs(allow_radeon):
        return None
    if gfx in RADEON_ARCHS:
        return "%s is a Radeon architecture, a compute target only with allow_radeon=true" % gfx
    return (
        "%s is not a compute target (an integrated or display GPU, or an architecture ROCm 7 does not build for)" % gfx
    )


def supported_arch(gfx, what, allow_radeon=False):
    """Return gfx if the table knows it, else raise naming the value and where it came from."""
    if gfx not in compute_archs(allow_radeon):
        raise UnknownArchError(
            "%s is %s, which is not a supported architecture (supported: %s); "
            "add it to plugins/module_utils/gfx_targets.py if ROCm 7 supports it"
            % (what, gfx, supported_archs_text(allow_radeon))
        )
    return gfx


def supported_archs_text(allow_radeon=False):
    """The compute targets, for messages."""
    text = ", ".join(sorted(GFX_ARCHS))
    if allow_radeon:
        return text + ", " + ", ".join(sorted(RADEON_ARCHS))
    return text + "; with allow_radeon=true also " + ", ".join(sorted(RADEON_ARCHS))


def pci_device(device_id):
    """Return (gfx, marketing name) for an AMD PCI device ID, or raise naming it."""
    try:
        return PCI_DEVICES[device_id]
    except KeyError:
        raise UnknownArchError(
            "PCI device 1002:%04x is not in the AMD Instinct device table (known: %s)"
            % (device_id, ", ".join("%04x" % known for known in sorted(PCI_DEVICES)))
        ) from None


def validate_arch_list(archs, allow_radeon=False):
    """Validate a list (or ';'/','/space separated string) of gfx names; return the sorted unique list.

    Radeon architectures pass only with allow_radeon.
    """
    if isinstance(archs, str):
        archs = archs.replace(";", " ").replace(",", " ").split()
    names = [str(arch).split(":", maxsplit=1)[0].strip() for arch in archs]
    if not names:
        raise UnknownArchError("the arch list is empty")
    for name in names:
        supported_arch(name, "arch list entry %r" % name, allow_radeon)
    return sorted(set(names))


def pytorch_rocm_arch(archs, allow_radeon=False):
    """The PYTORCH_ROCM_ARCH value for a list of gfx names."""
    return ";".join(validate_arch_list(archs, allow_radeon))
