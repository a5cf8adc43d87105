# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Detect the AMD GPU agents of a host from sysfs (KFD topology, PCI) or rocminfo output.

Pure functions over files and text, so they run (and are tested) without Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.instinct.stack.plugins.module_utils.gfx_targets import (
    AMD_PCI_VENDOR_ID,
    PCI_DEVICES,
    UnknownArchError,
    gfx_from_target_version,
    pci_device,
    pytorch_rocm_arch,
    supported_arch,
)

SOURCES = ("kfd", "rocminfo", "pci")
# PCI base classes of GPUs: 0x03 display controller, 0x12 processing accelerator.
GPU_PCI_CLASSES = (0x03, 0x12)

_AGENT_SPLIT = re.compile(r"^\*+\s*\n\s*Agent\s+\d+\s*\n\*+\s*$", re.MULTILINE)
_TOP_LEVEL_FIELD = re.compile(r"^  ([A-Za-z][^:\n]*?):[ \t]*(.*?)\s*$", re.MULTILINE)
_ISA_NAME = re.compile(r"^\s+Name:\s+amdgcn-amd-amdhsa--(\S+)\s*$", re.MULTILINE)
_LEADING_INT = re.compile(r"^\s*(\d+)")


class DetectionError(Exception):
    """Detection could not give an answer; the message says what to fix."""


def pci_address(domain, location_id):
    """Format KFD's domain and location_id (or rocminfo's BDFID) as a PCI address."""
    location_id = int(location_id)
    return "%04x:%02x:%02x.%x" % (int(domain), location_id >> 8, (location_id >> 3) & 0x1F, location_id & 0x7)


def _gpu(node, gfx, device_id, compute_units, xnack=None, address=None, marketing_name=None):
    if marketing_name is None and device_id in PCI_DEVICES:
        marketing_name = PCI_DEVICES[device_id][1]
    return {
        "node": node,
        "gfx": gfx,
        "marketing_name": marketing_name,
        "pci_device_id": None if device_id is None else "0x%04x" % device_id,
        "pci_address": address,
        "compute_units": compute_units,
        "xnack": xnack,
    }


def parse_kfd_properties(text):
    """Parse a KFD topology node's `properties` file ("name value" per line) into a dict of ints."""
    props = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                props[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return props


def _node_sort_key(name):
    return (0, int(name)) if name.isdigit() else (1, name)


def detect_kfd(sysfs_root):
    """GPUs from /sys/class/kfd/kfd/topology/nodes/*/properties; None when the topology is absent."""
    nodes_dir = os.path.join(sysfs_root, "class", "kfd", "kfd", "topology", "nodes")
    if not os.path.isdir(nodes_dir):
        return None
    gpus = []
    for node in sorted(os.listdir(nodes_dir), key=_node_sort_key):
        path = os.path.join(nodes_dir, node, "properties")
        if not os.path.isfile(path):
            continue
        with open(path) as handle:
            props = parse_kfd_properties(handle.read())
        target_version = props.get("gfx_target_version", 0)
        if not target_version or not props.get("simd_count"):
            continue  # a CPU node
        where = "KFD node %s (%s, gfx_target_version %d)" % (node, path, target_version)
        try:
            gfx = gfx_from_target_version(target_version)
        except UnknownArchError as exc:
            raise UnknownArchError("KFD node %s (%s): %s" % (node, path, exc)) from None
        supported_arch(gfx, where)
        simd_per_cu = props.get("simd_per_cu") or 4
        gpus.append(
            _gpu(
                node=int(node) if node.isdigit() else node,
                gfx=gfx,
                device_id=props.get("device_id"),
                compute_units=props["simd_count"] // simd_per_cu,
                address=pci_address(props.get("domain", 0), props["location_id"]) if "location_id" in props else None,
            )
        )
    return gpus


def parse_rocminfo(text):
    """GPU agents from `rocminfo` output, in agent order."""
    gpus = []
    for chunk in _AGENT_SPLIT.split(text)[1:]:
        fields = {}
        for key, value in _TOP_LEVEL_FIELD.findall(chunk):
            fields.setdefault(key.strip(), value)
        if fields.get("Device Type") != "GPU":
            continue
        name = fields.get("Name", "")
        isa = _ISA_NAME.search(chunk)
        features = isa.group(1).split(":")[1:] if isa else []
        xnack = None
        if "xnack+" in features:
            xnack = True
        elif "xnack-" in features:
            xnack = False
        node = _int_field(fields, "Node")
        gfx = supported_arch(name.split(":")[0], "rocminfo agent on node %s (Name: %s)" % (node, name))
        chip_id = _int_field(fields, "Chip ID")
        bdfid = _int_field(fields, "BDFID")
        gpus.append(
            _gpu(
                node=node,
                gfx=gfx,
                device_id=chip_id,
                compute_units=_int_field(fields, "Compute Unit"),
                xnack=xnack,
                address=pci_address(0, bdfid) if bdfid else None,
                marketing_name=fields.get("Marketing Name") or None,
            )
        )
    return gpus


def _int_field(fields, key):
    match = _LEADING_INT.match(fields.get(key, ""))
    return int(match.group(1)) if match else None


def _read_hex(path):
    with open(path) as handle:
        return int(handle.read().strip(), 16)


def detect_pci(sysfs_root):
    """GPUs from /sys/bus/pci/devices/*/{vendor,device,class}; None when there is no PCI tree."""
    devices_dir = os.path.join(sysfs_root, "bus", "pci", "devices")
    if not os.path.isdir(devices_dir):
        return None
    gpus = []
    for address in sorted(os.listdir(devices_dir)):
        base = os.path.join(devices_dir, address)
        try:
            if _read_hex(os.path.join(base, "vendor")) != AMD_PCI_VENDOR_ID:
                continue
            device_id = _read_hex(os.path.join(base, "device"))
            pci_class = (
                _read_hex(os.path.join(base, "class")) if os.path.exists(os.path.join(base, "class")) else 0x030000
            )
        except (IOError, OSError, ValueError):
            continue
        if (pci_class >> 16) not in GPU_PCI_CLASSES:
            continue  # the GPU's HDMI audio function and other non-GPU AMD devices
        gfx, marketing_name = pci_device(device_id)
        gpus.append(
            _gpu(
                node=None,
                gfx=gfx,
                device_id=device_id,
                compute_units=None,
                address=address,
                marketing_name=marketing_name,
            )
        )
    return gpus


def summarize(gpus, source):
    """The module's result for the GPUs one source found."""
    archs = sorted(set(gpu["gfx"] for gpu in gpus))
    return {
        "gpus": gpus,
        "gfx_arch": archs,
        "pytorch_rocm_arch": pytorch_rocm_arch(archs) if archs else "",
        "source_used": source,
    }


def detect(source="auto", sysfs_root="/sys", run_rocminfo=None, require_gpu=True):
    """Detect GPUs from one source, or the first source that finds any (auto).

    run_rocminfo is a callable returning (rc, stdout, stderr), or None when rocminfo is not installed.
    An unknown architecture or device ID is an error, never a reason to try the next source.
    """
    order = SOURCES if source == "auto" else (source,)
    tried = []
    for name in order:
        if name == "kfd":
            gpus, note = (
                detect_kfd(sysfs_root),
                "no KFD topology under %s (amdgpu kernel driver not loaded?)" % sysfs_root,
            )
        elif name == "pci":
            gpus, note = detect_pci(sysfs_root), "no PCI device tree under %s" % sysfs_root
        else:
            gpus, note = _detect_rocminfo(run_rocminfo)
        if gpus:
            result = summarize(gpus, name)
            result["sources_tried"] = tried + ["%s: found %d GPU(s)" % (name, len(gpus))]
            return result
        tried.append("%s: %s" % (name, note if gpus is None else "no AMD GPU found"))
    if require_gpu:
        raise DetectionError(
            "no AMD GPU detected; sources tried: %s. Check that the amdgpu driver is loaded "
            "(lsmod | grep amdgpu) or set require_gpu=false on hosts without GPUs" % "; ".join(tried)
        )
    result = summarize([], None)
    result["sources_tried"] = tried
    return result


def _detect_rocminfo(run_rocminfo):
    if run_rocminfo is None:
        return None, "rocminfo not found"
    rc, out, err = run_rocminfo()
    if rc != 0:
        last_line = ((err or out).strip().splitlines() or [""])[-1]
        return None, "rocminfo exited %d: %s" % (rc, last_line)
    return parse_rocminfo(out), None
