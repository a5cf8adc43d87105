#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stack_lock
short_description: Lock a stack's whole runtime closure, with a sha256 per wheel
version_added: "0.2.0"
description:
  - Resolves the runtime closure of the built O(wheels) once, with C(pip download --only-binary=:all:) from the
    index or mirror that O(pip_args) name, and publishes a requirements file in pip's hash-checking form
    (C(stack-lock.txt)) and its summary (C(stack-lock.json)) as O(lock_dir)/O(key)/, with one rename.
  - Every host then installs that file with C(pip install --require-hashes --no-deps), so all hosts of a stack
    hold the same files, byte for byte, whatever the index serves later.
  - When the lock of O(key) is already published for these very O(wheels) nothing is resolved and the module reports
    no change. A published lock that pins other files of the built wheels (a wheel rebuilt under the same key after
    its cache entry was removed is not byte-identical) is resolved again and replaced.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  python:
    description: Python interpreter whose pip resolves the closure (the build virtualenv's).
    type: path
    required: true
  wheels:
    description: The stack's own wheels (torch, triton, vllm ...), whose requirements make the closure.
    type: list
    elements: path
    required: true
  pip_args:
    description: Index or mirror arguments for pip (C(--no-index --find-links URL) when air-gapped).
    type: list
    elements: str
    default: []
  lock_dir:
    description: Where published locks live, one directory per key.
    type: path
    required: true
  key:
    description: The stack key.
    type: str
    required: true
  python_abi:
    description:
      - The Python ABI of O(python) (the C(key) of M(instinct.stack.python_abi)'s fact), recorded in the lock and
        returned as RV(python_abi), since the closure's binary wheels install on that ABI only.
    type: str
    version_added: "0.3.0"
  conflicting:
    description:
      - Projects that may come only from O(wheels) (C(torch), C(triton), C(pytorch-triton-rocm) ...). The closure
        taking one of them from the index (the CUDA build, installing the same modules) is an error naming it.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Reports whether the lock would be made, without resolving.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Lock the stack's runtime closure
  instinct.stack.stack_lock:
    python: /var/lib/instinct-stack/build-venv/bin/python
    wheels:
      - /var/cache/instinct-stack/wheels/pytorch/KEY/torch-2.9.0-cp311-cp311-linux_x86_64.whl
      - /var/cache/instinct-stack/wheels/vllm/KEY/vllm-0.11.0-cp311-cp311-linux_x86_64.whl
    pip_args: [--no-index, --find-links, "http://mirror.example/wheels/"]
    lock_dir: /var/cache/instinct-stack/locks
    key: "{{ vllm_stack_key }}"
"""

RETURN = r"""
lock_file:
  description: Path of the published C(stack-lock.txt) on the host that ran the module.
  returned: success and not check mode or already locked
  type: str
sha256:
  description: sha256 of C(stack-lock.txt).
  returned: success and not check mode or already locked
  type: str
packages:
  description: Every locked wheel by project name, with C(version), C(sha256) and C(file).
  returned: success and not check mode or already locked
  type: dict
python_abi:
  description: The Python ABI the lock was resolved for, as given in O(python_abi) when it was published.
  returned: success and not check mode or already locked, for a lock published with O(python_abi)
  type: str
  version_added: "0.3.0"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.stack_lock import LockError, lock, read_lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            wheels=dict(type="list", elements="path", required=True),
            pip_args=dict(type="list", elements="str", default=[]),
            lock_dir=dict(type="path", required=True),
            key=dict(type="str", required=True, no_log=False),
            conflicting=dict(type="list", elements="str", default=[]),
            python_abi=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    published = read_lock(p["lock_dir"], p["key"])
    if module.check_mode and not published:
        module.exit_json(changed=True)
    try:
        info, changed = lock(
            p["python"],
            p["wheels"],
            p["pip_args"],
            p["lock_dir"],
            p["key"],
            conflicting=p["conflicting"],
            python_abi=p["python_abi"],
        )
    except LockError as exc:
        module.fail_json(msg="%s: %s" % (p["key"], exc))
    result = dict(changed=changed, lock_file=info["path"], sha256=info["sha256"], packages=info["packages"])
    if info.get("python_abi"):
        result["python_abi"] = info["python_abi"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
