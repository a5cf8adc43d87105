# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters about the fleet as a whole: whether its hosts can share one stack, and its serving groups (one model on
several hosts): the checks before a group starts and the serve play's batches."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.instinct.stack.plugins.module_utils import serving_group
from ansible_collections.instinct.stack.plugins.module_utils.python_abi import fleet_problem


def python_abi_problem(abis):
    if not isinstance(abis, dict):
        raise AnsibleFilterError("python_abi_problem takes a dict of host name to instinct_python_abi, got %r" % abis)
    return fleet_problem(abis)


def _host_var(hostvars, host, name, default=None):
    if host not in hostvars:
        return default
    value = hostvars[host].get(name)
    return default if value is None else value


def serving_group_problems(instance, hostvars, fact="vllm_service_node"):
    """Why a validated serving-group instance cannot start, each problem naming the node; [] when it can.

    Each node's `fact` (set by the vllm_service role in the same batch) holds what it would serve; a node without it
    is not in this run."""
    try:
        facts = {}
        for node in serving_group.group_nodes(instance):
            found = _host_var(hostvars, node, fact)
            if found:
                facts[node] = serving_group.node_facts(instance, found)
        return serving_group.check_group(instance, facts)
    except serving_group.InvalidGroup as exc:
        raise AnsibleFilterError(str(exc)) from exc


def serve_order(hosts, hostvars, serial, instances="vllm_service_instances"):
    """{"hosts": the serve play's hosts, each serving group's nodes together, "serial": its batches (a group is one
    batch)}, from each host's `instances` variable."""
    ordered, groups = serving_group.serve_order(hosts, lambda host: _host_var(hostvars, host, instances, []))
    return {"hosts": ordered, "serial": serving_group.serve_batches(ordered, groups, serial), "groups": groups}


def serving_group_addresses(instance, hostvars, fact="vllm_service_node"):
    """{node: address} of a serving-group instance's nodes, from each node's `fact` (set by the vllm_service role in
    the same batch); a node without it has no address (None)."""
    try:
        nodes = serving_group.group_nodes(instance)
    except serving_group.InvalidGroup as exc:
        raise AnsibleFilterError(str(exc)) from exc
    return {node: (_host_var(hostvars, node, fact, {}) or {}).get("address") for node in nodes}


def serving_groups_changed(instances, hostvars, fact="vllm_service_changed"):
    """The names of this host's serving groups (validated instances) that changed on one of their nodes, from each
    node's `fact` (the instance names whose unit, environment or stack changed there, set in the same batch)."""
    return serving_group.groups_changed(instances, lambda node: _host_var(hostvars, node, fact, []))


def ray_start_args(nodes, node, addresses, gpus, port=serving_group.RAY_PORT):
    """`ray start` arguments for node of a group of nodes (the head first)."""
    try:
        return serving_group.ray_start_args(node, list(nodes), dict(addresses), int(gpus), int(port))
    except serving_group.InvalidGroup as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {
            "python_abi_problem": python_abi_problem,
            "serving_group_problems": serving_group_problems,
            "serve_order": serve_order,
            "ray_start_args": ray_start_args,
            "serving_groups_changed": serving_groups_changed,
            "serving_group_addresses": serving_group_addresses,
        }
