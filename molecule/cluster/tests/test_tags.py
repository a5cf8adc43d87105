"""`ansible-playbook site.yml --tags vllm_service` against the converged cluster: the services redeployed alone.

No other role runs, so the vllm_service role finds the GPUs (instinct.stack.gfx_arch) and the current stack itself.
Run from the controller as an operator would, once unchanged (changed=0, no restart, /health still answers), then on
node2 after its record of the stack its service runs from was set back to another stack, as a run with
`--tags vllm` that moved the current link leaves it: that service alone restarts, onto the current stack.
"""

import re

import pytest
from cluster_hosts import NODES, invocation, nodes, playbook_json

RECORD = "/etc/instinct-stack/vllm/fixture.stack"
VALIDATION = "Validating arguments against arg spec"
# A role's task is named by its role; site.yml's first play (the inputs' check, which reads no host) by its file.
ROLE_OF_PATH = re.compile(r"/roles/(\w+)/|/playbooks/(check_inputs)\.yml")


def site(*args):
    """Run site.yml with --tags vllm_service; return (per-task results, stats)."""
    returncode, run = playbook_json("site.yml", "--tags", "vllm_service", *args)
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
    assert returncode == 0, failures
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
        next(group for group in ROLE_OF_PATH.search(path).groups() if group) if ROLE_OF_PATH.search(path) else name
        for name, path, _host, result in tasks
        if VALIDATION not in name and not result.get("skipped")
    }
    # The other tasks are tagged always: the root site.yml's check that the inventory names hosts, the inputs' and the
    # Python ABI's checks, and the rollout lock taken first and given back last (playbooks/tasks/rollout_lock.yml; its
    # stop block is skipped).
    assert ran == {
        "vllm_service",
        "Check that the inventory names hosts",
        "check_inputs",
        "Find the host's Python ABI",
        "Refuse hosts of several Python ABIs",
        "Take the rollout lock",
        "Give back the rollout lock",
    }, ran


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
