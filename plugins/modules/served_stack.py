#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: served_stack
short_description: Read the stack in service, the previous one and the one to serve, in one step
version_added: "0.3.0"
description:
  - Reads where the link O(link) (the stack the services run from) and the link C(previous) beside it point, and
    whether the stack in service and the one to serve hold the C(.verified) record the vllm role writes once it verified
    a stack, and whether the one to serve holds C(venv/bin/vllm).
  - The vllm_service role decides from this whether it may switch (a stack that is missing or was not verified is
    refused) and whether it can go back when the new stack's services do not come up.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  link:
    description: The link the services run from (the vllm_service role's C(vllm_service_stack)).
    type: path
    required: true
  target:
    description: The stack to serve, without surrounding whitespace; empty keeps the one O(link) names.
    type: str
    default: ""
extends_documentation_fragment:
  - instinct.stack.read_only
"""

EXAMPLES = r"""
- name: Find the stacks
  instinct.stack.served_stack:
    link: /opt/instinct/current
    target: /opt/instinct/stacks/3f2a9c
  register: stacks

- name: Refuse a stack that was not verified
  ansible.builtin.assert:
    that: stacks.target_verified
"""

RETURN = r"""
current:
  description: Where O(link) points, as the link says; empty when there is no link.
  returned: always
  type: str
  sample: /opt/instinct/stacks/1c0d4e
current_verified:
  description: Whether the stack in service holds its C(.verified) record.
  returned: always
  type: bool
previous:
  description: Where the link C(previous) beside O(link) points; empty when there is none.
  returned: always
  type: str
target:
  description: The stack to serve, O(target) or else RV(current).
  returned: always
  type: str
target_runnable:
  description: Whether the stack to serve holds C(venv/bin/vllm).
  returned: always
  type: bool
target_verified:
  description: Whether the stack to serve holds its C(.verified) record.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.served_stack import describe


def main():
    module = AnsibleModule(
        argument_spec={"link": {"type": "path", "required": True}, "target": {"type": "str", "default": ""}},
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **describe(module.params["link"], module.params["target"]))


if __name__ == "__main__":
    main()
