"""ansible-core's own controller CPU per task and host: the floor under every task of a rollout.

A task that only the controller evaluates (a skipped task, a set_fact, an assert, a debug) still costs it a forked
worker, the host's variables and a callback per host. This benchmark runs playbooks of TASKS such tasks against 1 and
against HOSTS local-connection hosts (no ssh, no module: nothing but ansible-core's own work) and reports the CPU each
kind of task costs per added host, so a per-host CPU target can be turned into a number of task runs:

    .venv/bin/python -m benchmarks.task_floor --hosts 16 --tasks 50

The environment passes through, so another strategy (ANSIBLE_STRATEGY=...) or setting is measured the same way.
The figures are the ansible-playbook process and its children (getrusage), best of --repeat runs.
"""

import argparse
import copy
import os
import resource
import subprocess
import sys
import tempfile

import yaml

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

# Each kind as one task; none connects to a host.
KINDS = {
    "skipped": {"ansible.builtin.debug": {"msg": "never"}, "when": False},
    "set_fact": {"ansible.builtin.set_fact": {"floor_value": 1}},
    "assert": {"ansible.builtin.assert": {"that": True, "quiet": True}},
    "debug": {"ansible.builtin.debug": {"msg": "floor"}},
}


def write_playbook(path, kind, tasks):
    play = {
        "name": "Floor of %s tasks" % kind,
        "hosts": "all",
        "gather_facts": False,
        "tasks": [dict({"name": "Task %d" % index}, **copy.deepcopy(KINDS[kind])) for index in range(tasks)],
    }
    with open(path, "w") as handle:
        yaml.safe_dump([play], handle, sort_keys=False)


def write_inventory(path, hosts):
    with open(path, "w") as handle:
        handle.write("[floor]\n")
        for index in range(1, hosts + 1):
            handle.write("floor-%d ansible_connection=local ansible_python_interpreter=%s\n" % (index, sys.executable))


def cpu_of(argv, env):
    """CPU seconds (user + system) of argv and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(workdir, kind, tasks, hosts, forks, repeat):
    playbook = os.path.join(workdir, kind + ".yml")
    write_playbook(playbook, kind, tasks)
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1")
    figures = {}
    for count in (1, hosts):
        inventory = os.path.join(workdir, "hosts-%d.ini" % count)
        write_inventory(inventory, count)
        figures[count] = min(cpu_of([ANSIBLE_PLAYBOOK, "-i", inventory, playbook], env) for _ in range(repeat))
    per_task_host = (figures[hosts] - figures[1]) / ((hosts - 1) * tasks)
    return {"kind": kind, "cpu_1": figures[1], "cpu_n": figures[hosts], "ms_per_task_host": per_task_host * 1000}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=16, help="hosts of the larger run (default: 16)")
    parser.add_argument("--tasks", type=int, default=50, help="tasks per playbook (default: 50)")
    parser.add_argument("--forks", type=int, default=20, help="ansible forks (default: 20, as in ansible.cfg)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the least CPU kept (default: 3)")
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=list(KINDS))
    args = parser.parse_args(argv)
    if args.hosts < 2 or args.tasks < 1:
        parser.error("--hosts must be at least 2 and --tasks at least 1")
    print("%d tasks, 1 and %d local hosts, %d forks, best of %d" % (args.tasks, args.hosts, args.forks, args.repeat))
    print("%-10s %10s %10s %22s" % ("kind", "CPU 1 host", "CPU N", "ms per task and host"))
    with tempfile.TemporaryDirectory(prefix="task-floor-") as workdir:
        for kind in args.kinds:
            row = measure(workdir, kind, args.tasks, args.hosts, args.forks, args.repeat)
            print("%-10s %9.2fs %9.2fs %22.1f" % (kind, row["cpu_1"], row["cpu_n"], row["ms_per_task_host"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
