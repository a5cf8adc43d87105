# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Detect the AMD GPU agents of a host from sysfs (KFD topology, PCI) or rocminfo output.

Pure functions over files and text, so they run (and are tested) without Ansible.

Each source lists every AMD GPU agent it sees; select_gpus() then keeps the compute targets and says which
GPUs it left out and why:

* a GPU whose architecture is in the arch table (Radeon ones only with allow_radeon) is kept;
* a GPU that looks like an Instinct part (its PCI ID is in the Instinct device table, its arch is a data-center
  gfx9 one, or the PCI source sees an AMD processing accelerator) but whose arch the table does not know is an
  error, never left out: it is a new part to add to the table;
* any other GPU (APU graphics, a display card, a Radeon without allow_radeon) is excluded, with the reason;
* a host where GPUs were found but none is kept is an error naming each GPU and why (unless the caller does not
  require a GPU), so a wrong arch never reaches a build.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.instinct.stack.plugins.module_utils.gfx_targets import (
    AMD_PCI_VENDOR_ID,
    PCI_DEVICES,
    UnknownArchError,
    compute_target_exclusion,
    gfx_from_target_version,
    looks_like_instinct_arch,
    pytorch_rocm_arch,
    supported_arch,
    supported_archs_text,
)

SOURCES = ("kfd", "rocminfo", "pci")
# PCI base classes of GPUs: 0x03 display controller, 0x12 processing accelerator.
GPU_PCI_CLASSES = (0x03, 0x12)
# AMD's data-center parts from MI300 on are processing accelerators (class 0x12); Radeon cards and APU
# graphics are display controllers (0x03). An AMD accelerator missing from the device table is a new Instinct part.
PCI_CLASS_ACCELERATOR = 0x12

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


def kfd_agents(sysfs_root):
    """Every GPU node of /sys/class/kfd/kfd/topology/nodes/*/properties, in node order; None when absent."""
    nodes_dir = os.path.join(sysfs_root, "class", "kfd", "kfd", "topology", "nodes")
    if not os.path.isdir(nodes_dir):
        return None
    agents = []
    for node in sorted(os.listdir(nodes_dir), key=_node_sort_key):
        path = os.path.join(nodes_dir, node, "properties")
        if not os.path.isfile(path):
            continue
        with open(path) as handle:
            props = parse_kfd_properties(handle.read())
        target_version = props.get("gfx_target_version", 0)
        if not target_version or not props.get("simd_count"):
            continue  # a CPU node
        try:
            gfx = gfx_from_target_version(target_version)
        except UnknownArchError as exc:
            raise UnknownArchError("KFD node %s (%s): %s" % (node, path, exc)) from None
        simd_per_cu = props.get("simd_per_cu") or 4
        gpu = _gpu(
            node=int(node) if node.isdigit() else node,
            gfx=gfx,
            device_id=props.get("device_id"),
            compute_units=props["simd_count"] // simd_per_cu,
            address=pci_address(props.get("domain", 0), props["location_id"]) if "location_id" in props else None,
        )
        agents.append(_agent(gpu, "KFD node %s (%s, gfx_target_version %d)" % (node, path, target_version)))
    return agents


def detect_kfd(sysfs_root, allow_radeon=False):
    """The compute GPUs of the KFD topology (see select_gpus); None when the topology is absent."""
    agents = kfd_agents(sysfs_root)
    return None if agents is None else select_gpus(agents, allow_radeon)["gpus"]


def rocminfo_agents(text):
    """Every GPU agent of `rocminfo` output, in agent order."""
    agents = []
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
        chip_id = _int_field(fields, "Chip ID")
        bdfid = _int_field(fields, "BDFID")
        gpu = _gpu(
            node=node,
            gfx=name.split(":")[0],
            device_id=chip_id,
            compute_units=_int_field(fields, "Compute Unit"),
            xnack=xnack,
            address=pci_address(0, bdfid) if bdfid else None,
            marketing_name=fields.get("Marketing Name") or None,
        )
        agents.append(_agent(gpu, "rocminfo agent on node %s (Name: %s)" % (node, name)))
    return agents


def parse_rocminfo(text, allow_radeon=False):
    """The compute GPU agents of `rocminfo` output (see select_gpus), in agent order."""
    return select_gpus(rocminfo_agents(text), allow_radeon)["gpus"]


def _int_field(fields, key):
    match = _LEADING_INT.match(fields.get(key, ""))
    return int(match.group(1)) if match else None


def _read_hex(path):
    with open(path) as handle:
        return int(handle.read().strip(), 16)


def pci_agents(sysfs_root):
    """Every AMD GPU of /sys/bus/pci/devices/*/{vendor,device,class}, by address; None when there is no PCI tree."""
    devices_dir = os.path.join(sysfs_root, "bus", "pci", "devices")
    if not os.path.isdir(devices_dir):
        return None
    agents = []
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
        # A PCI ID tells the arch of the Instinct parts in the table only; any other GPU has gfx None here.
        gfx, marketing_name = PCI_DEVICES.get(device_id, (None, None))
        gpu = _gpu(
            node=None,
            gfx=gfx,
            device_id=device_id,
            compute_units=None,
            address=address,
            marketing_name=marketing_name,
        )
        agents.append(_agent(gpu, "PCI device 1002:%04x at %s" % (device_id, address), pci_class=pci_class))
    return agents


def detect_pci(sysfs_root, allow_radeon=False):
    """The compute GPUs of the PCI device tree (see select_gpus); None when there is no PCI tree."""
    agents = pci_agents(sysfs_root)
    return None if agents is None else select_gpus(agents, allow_radeon)["gpus"]


def _agent(gpu, where, pci_class=None):
    return {"gpu": gpu, "where": where, "pci_class": pci_class}


def _exclusion(agent, allow_radeon):
    """Why an agent is not a compute target, None when it is one; raise for an Instinct part the table lacks."""
    gpu = agent["gpu"]
    gfx = gpu["gfx"]
    device_id = int(gpu["pci_device_id"], 16) if gpu["pci_device_id"] else None
    if gfx is None:  # PCI source, device ID not in the Instinct table
        if agent["pci_class"] is not None and agent["pci_class"] >> 16 == PCI_CLASS_ACCELERATOR:
            raise UnknownArchError(
                "%s is an AMD processing accelerator (PCI class 0x%06x) that is not in the AMD Instinct device "
                "table (known: %s); add it to plugins/module_utils/gfx_targets.py"
                % (agent["where"], agent["pci_class"], ", ".join("%04x" % known for known in sorted(PCI_DEVICES)))
            )
        return (
            "PCI device 1002:%04x is not in the AMD Instinct device table, and a PCI ID does not tell the "
            "architecture of other AMD GPUs (the kfd and rocminfo sources do)" % device_id
        )
    reason = compute_target_exclusion(gfx, allow_radeon)
    if reason is not None and (looks_like_instinct_arch(gfx) or device_id in PCI_DEVICES):
        supported_arch(gfx, agent["where"], allow_radeon)  # raises, naming the value
    return reason


def select_gpus(agents, allow_radeon=False, require_compute_gpu=True):
    """Split a source's agents into the compute GPUs and the excluded ones (see the module docstring).

    Returns a dict with gpus, excluded and hip_visible_devices. Raises UnknownArchError for an Instinct-looking
    GPU the table does not know, and, with require_compute_gpu, when there are agents but none is kept.
    """
    kept, excluded, hip_indices = [], [], []
    for index, agent in enumerate(agents):
        reason = _exclusion(agent, allow_radeon)
        gpu = agent["gpu"]
        if reason is None:
            kept.append(gpu)
            # HIP numbers the GPU agents ROCr reports, and ROCr enumerates them in KFD topology node order,
            # counting every GPU node, excluded ones too. The kfd and rocminfo agents come in node order. The
            # PCI source has no node numbers: it assumes the amdgpu driver probed (and KFD numbered) the GPUs
            # in PCI address order, which holds for the default synchronous probe.
            hip_indices.append(index)
        else:
            entry = dict((key, gpu[key]) for key in ("node", "pci_address", "pci_device_id", "gfx", "marketing_name"))
            entry["reason"] = reason
            excluded.append((agent["where"], entry))
    if agents and not kept and require_compute_gpu:
        raise UnknownArchError(
            "no AMD GPU on this host is a compute target (supported: %s): %s. Set require_gpu=false on a host that "
            "needs no compute GPU"
            % (
                supported_archs_text(allow_radeon),
                "; ".join("%s: %s" % (where, entry["reason"]) for where, entry in excluded),
            )
        )
    return {
        "gpus": kept,
        "excluded": [entry for _where, entry in excluded],
        "hip_visible_devices": ",".join(str(index) for index in hip_indices),
    }


def summarize(gpus, source, excluded=None, hip_visible_devices=None, allow_radeon=False):
    """The module's result for the GPUs one source found (and the ones it excluded)."""
    archs = sorted(set(gpu["gfx"] for gpu in gpus))
    if hip_visible_devices is None:
        hip_visible_devices = ",".join(str(index) for index in range(len(gpus)))
    return {
        "gpus": gpus,
        "gfx_arch": archs,
        "pytorch_rocm_arch": pytorch_rocm_arch(archs, allow_radeon) if archs else "",
        "excluded": excluded or [],
        "hip_visible_devices": hip_visible_devices,
        "source_used": source,
    }


def detect(source="auto", sysfs_root="/sys", run_rocminfo=None, require_gpu=True, allow_radeon=False):
    """Detect GPUs from one source, or the first source that finds any (auto).

    run_rocminfo is a callable returning (rc, stdout, stderr), or None when rocminfo is not installed.
    An unknown Instinct-looking architecture or device ID is an error, never a reason to try the next source;
    nor is a source that found GPUs none of which is a compute target (the next source would see the same GPUs).
    """
    order = SOURCES if source == "auto" else (source,)
    tried = []
    for name in order:
        if name == "kfd":
            agents, note = (
                kfd_agents(sysfs_root),
                "no KFD topology under %s (amdgpu kernel driver not loaded?)" % sysfs_root,
            )
        elif name == "pci":
            agents, note = pci_agents(sysfs_root), "no PCI device tree under %s" % sysfs_root
        else:
            agents, note = _rocminfo_agents(run_rocminfo)
        if agents:
            selection = select_gpus(agents, allow_radeon, require_compute_gpu=require_gpu)
            result = summarize(
                selection["gpus"], name, selection["excluded"], selection["hip_visible_devices"], allow_radeon
            )
            found = "%s: found %d GPU(s)" % (name, len(selection["gpus"]))
            if selection["excluded"]:
                found += ", excluded %d" % len(selection["excluded"])
            result["sources_tried"] = tried + [found]
            return result
        tried.append("%s: %s" % (name, note if agents is None else "no AMD GPU found"))
    if require_gpu:
        raise DetectionError(
            "no AMD GPU detected; sources tried: %s. Check that the amdgpu driver is loaded "
            "(lsmod | grep amdgpu) or set require_gpu=false on hosts without GPUs" % "; ".join(tried)
        )
    result = summarize([], None)
    result["sources_tried"] = tried
    return result


def _rocminfo_agents(run_rocminfo):
    if run_rocminfo is None:
        return None, "rocminfo not found"
    rc, out, err = run_rocminfo()
    if rc != 0:
        last_line = ((err or out).strip().splitlines() or [""])[-1]
        return None, "rocminfo exited %d: %s" % (rc, last_line)
    return rocminfo_agents(out), None
