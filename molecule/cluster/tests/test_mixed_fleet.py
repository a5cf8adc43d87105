"""A mixed fleet: node3, a minimal Debian 13 server (CPython 3.13 on glibc 2.41, from build-image.sh with
INSTINCT_GUEST_SUITE=trixie), joins the converged Debian 12 nodes (CPython 3.11 on glibc 2.36) as an inference host.

The stack node1 builds is a set of cp311 wheels linked against glibc 2.36: it cannot install on node3. site.yml's
second play finds every host's Python ABI (instinct.stack.python_abi) and refuses the run before any host changes or
is locked, naming the hosts of each ABI (README: one Python ABI per run). node3 is started here on the scenario's
bridge beside the two nodes and stopped at the end; the scenario's own inventory stays as molecule wrote it.
"""

import json
import os
import subprocess

import pytest
import testinfra
import yaml
from cluster_hosts import NODES, invocation, nodes, playbook_json

from tests import harness

BUILD_IMAGE = os.path.join(harness.ROOT, "molecule", "shared", "vm", "build-image.sh")
NEWER = {"name": "node3", "suite": "trixie", "address": "10.232.0.13/24"}
LOCK = "/var/lib/instinct-stack/rollout.lock"
REFUSAL = "Refuse hosts of several Python ABIs"


def nspawnctl(*args):
    workdir = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
    # The bridge create-nspawn.yml made for the scenario (molecule/shared/vars/nspawn.yml).
    bridge = "im-" + os.environ["MOLECULE_SCENARIO_NAME"][:12]
    command = harness.argv("nspawnctl", *args, "--workdir", workdir, "--bridge", bridge)
    env = harness.env()
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=600, env=env)  # noqa: S603


@pytest.fixture(scope="module")
def newer_host(tmp_path_factory):
    """node3 running, and an inventory that adds it to inference_hosts; stopped at the end whatever happened."""
    image = subprocess.run(  # noqa: S603
        [BUILD_IMAGE],
        env=dict(os.environ, INSTINCT_GUEST_SUITE=NEWER["suite"]),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert image.returncode == 0, image.stderr[-3000:]
    started = nspawnctl("start", NEWER["name"], "--image-dir", image.stdout.strip(), "--address", NEWER["address"])
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        instance = json.loads(started.stdout)
        inventory = tmp_path_factory.mktemp("mixed-fleet") / "newer.yml"
        host = {
            "ansible_host": instance["address"],
            "ansible_user": instance["user"],
            "ansible_private_key_file": instance["identity_file"],
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        }
        inventory.write_text(
            yaml.safe_dump({"all": {"children": {"inference_hosts": {"hosts": {NEWER["name"]: host}}}}})
        )
        yield str(inventory), testinfra.get_host("ansible://" + NEWER["name"], ansible_inventory=str(inventory))
    finally:
        nspawnctl("stop", NEWER["name"])


def test_a_host_of_another_debian_release_is_refused_before_any_host_changes(newer_host):
    inventory, node3 = newer_host
    assert node3.system_info.codename == "trixie"
    hosts = nodes()
    before = {name: invocation(host) for name, host in hosts.items()}

    returncode, run = playbook_json("site.yml", "-i", inventory, timeout=600)

    assert returncode != 0
    failed = [
        (task["task"]["name"], host, result.get("msg", ""))
        for play in run["plays"]
        for task in play["tasks"]
        for host, result in task["hosts"].items()
        if result.get("failed") or result.get("unreachable")
    ]
    assert [(name, host) for name, host, _msg in failed] == [(REFUSAL, "node1")], failed
    message = failed[0][2]
    # The larger group first; each ABI as its key and its Python's version, with its hosts.
    assert "the hosts run Pythons of 2 ABIs" in message, message
    assert "cp311-linux_x86_64-glibc2.36 (Python 3.11." in message and "): node1, node2; " in message, message
    assert "cp313-linux_x86_64-glibc2.41 (Python 3.13." in message and message.split("cp313")[1].count("node3") == 1
    assert "as a run of their own" in message

    # Nothing ran after the refusal: no lock taken, no role's task, nothing changed anywhere.
    ran = {task["task"]["name"] for play in run["plays"] for task in play["tasks"]}
    assert "Take the rollout lock" not in ran
    assert [
        task["task"]["name"]
        for play in run["plays"]
        for task in play["tasks"]
        if "/roles/" in task["task"].get("path", "")
    ] == []
    # Every host of the run, the controller's own check of the inventory (localhost) among them, changed nothing.
    assert {*NODES, "node3"} <= set(run["stats"])
    assert {host: stats["changed"] for host, stats in run["stats"].items()} == dict.fromkeys(run["stats"], 0)
    assert {name: invocation(host) for name, host in hosts.items()} == before
    assert not node3.file(LOCK).exists
    assert not node3.file("/etc/instinct-stack").exists
    assert not node3.package("python3-venv").is_installed  # the roles' first package never came
