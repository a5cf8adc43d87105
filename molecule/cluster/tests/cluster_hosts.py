"""What the cluster scenario's operator-style tests share: the two nodes, their service's invocation, and
ansible-playbook run from the controller with JSON output."""

import json
import os
import subprocess
import sys
from pathlib import Path

import testinfra

ROOT = Path(__file__).resolve().parents[3]
NODES = ("node1", "node2")
UNIT = "vllm-fixture.service"


def nodes():
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    return {name: testinfra.get_host("ansible://" + name, ansible_inventory=inventory) for name in NODES}


def invocation(host):
    return host.check_output("systemctl show -p InvocationID --value %s", UNIT)


def playbook_json(path, *args, timeout=1200):
    """Run ROOT/path against the scenario's inventory; return (return code, the JSON callback's output). The output
    is parsed and never shown whole: the fixture's API key must not reach the scenario's log."""
    # JSON only: the scenario's profile_tasks callback would write its timings into it.
    env = dict(
        os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.json"
    )
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    command = [
        os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
        "-i",
        os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
        str(ROOT / path),
        *args,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT, env=env)
    assert "molecule-canary-key" not in proc.stdout + proc.stderr
    assert proc.stdout.startswith("{"), (proc.returncode, proc.stderr[-2000:])
    return proc.returncode, json.loads(proc.stdout)
