#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stack_install
short_description: Install a stack from its archive in the artifact store, verify it and record it
version_added: "0.3.0"
description:
  - Downloads the stack's archive (M(instinct.stack.stack_archive)) from O(url) into a hidden file beside the
    stacks and checks its sha256 against O(sha256) before anything is unpacked; an archive of other bytes is
    removed and the module fails naming it, and nothing under the key changes.
  - Unpacks it (tar and zstd) into a hidden staging directory in O(stacks_dir), writes it to disk and publishes it
    as O(stacks_dir)/O(key) with one rename, so a power cut leaves the whole stack or none.
  - Verifies it with its own interpreter as the hosts always did - C(torch.version.hip) set, vLLM's
    C(current_platform) is C(rocm) (through amdsmi), torchvision has its HIP C(nms) kernel and, where C(/dev/kfd)
    exists and O(verify_gpu) is true, C(torch.cuda.is_available()) - and only then writes C(.verified) (the check's
    findings and O(record)).
  - A stack with its C(.verified) record is left as it is and nothing is downloaded. The build host's own
    stack, assembled in place for this very archive (its C(.assembled) mark), is verified where it is, without a
    download; so is the stack of a build host that alone needs it, assembled in place with no archive (an empty
    O(sha256)). Any other directory of the key (a stack that failed its verification) is replaced.
requirements:
  - tar and zstd on the host (the vllm role's C(vllm_host_packages)).
author:
  - instinct.stack contributors (@instinct-stack)
options:
  key:
    description: The stack key.
    type: str
    required: true
  stacks_dir:
    description: The directory of the stacks (C(vllm_stack_root)/stacks).
    type: path
    required: true
  url:
    description: The archive's URL in the artifact store.
    type: str
    required: true
  sha256:
    description:
      - The archive's sha256, as the build host recorded it.
      - Empty when no archive was packed (M(instinct.stack.stack_archive) with C(pack=false)); then only the build
        host's own assembly in place is taken, and any other host fails, naming the stack.
    type: str
    required: true
  record:
    description: What to add to the C(.verified) record beside the check's findings (key, arch, lock ...).
    type: dict
    default: {}
  verify_gpu:
    description: Fail when the host has C(/dev/kfd) but C(torch.cuda.is_available()) is false.
    type: bool
    default: true
  host:
    description: The host's name, for the messages.
    type: str
    default: this host
  driver_note:
    description: Why the platform may not be detected (a pending driver reboot), for a failed verification's message.
    type: str
    default: ""
attributes:
  check_mode:
    description: Reports whether the stack would be installed, without downloading.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Install, verify and record the stack
  instinct.stack.stack_install:
    key: "{{ vllm_stack_key }}"
    stacks_dir: /opt/instinct-stack/stacks
    url: http://10.0.0.5:8070/stacks/0123456789abcdef-89abcdef01234567.tar.zst
    sha256: "{{ archive_sha256 }}"
    record: {key: "{{ vllm_stack_key }}", arch: gfx942}
"""

RETURN = r"""
source:
  description:
    - C(verified) (held already, nothing done), C(assembled) (the build host's own, verified in place) or
      C(archive) (downloaded, checked, unpacked and published).
  returned: always
  type: str
downloaded:
  description: Bytes downloaded by this run (0 unless RV(source) is C(archive)).
  returned: always
  type: int
record:
  description: The stack's C(.verified) record.
  returned: success and not check mode
  type: dict
seconds:
  description: Seconds spent downloading (with the sha256) and unpacking.
  returned: when the archive was unpacked
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils import stack_archive


def main():
    module = AnsibleModule(
        argument_spec=dict(
            key=dict(type="str", required=True, no_log=False),
            stacks_dir=dict(type="path", required=True),
            url=dict(type="str", required=True),
            sha256=dict(type="str", required=True),
            record=dict(type="dict", default={}),
            verify_gpu=dict(type="bool", default=True),
            host=dict(type="str", default="this host"),
            driver_note=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = stack_archive.install(p["url"], p["sha256"], p["stacks_dir"], p["key"], check_mode=module.check_mode)
    except (stack_archive.ArchiveError, OSError) as exc:
        module.fail_json(msg="%s: %s The stack in service stays." % (p["key"], exc))
    stack_dir = result["path"]
    if result["source"] == "verified":
        with open(os.path.join(stack_dir, stack_archive.RECORD)) as handle:
            result["record"] = json.load(handle)
        module.exit_json(**result)
    if module.check_mode:
        result["changed"] = True
        module.exit_json(**result)
    try:
        found = stack_archive.check_stack(stack_dir)
        wrong = stack_archive.problems(found, gpu=p["verify_gpu"] and os.path.exists("/dev/kfd"))
    except stack_archive.ArchiveError as exc:
        found, wrong = {}, [str(exc)]
    if wrong:
        module.fail_json(
            msg="The stack %s is not usable on %s (%s): %s. torch.version.hip must be set, vLLM must detect the "
            "ROCm platform through amdsmi (it cannot while the amdgpu driver is not loaded%s), and "
            "torch.cuda.is_available() must be true where /dev/kfd exists. The previous stack stays in service."
            % (p["key"], p["host"], json.dumps(found, sort_keys=True), "; ".join(wrong), p["driver_note"]),
            **result,
        )
    result["record"] = stack_archive.record(stack_dir, found, p["record"])
    result["changed"] = True
    module.exit_json(**result)


if __name__ == "__main__":
    main()
