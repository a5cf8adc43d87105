#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stack_archive
short_description: Assemble a stack once on the build host and publish it as one content-addressed archive
version_added: "0.3.0"
description:
  - Installs the locked closure (C(pip install --require-hashes --no-deps) of O(lock_file), from the index or mirror
    of O(pip_args)) and amdsmi from O(amdsmi_src) into O(stacks_dir)/O(key)/venv, the path every inference host
    uses, so that the virtualenv's scripts and C(pyvenv.cfg) hold there too.
  - Checks that the stack imports as a ROCm build (C(torch.version.hip) set, torchvision's HIP C(nms) kernel,
    vLLM importable). vLLM's platform is not asked here, since it needs a loaded driver, which a build host may
    lack; every inference host asks it (M(instinct.stack.stack_install)).
  - Packs the directory, without the host's own records (C(.verified), C(.assembled)), into
    O(archive_dir)/KEY-SHA256PREFIX.tar.zst (tar and zstd) and publishes C(KEY.json) beside it (C(file),
    C(sha256), C(size)), each by one rename. Then marks the directory C(.assembled) with the archive's sha256, so
    that this host, when it is an inference host too, takes the stack in place instead of downloading it.
  - A stack this host verified already (its C(.verified) record) or assembled whole (its C(.assembled) mark) is
    packed as it is. A directory of the key without either is what an interrupted assembly left, and is made anew.
  - With O(pack=false) (no host other than this one needs the stack) the stack is assembled in place and marked
    C(.assembled) with an empty sha256, and no archive is made; a later run with O(pack=true) packs that assembly.
  - When the archive of O(key) is published (its C(KEY.json) and a file of the recorded size) nothing is done.
requirements:
  - tar and zstd on the build host (the vllm role's C(vllm_host_packages)).
author:
  - instinct.stack contributors (@instinct-stack)
options:
  key:
    description: The stack key.
    type: str
    required: true
  stacks_dir:
    description: The directory of the stacks, the same on every host (C(vllm_stack_root)/stacks).
    type: path
    required: true
  archive_dir:
    description: Where the archives are published, served by the artifact store.
    type: path
    required: true
  lock_file:
    description: The stack's C(stack-lock.txt), as M(instinct.stack.stack_lock) published it.
    type: path
    required: true
  pip_args:
    description: Index or mirror arguments for pip, and C(--find-links) of the built wheels' directories.
    type: list
    elements: str
    default: []
  amdsmi_src:
    description: ROCm's source of the amdsmi package (C(share/amd_smi)), installed into the stack.
    type: path
    default: /opt/rocm/share/amd_smi
  python:
    description: The interpreter that creates the virtualenv.
    type: str
    default: python3
  compile:
    description: Compile the stack's Python files to bytecode (pip's default); the archive carries the bytecode.
    type: bool
    default: true
  pack:
    description:
      - Pack the stack into its archive. False when this host is the only one that needs the stack, which it then
        takes in place (M(instinct.stack.stack_install) with an empty O(instinct.stack.stack_install#module:sha256)).
    type: bool
    default: true
attributes:
  check_mode:
    description: Reports whether the archive would be made, without assembling anything.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Assemble the stack on the build host and publish its archive
  instinct.stack.stack_archive:
    key: "{{ vllm_stack_key }}"
    stacks_dir: /opt/instinct-stack/stacks
    archive_dir: /var/cache/instinct-stack/stacks
    lock_file: /var/cache/instinct-stack/locks/{{ vllm_stack_key }}/stack-lock.txt
    pip_args: [--no-index, --find-links, "http://mirror.example/wheels/"]
"""

RETURN = r"""
archive:
  description:
    - The published archive, C(key), C(file) (its name in O(archive_dir)), C(sha256), C(size) and C(path).
    - None when O(pack=false) and no archive of O(key) is published.
  returned: success and not check mode
  type: dict
assembled:
  description: Whether this run installed the stack on this host (false when it was published already or verified here).
  returned: always
  type: bool
check:
  description: What the stack's interpreter reported (versions, C(hip), C(platform), C(torchvision_hip_ops)).
  returned: when the archive was made
  type: dict
seconds:
  description: Seconds spent assembling and packing.
  returned: when the archive was made
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.stack_archive import ArchiveError, build


def main():
    module = AnsibleModule(
        argument_spec=dict(
            key=dict(type="str", required=True, no_log=False),
            stacks_dir=dict(type="path", required=True),
            archive_dir=dict(type="path", required=True),
            lock_file=dict(type="path", required=True),
            pip_args=dict(type="list", elements="str", default=[]),
            amdsmi_src=dict(type="path", default="/opt/rocm/share/amd_smi"),
            python=dict(type="str", default="python3"),
            compile=dict(type="bool", default=True),
            pack=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = build(
            p["stacks_dir"],
            p["key"],
            p["archive_dir"],
            p["lock_file"],
            pip_args=p["pip_args"],
            amdsmi_src=p["amdsmi_src"],
            python=p["python"],
            compile_bytecode=p["compile"],
            pack_archive=p["pack"],
            check_mode=module.check_mode,
        )
    except ArchiveError as exc:
        module.fail_json(msg="%s: %s" % (p["key"], exc))
    except OSError as exc:
        module.fail_json(msg="%s: %s (the archive was not published)" % (p["key"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
