#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ray_nodes
short_description: Read a serving group's Ray cluster, and wait until every node of the group has joined it
version_added: "0.3.0"
description:
  - Joins the Ray cluster at O(address) as a driver with the stack's own Python and Ray (O(python)), lists its
    nodes (C(ray.nodes)) and compares them with the group's O(nodes).
  - With O(timeout) it polls until every node of O(nodes) is alive in the cluster, and fails naming the nodes that are
    not, with Ray's view of the cluster, when they have not joined in time. vLLM would wait for its placement group
    instead, up to 30 minutes, saying only that the cluster lacks GPUs.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  python:
    description: The Python of the stack the group serves (C(venv/bin/python)), whose Ray the cluster runs.
    type: path
    required: true
  address:
    description: The head's Ray address, C(ADDRESS:PORT).
    type: str
    required: true
  node_ip_address:
    description: This host's address in the cluster (the head's C(--node-ip-address)), so the driver finds its Ray.
    type: str
    default: ""
  user:
    description: The account the driver runs as (the one Ray runs as), so it writes into Ray's session as it.
    type: str
  nodes:
    description: The group's nodes, inventory name to address; each must be alive in the cluster.
    type: dict
    default: {}
  name:
    description: The group's name, for the messages.
    type: str
    default: group
  timeout:
    description: Seconds to wait for every node of O(nodes); 0 reads the cluster once and fails when one is missing.
    type: int
    default: 0
  poll:
    description: Seconds between two reads while waiting.
    type: int
    default: 5
  require_all:
    description: Fail when a node is missing; false only reports it (RV(missing)), for a status.
    type: bool
    default: true
extends_documentation_fragment:
  - instinct.stack.read_only
"""

EXAMPLES = r"""
- name: Wait for both nodes of the group to join its Ray cluster
  instinct.stack.ray_nodes:
    python: /opt/instinct-stack/current/venv/bin/python
    address: 10.0.0.11:6379
    node_ip_address: 10.0.0.11
    user: vllm
    name: llama-405b
    nodes: {gpu1: 10.0.0.11, gpu2: 10.0.0.12}
    timeout: 300
"""

RETURN = r"""
nodes:
  description: Ray's nodes, as C(ray.nodes) gives them.
  returned: success
  type: list
  elements: dict
  sample: [{"node_id": "5e1c...", "address": "10.0.0.11", "alive": true, "gpus": 8}]
missing:
  description: The nodes of O(nodes) that are not alive in the cluster, C({node, address}).
  returned: always
  type: list
  elements: dict
waited:
  description: Seconds waited.
  returned: always
  type: int
"""

import pwd
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils import serving_group


def read(module):
    params = module.params
    argv = serving_group.ray_nodes_command(
        params["python"], params["address"], params["node_ip_address"], params["user"]
    )
    environ = {"RAY_USAGE_STATS_ENABLED": "0"}
    if params["user"]:
        # runuser keeps root's environment: Ray's driver writes under HOME.
        try:
            environ["HOME"] = pwd.getpwnam(params["user"]).pw_dir
        except KeyError:
            return None, "no account %s on this host" % params["user"]
    rc, out, err = module.run_command(argv, environ_update=environ)
    if rc != 0:
        return None, (err or out).strip()[-2000:]
    try:
        return serving_group.parse_ray_nodes(out), None
    except ValueError as exc:
        return None, str(exc)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            address=dict(type="str", required=True),
            node_ip_address=dict(type="str", default=""),
            user=dict(type="str"),
            nodes=dict(type="dict", default={}),
            name=dict(type="str", default="group"),
            timeout=dict(type="int", default=0),
            poll=dict(type="int", default=5),
            require_all=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    started = time.monotonic()
    expected = dict((str(node), str(address)) for node, address in params["nodes"].items())
    while True:
        nodes, error = read(module)
        waited = int(time.monotonic() - started)
        missing = serving_group.missing_from_ray(expected, nodes or [])
        if nodes is not None and not missing:
            break
        if waited >= params["timeout"]:
            break
        time.sleep(max(params["poll"], 1))
    result = dict(
        changed=False,
        nodes=nodes or [],
        missing=[dict(node=node, address=address) for node, address in missing],
        waited=waited,
    )
    if nodes is None:
        if not params["require_all"]:
            module.exit_json(error=error, **result)
        module.fail_json(
            msg="serving group %r: could not read the Ray cluster at %s: %s"
            % (params["name"], params["address"], error),
            **result,
        )
    if missing and params["require_all"]:
        module.fail_json(
            msg=serving_group.missing_message(params["name"], params["address"], missing, nodes, waited), **result
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
