"""site.yml's converged fast path on the converged cluster (instinct.stack.converged; the scenario turns it off for
molecule's idempotence run, which exercises the roles, so these runs turn it on with -e).

A whole rerun finds both nodes as the last whole rollout left them, in one check each, and runs no role on them.
Then node2 drifts (its linker entry removed): the next run runs node2 in full, which restores the entry, and leaves
node1 alone; the run after finds both converged again.
"""

from cluster_hosts import NODES, invocation, nodes, playbook_json

FAST = ("-e", "instinct_converged_check=true")
LINKER_ENTRY = "/etc/ld.so.conf.d/20-instinct-rocm.conf"
CHECK_INPUTS = "/playbooks/check_inputs.yml"
CHECK = "Check whether the host is as the last whole rollout left it"
# What a converged host runs: site.yml's own tasks around the roles (the run_once ones on the first host alone): the
# inputs' check (playbooks/check_inputs.yml, matched by its path below), the Python ABI's, the lock, the fast path's.
FAST_PATH_TASKS = {
    "Find the host's Python ABI",
    "Refuse hosts of several Python ABIs",
    "Take the rollout lock",
    CHECK,
    "Put the converged hosts in the group instinct_converged",
    "Give back the rollout lock",
    "Keep the build host where it would be with every host in the run",
    "Name the converged hosts, which this run leaves alone",
}


def site():
    returncode, run = playbook_json("site.yml", *FAST)
    ran = {name: [] for name in NODES}
    for play in run["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                if host in ran and not result.get("skipped"):
                    ran[host].append((task["task"]["name"], task["task"].get("path", ""), result))
    return returncode, run, ran


def converged(ran, host):
    ((result,),) = [(result,) for name, _path, result in ran[host] if name == CHECK]
    return result["converged"], result.get("reasons")


def test_a_whole_rerun_checks_each_node_once_and_runs_no_role():
    hosts = nodes()
    before = {name: invocation(host) for name, host in hosts.items()}
    returncode, run, ran = site()
    assert returncode == 0
    for name in NODES:
        assert converged(ran, name) == (True, []), converged(ran, name)
        assert run["stats"][name]["changed"] == 0
        # The checks, the lock, the fast path's check, the lock's give-back: no role's task.
        site_tasks = {task for task, path, _result in ran[name] if "/roles/" not in path and CHECK_INPUTS not in path}
        assert site_tasks <= FAST_PATH_TASKS, ran[name]
        assert [task for task, path, _result in ran[name] if "/roles/" in path] == []
    assert {name: invocation(host) for name, host in hosts.items()} == before


def test_a_node_that_drifted_runs_in_full_and_the_other_stays_alone():
    hosts = nodes()
    hosts["node2"].run("sudo rm -f %s", LINKER_ENTRY)
    returncode, run, ran = site()
    assert returncode == 0
    is_converged, reasons = converged(ran, "node2")
    assert not is_converged and any(LINKER_ENTRY in reason for reason in reasons), reasons
    assert run["stats"]["node2"]["changed"] > 0
    assert hosts["node2"].file(LINKER_ENTRY).exists
    assert converged(ran, "node1") == (True, [])
    assert run["stats"]["node1"]["changed"] == 0
    # Recorded again: both converged now.
    returncode, run, ran = site()
    assert returncode == 0
    assert [converged(ran, name)[0] for name in NODES] == [True, True]
    assert sum(run["stats"][name]["changed"] for name in NODES) == 0
