"""`ansible-playbook site.yml --tags vllm_service` against the converged cluster: the services redeployed alone.

No other role runs, so the vllm_service role finds the GPUs (instinct.stack.gfx_arch) and the current stack itself.
Run from the controller as an operator would, once unchanged (changed=0, no restart, /health still answers), then on
node2 after its record of the stack its service runs from was set back to another stack, as a run with
`--tags vllm` that moved the current link leaves it: that service alone restarts, onto the current stack.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra

ROOT = Path(__file__).resolve().parents[3]
NODES = ("node1", "node2")
UNIT = "vllm-fixture.service"
RECORD = "/etc/instinct-stack/vllm/fixture.stack"
VALIDATION = "Validating arguments against arg spec"
ROLE_OF_PATH = re.compile(r"/roles/(\w+)/")


def nodes():
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    return {name: testinfra.get_host("ansible://" + name, ansible_inventory=inventory) for name in NODES}


def invocation(host):
    return host.check_output("systemctl show -p InvocationID --value %s", UNIT)


def site(*args):
    """Run site.yml with --tags vllm_service; return (per-task results, stats). Output is JSON, so parsed, and
    never shown whole: the fixture's API key must not reach the scenario's log."""
    # JSON only: the scenario's profile_tasks callback would write its timings into it.
    env = dict(
        os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.json"
    )
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    command = [
        os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
        "-i",
        os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
        str(ROOT / "site.yml"),
        "--tags",
        "vllm_service",
        *args,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False, cwd=ROOT, env=env)
    assert "molecule-canary-key" not in proc.stdout + proc.stderr
    assert proc.stdout.startswith("{"), (proc.returncode, proc.stderr[-2000:])
    run = json.loads(proc.stdout)
    tasks = [
        (task["task"]["name"], task["task"].get("path", ""), host, result)
        for play in run["plays"]
        for task in play["tasks"]
        for host, result in task["hosts"].items()
    ]
    failures = [
        (name, host, result.get("msg"))
        for name, _path, host, result in tasks
        if result.get("failed") or result.get("unreachable")
    ]
    assert proc.returncode == 0, (failures, proc.stderr[-2000:])
    return tasks, run["stats"]


@pytest.fixture(scope="module")
def unchanged_run():
    hosts = nodes()
    before = {name: invocation(host) for name, host in hosts.items()}
    tasks, stats = site()
    return tasks, stats, before, {name: invocation(host) for name, host in hosts.items()}


def test_only_the_service_role_runs(unchanged_run):
    tasks, _stats, _before, _after = unchanged_run
    ran = {
        ROLE_OF_PATH.search(path).group(1) if ROLE_OF_PATH.search(path) else name
        for name, path, _host, result in tasks
        if VALIDATION not in name and not result.get("skipped")
    }
    # The root site.yml's own check that the inventory names hosts (tagged always) is the only other task.
    assert ran == {"vllm_service", "Check that the inventory names hosts"}, ran


def test_the_role_found_the_gpus_itself(unchanged_run):
    tasks, _stats, _before, _after = unchanged_run
    detected = {
        host: result
        for name, _path, host, result in tasks
        if name.endswith("Detect the GPUs when the rocm role did not run")
    }
    assert set(detected) == set(NODES)
    for result in detected.values():
        assert not result.get("skipped") and result["gfx_arch"] == ["gfx942"], result


def test_an_unchanged_redeploy_changes_and_restarts_nothing(unchanged_run):
    _tasks, stats, before, after = unchanged_run
    for name in NODES:
        assert stats[name]["changed"] == 0 and stats[name]["failures"] == 0, (name, stats[name])
    assert after == before


def test_the_services_still_answer_health(unchanged_run):
    for name, host in nodes().items():
        assert host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == "200", name


def test_a_stack_moved_by_an_earlier_run_restarts_its_service(unchanged_run):
    hosts = nodes()
    current = hosts["node2"].check_output("readlink -f /opt/instinct-stack/current")
    hosts["node2"].check_output("printf '/opt/instinct-stack/stacks/previous\\n' | sudo tee %s >/dev/null", RECORD)
    before = {name: invocation(host) for name, host in hosts.items()}
    tasks, stats = site("--limit", "node2")
    changed = {
        name.split(" : ", 1)[-1] for name, _path, host, result in tasks if host == "node2" and result.get("changed")
    }
    assert "Record the stack each service runs from" in changed and "Restart vLLM" in changed, changed
    assert "node1" not in stats and stats["node2"]["failures"] == 0
    assert invocation(hosts["node2"]) != before["node2"] and invocation(hosts["node1"]) == before["node1"]
    assert hosts["node2"].check_output("sudo cat %s", RECORD) == current
    assert hosts["node2"].check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == "200"
