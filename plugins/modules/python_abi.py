#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: python_abi
short_description: Report the Python ABI the host's stack is built for or installed on
version_added: "0.3.0"
description:
  - Runs the host's O(python) (the interpreter the stack's virtualenvs are made from) and reports its ABI - the
    interpreter tag (C(cp311)), the platform and the C library with its version - as the fact C(instinct_python_abi).
  - The stack's wheels are built against one ABI; site.yml refuses a run whose hosts do not share one, naming the
    hosts of each (see the filter P(instinct.stack.python_abi_problem#filter)), and the build keys include it.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  python:
    description: The interpreter to ask, a path or a name looked up in C(PATH).
    type: str
    default: python3
extends_documentation_fragment:
  - instinct.stack.read_only
attributes:
  facts:
    description: Sets C(instinct_python_abi).
    support: full
"""

EXAMPLES = r"""
- name: Find the Python ABI of every host
  instinct.stack.python_abi:

- name: Refuse hosts of different ABIs
  ansible.builtin.assert:
    that: problem | length == 0
    fail_msg: "{{ problem }}"
  vars:
    problem: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts
                                       | map('extract', hostvars, ['ansible_facts', 'instinct_python_abi'])))
         | instinct.stack.python_abi_problem }}
  run_once: true
"""

RETURN = r"""
ansible_facts:
  description: The fact C(instinct_python_abi).
  returned: success
  type: dict
  contains:
    instinct_python_abi:
      description: The ABI.
      type: dict
      sample:
        key: cp311-linux_x86_64-glibc2.36
        python: 3.11.2
        interpreter: cp311
        platform: linux_x86_64
        libc: glibc2.36
        soabi: cpython-311-x86_64-linux-gnu
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.python_abi import PROBE, describe


def main():
    module = AnsibleModule(argument_spec={"python": {"type": "str", "default": "python3"}}, supports_check_mode=True)
    python = module.params["python"]
    executable = python if "/" in python else module.get_bin_path(python)
    if not executable:
        module.fail_json(msg="no %s on the host: install the distribution's python3 (a minimal server has it)" % python)
    rc, out, err = module.run_command([executable, "-c", PROBE])
    if rc != 0:
        module.fail_json(msg="%s could not report its ABI: %s" % (executable, (err or out).strip()), rc=rc)
    try:
        abi = describe(out)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    abi["executable"] = executable
    module.exit_json(changed=False, ansible_facts={"instinct_python_abi": abi})


if __name__ == "__main__":
    main()
