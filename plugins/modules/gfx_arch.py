#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gfx_arch
short_description: Detect the gfx architecture of every AMD GPU on a host
version_added: "0.1.0"
description:
  - Finds every AMD GPU agent on the host and reports its gfx architecture (for example C(gfx90a)),
    the unique list of architectures, and the C(PYTORCH_ROCM_ARCH) string to build PyTorch, Triton and vLLM for.
  - Sources, in order of preference for O(source=auto) are the KFD topology in sysfs (needs only the
    amdgpu kernel driver), C(rocminfo) output (needs ROCm), and PCI device IDs through the collection's
    device table (works before ROCm is installed).
  - A GPU that is not a compute target is left out and listed in RV(excluded) with the reason, so a host
    with APU graphics or a display card beside its Instinct GPUs is detected; RV(hip_visible_devices) then
    names the HIP devices to use. Left out are architectures outside the collection's arch table (for
    example a Ryzen APU's C(gfx1036) or a Radeon RX 6000 card's C(gfx1030)), Radeon architectures without
    O(allow_radeon), and, for O(source=pci), a display-class GPU whose PCI ID is not in the Instinct
    device table.
  - A GPU that looks like an AMD Instinct part is never left out. A PCI ID from the Instinct device
    table, a data-center gfx9 architecture (C(gfx908), C(gfx90a), C(gfx940) and later within gfx9) or, for
    O(source=pci), an AMD processing accelerator (PCI class 0x12) that the table does not know is an
    error naming the value, to be added to the table.
  - A host whose AMD GPUs are all left out fails like a host without GPUs, naming each GPU and why; with
    O(require_gpu=false) it returns empty RV(gpus) and lists them in RV(excluded).
  - An invalid KFD target version is an error too. The next source is never tried after an error or after
    a source found GPUs, so a wrong arch never reaches a build.
  - Reads only; it never changes the host.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  source:
    description:
      - Where to read the GPUs from. V(auto) uses the first of V(kfd), V(rocminfo), V(pci) that finds a GPU.
    type: str
    choices: [auto, kfd, rocminfo, pci]
    default: auto
  sysfs_root:
    description:
      - The sysfs mount point to read the KFD topology and PCI devices from; a copied tree works for tests.
    type: path
    default: /sys
  rocminfo_path:
    description:
      - The C(rocminfo) executable. By default it is searched on E(PATH) and in C(/opt/rocm/bin).
      - A path that is not executable fails O(source=rocminfo); with O(source=auto) rocminfo counts as not installed.
    type: path
  require_gpu:
    description:
      - Fail when no AMD GPU that is a compute target is found. The failure message lists every source tried
        and why it found nothing, or each GPU found and why it is not a compute target.
    type: bool
    default: true
  allow_radeon:
    description:
      - Accept the Radeon architectures vLLM's ROCm support covers (C(gfx1100), C(gfx1101), C(gfx1200),
        C(gfx1201)) as compute targets. Without it they are listed in RV(excluded).
      - The PCI device table holds Instinct parts only, so O(source=pci) cannot tell a Radeon GPU's
        architecture and always excludes it; the kfd and rocminfo sources can.
    type: bool
    default: false
    version_added: "0.2.0"
attributes:
  check_mode:
    description: Can run in check_mode and return the same result, since the module only reads.
    support: full
  diff_mode:
    description: The module changes nothing, so there is no diff.
    support: none
notes:
  - The arch table lives in C(plugins/module_utils/gfx_targets.py); add new architectures there.
seealso:
  - name: ROCm GPU architecture specifications
    description: The gfx name, product and compute units of every AMD Instinct GPU.
    link: https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html
"""

EXAMPLES = r"""
- name: Detect the GPU architectures of this host
  instinct.stack.gfx_arch:
  register: gfx

- name: Build for exactly what is installed
  ansible.builtin.debug:
    msg: "PYTORCH_ROCM_ARCH={{ gfx.pytorch_rocm_arch }}"

- name: Before ROCm is installed, read PCI IDs only
  instinct.stack.gfx_arch:
    source: pci

- name: Hosts without GPUs (build hosts) report an empty list instead of failing
  instinct.stack.gfx_arch:
    require_gpu: false

- name: Use Radeon RX 7900 / RX 9000 series GPUs as compute targets too
  instinct.stack.gfx_arch:
    allow_radeon: true
  register: gfx

- name: Run a service on the detected GPUs only, not on APU graphics or a display card
  ansible.builtin.debug:
    msg: "HIP_VISIBLE_DEVICES={{ gfx.hip_visible_devices }}; left out: {{ gfx.excluded | map(attribute='reason') }}"
"""

RETURN = r"""
gpus:
  description: Every AMD GPU agent found that is a compute target, in node order.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: KFD/HSA node number; null for O(source=pci).
      type: int
    gfx:
      description: The gfx architecture name.
      type: str
      sample: gfx942
    marketing_name:
      description: Product name when known.
      type: str
      sample: AMD Instinct MI300X
    pci_device_id:
      description: PCI device ID (vendor 0x1002) as a hex string.
      type: str
      sample: "0x74a1"
    pci_address:
      description: PCI address of the GPU when known.
      type: str
      sample: "0000:0c:00.0"
    compute_units:
      description: Number of compute units; null for O(source=pci).
      type: int
      sample: 304
    xnack:
      description: Whether XNACK is on in the ISA rocminfo reports; null when not known.
      type: bool
  sample: [{node: 2, gfx: gfx942, marketing_name: AMD Instinct MI300X, pci_device_id: "0x74a1",
            pci_address: "0000:0c:00.0", compute_units: 304, xnack: false}]
gfx_arch:
  description: Sorted unique gfx architectures.
  returned: always
  type: list
  elements: str
  sample: [gfx90a, gfx942]
pytorch_rocm_arch:
  description: The value for E(PYTORCH_ROCM_ARCH), architectures joined with C(;). Empty when no GPU.
  returned: always
  type: str
  sample: gfx90a;gfx942
excluded:
  description:
    - The AMD GPUs found that are not compute targets, in node order, each with the reason it was left out.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: KFD/HSA node number; null for O(source=pci).
      type: int
    pci_address:
      description: PCI address of the GPU when known.
      type: str
    pci_device_id:
      description: PCI device ID (vendor 0x1002) as a hex string.
      type: str
    gfx:
      description: The gfx architecture name; null for O(source=pci), where only Instinct PCI IDs are known.
      type: str
    marketing_name:
      description: Product name when known.
      type: str
    reason:
      description: Why the GPU is not a compute target.
      type: str
  sample: [{node: 1, pci_address: "0000:03:00.0", pci_device_id: "0x7448", gfx: gfx1100,
            marketing_name: AMD Radeon PRO W7900,
            reason: "gfx1100 is a Radeon architecture, a compute target only with allow_radeon=true"}]
hip_visible_devices:
  description:
    - The HIP device indices of the GPUs in RV(gpus), joined with C(,), for E(HIP_VISIBLE_DEVICES). Empty when no GPU.
    - HIP numbers GPUs in KFD topology node order counting every GPU, excluded ones too. For O(source=pci), which
      has no node numbers, the order is assumed to be PCI address order.
  returned: always
  type: str
  sample: "1,2"
source_used:
  description: The source the GPUs were read from; null when none found any.
  returned: always
  type: str
  sample: kfd
sources_tried:
  description: Each source tried, with what it found or why it found nothing.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.gfx_detect import DetectionError, detect
from ansible_collections.instinct.stack.plugins.module_utils.gfx_targets import UnknownArchError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="auto", choices=["auto", "kfd", "rocminfo", "pci"]),
            sysfs_root=dict(type="path", default="/sys"),
            rocminfo_path=dict(type="path"),
            require_gpu=dict(type="bool", default=True),
            allow_radeon=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    rocminfo = params["rocminfo_path"]
    if rocminfo:
        if not os.access(rocminfo, os.X_OK):
            if params["source"] == "rocminfo":
                module.fail_json(msg="rocminfo_path %s is not an executable file" % rocminfo)
            rocminfo = None  # auto: ROCm is not installed (yet), so the other sources decide
    else:
        rocminfo = module.get_bin_path("rocminfo", opt_dirs=["/opt/rocm/bin"])

    def run_rocminfo():
        return module.run_command([rocminfo])

    try:
        result = detect(
            source=params["source"],
            sysfs_root=params["sysfs_root"],
            run_rocminfo=run_rocminfo if rocminfo else None,
            require_gpu=params["require_gpu"],
            allow_radeon=params["allow_radeon"],
        )
    except (DetectionError, UnknownArchError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
