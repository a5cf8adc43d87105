"""What the cluster scenario's operator-style tests share: the two nodes, their service's invocation, and
ansible-playbook run from the controller with JSON output (tests/harness/playbook_runner.py)."""

import os

import testinfra

from tests.harness.playbook_runner import playbook_json  # the scenario's tests import it from here

__all__ = ["NODES", "UNIT", "invocation", "nodes", "playbook_json"]

NODES = ("node1", "node2")
UNIT = "vllm-fixture.service"


def nodes():
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    return {name: testinfra.get_host("ansible://" + name, ansible_inventory=inventory) for name in NODES}


def invocation(host):
    return host.check_output("systemctl show -p InvocationID --value %s", UNIT)
