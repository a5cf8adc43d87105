# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether a host runs the amdgpu kernel module it has installed, or needs a reboot to load it.

The real amdgpu-dkms package writes no /var/run/reboot-required (that marker comes from
update-notifier-common, absent on minimal hosts), while AMD's install docs say to reboot after every
install or upgrade. So the decision comes from the driver itself:

- installed: the version of the amdgpu module that modprobe would load for the running kernel
  (``modinfo -F version amdgpu``: DKMS installs it under updates/dkms, ahead of the in-tree one), or,
  when DKMS has built nothing for this kernel yet, the version in the newest
  ``/usr/src/amdgpu-VERSION/dkms.conf`` that the package ships;
- loaded: ``/sys/module/amdgpu/version``, which AMD's out-of-tree module sets and the in-tree one
  does not, or nothing when no amdgpu module is loaded;
- a state file that records which package version was first seen unloaded, and in which boot
  (``/proc/sys/kernel/random/boot_id``): a reboot is pending while that boot is still running, and a
  module that is still not loaded after a reboot is a load failure, not a pending reboot. Secure Boot
  (the SecureBoot EFI variable) is named then, since it stops an unsigned DKMS module from loading.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re

SECURE_BOOT_VARIABLE = "firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
_DKMS_VERSION = re.compile(r'^PACKAGE_VERSION="?([^"\s]+)"?', re.M)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except (IOError, OSError):
        return None


def _version_key(version):
    return [int(part) if part.isdigit() else part for part in re.split(r"[.\-]", version)]


def dkms_source_versions(src_root):
    """The versions of every amdgpu DKMS source tree under src_root (/usr/src), oldest first."""
    versions = []
    for conf in glob.glob(os.path.join(src_root, "amdgpu-*", "dkms.conf")):
        match = _DKMS_VERSION.search(_read(conf) or "")
        if match:
            versions.append(match.group(1))
    return sorted(versions, key=_version_key)


def secure_boot_enabled(sysfs_root):
    """True or False from the SecureBoot EFI variable (4 attribute bytes, then the value); None without EFI."""
    try:
        with open(os.path.join(sysfs_root, SECURE_BOOT_VARIABLE), "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return None
    return len(data) >= 5 and data[4:5] == b"\x01"


def decide(package_version, installed, loaded, boot_id, state, secure_boot=None, leftover_sources=()):
    """The driver's state and the state file to keep.

    Returns (result, new_state): result has reboot_pending, load_failed, reason, installed_module,
    loaded_module, secure_boot, leftover_sources; new_state is the dict to write, or None to remove
    the file.
    """
    result = {
        "package_version": package_version,
        "installed_module": installed,
        "loaded_module": loaded,
        "secure_boot": secure_boot,
        "leftover_sources": list(leftover_sources),
        "reboot_pending": False,
        "load_failed": False,
        "reason": "",
    }
    if package_version is None:
        result["reason"] = "amdgpu-dkms is not installed"
        return result, None
    if installed is not None and loaded == installed:
        result["reason"] = "the loaded amdgpu module is the installed one (%s)" % installed
        return result, None
    running = "amdgpu %s" % loaded if loaded else "no amdgpu module from amdgpu-dkms"
    state = state or {}
    if state.get("package_version") == package_version and state.get("boot_id") not in (None, boot_id):
        result["load_failed"] = True
        result["reason"] = (
            "the host rebooted after amdgpu-dkms %s was installed, but runs %s (installed: %s); see dkms status "
            "and dmesg" % (package_version, running, installed or "none built for this kernel")
        )
        if secure_boot:
            result["reason"] += (
                "; Secure Boot is enabled and stops an unsigned DKMS module from loading: enroll the DKMS signing "
                "key (mokutil --import) or disable Secure Boot"
            )
        return result, state
    result["reboot_pending"] = True
    result["reason"] = "amdgpu-dkms %s is installed (module %s) but the running kernel has %s: reboot to load it" % (
        package_version,
        installed or "not built for this kernel yet",
        running,
    )
    if state.get("package_version") == package_version:
        return result, state
    return result, {"package_version": package_version, "boot_id": boot_id, "installed_module": installed}


def read_state(state_path):
    """The recorded pending reboot, or None; a damaged record counts as none (the next decision rewrites it)."""
    try:
        return json.loads(_read(state_path) or "null")
    except ValueError:
        return None


def inspect(package_version, modinfo_version, root="/", state=None):
    """Reads the host under root (sysfs, /usr/src, /proc) and decides with the recorded state; see decide()."""
    sysfs = os.path.join(root, "sys")
    sources = dkms_source_versions(os.path.join(root, "usr", "src"))
    installed = modinfo_version or (sources[-1] if sources else None)
    return decide(
        package_version,
        installed,
        _read(os.path.join(sysfs, "module", "amdgpu", "version")),
        _read(os.path.join(root, "proc", "sys", "kernel", "random", "boot_id")),
        state,
        secure_boot=secure_boot_enabled(sysfs),
        leftover_sources=sources[:-1],
    )
