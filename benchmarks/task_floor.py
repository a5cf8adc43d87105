"""ansible-core's own controller CPU per task and host: the floor under every task of a rollout.

A task that only the controller evaluates (a skipped task, a set_fact, an assert, a debug) still costs it a forked
worker, the host's variables and a callback per host. This benchmark runs playbooks of TASKS such tasks against 1 and
against HOSTS local-connection hosts (no ssh, no module: nothing but ansible-core's own work) and reports the CPU each
kind of task costs per added host, so a per-host CPU target can be turned into a number of task runs:

    .venv/bin/python -m benchmarks.task_floor --hosts 16 --tasks 50

Each run reads a configuration of its own (ansible-core's defaults, --forks and --poll-interval), not the ansible.cfg
of the working directory; the environment passes through, so another strategy (ANSIBLE_STRATEGY=...) or setting is
measured the same way. The figures are the ansible-playbook process and its children (getrusage), best of --repeat runs.

With --poll-intervals, it measures instead what the controller spends while a task runs on a host: ansible-playbook
polls its workers every internal_poll_interval seconds (an ansible.cfg setting, 0.001 by default, with no environment
variable), so a run pays CPU per second of wall time whatever its hosts do:

    .venv/bin/python -m benchmarks.task_floor --poll-intervals 0.001 0.005 0.01 0.02 --wait 20
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

# ansible-core's own default (config/base.yml, DEFAULT_INTERNAL_POLL_INTERVAL); --poll-interval measures another.
DEFAULT_POLL_INTERVAL = 0.001

# Each kind as one task; none connects to a host.
KINDS = {
    "skipped": {"ansible.builtin.debug": {"msg": "never"}, "when": False},
    "set_fact": {"ansible.builtin.set_fact": {"floor_value": 1}},
    "assert": {"ansible.builtin.assert": {"that": True, "quiet": True}},
    "debug": {"ansible.builtin.debug": {"msg": "floor"}},
}


def write_playbook(path, tasks):
    """One play of these tasks against every host, no facts gathered."""
    play = {"name": "Floor", "hosts": "all", "gather_facts": False, "tasks": tasks}
    with open(path, "w") as handle:
        yaml.safe_dump([play], handle, sort_keys=False)


def kind_tasks(kind, count):
    return [dict({"name": "Task %d" % index}, **copy.deepcopy(KINDS[kind])) for index in range(count)]


def write_inventory(path, hosts):
    with open(path, "w") as handle:
        handle.write("[floor]\n")
        for index in range(1, hosts + 1):
            handle.write("floor-%d ansible_connection=local ansible_python_interpreter=%s\n" % (index, sys.executable))


def ansible_env(workdir, interval):
    """ansible-core's defaults but forks and the poll interval, whatever ansible.cfg the working directory holds;
    the environment still passes through (ANSIBLE_STRATEGY=...)."""
    config = os.path.join(workdir, "poll-%s.cfg" % interval)
    with open(config, "w") as handle:
        handle.write("[defaults]\ninternal_poll_interval = %s\n" % interval)
    return dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1")


def cpu_of(argv, env):
    """CPU seconds (user + system) of argv and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def least_cpu(inventory, playbook, env, repeat):
    """The least CPU of `repeat` runs of the playbook."""
    return min(cpu_of([ANSIBLE_PLAYBOOK, "-i", inventory, playbook], env) for _run in range(repeat))


def measure(workdir, kind, tasks, hosts, forks, repeat, interval=DEFAULT_POLL_INTERVAL):
    playbook = os.path.join(workdir, kind + ".yml")
    write_playbook(playbook, kind_tasks(kind, tasks))
    env = dict(ansible_env(workdir, interval), ANSIBLE_FORKS=str(forks))
    figures = {}
    for count in (1, hosts):
        inventory = os.path.join(workdir, "hosts-%d.ini" % count)
        write_inventory(inventory, count)
        figures[count] = least_cpu(inventory, playbook, env, repeat)
    per_task_host = (figures[hosts] - figures[1]) / ((hosts - 1) * tasks)
    return {"kind": kind, "cpu_1": figures[1], "cpu_n": figures[hosts], "ms_per_task_host": per_task_host * 1000}


def poll_cost(workdir, interval, seconds, repeat):
    """Controller CPU per wall second while one task waits `seconds` on a host, at this internal_poll_interval."""
    env = ansible_env(workdir, interval)
    inventory = os.path.join(workdir, "hosts-1.ini")
    write_inventory(inventory, 1)
    cpu = {}
    for wait in (0, seconds):
        playbook = os.path.join(workdir, "wait-%d.yml" % wait)
        write_playbook(playbook, [{"name": "Wait on the host", "ansible.builtin.command": "sleep %d" % wait}])
        cpu[wait] = least_cpu(inventory, playbook, env, repeat)
    return (cpu[seconds] - cpu[0]) / seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=16, help="hosts of the larger run (default: 16)")
    parser.add_argument("--tasks", type=int, default=50, help="tasks per playbook (default: 50)")
    parser.add_argument("--forks", type=int, default=20, help="ansible forks (default: 20, as in ansible.cfg)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the least CPU kept (default: 3)")
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=list(KINDS))
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=DEFAULT_POLL_INTERVAL,
        help="internal_poll_interval of the task runs (default: %s, ansible-core's)" % DEFAULT_POLL_INTERVAL,
    )
    parser.add_argument("--poll-intervals", type=float, nargs="+", help="measure the polling cost at these instead")
    parser.add_argument("--wait", type=int, default=20, help="seconds the polled task runs (default: 20)")
    args = parser.parse_args(argv)
    if args.hosts < 2 or args.tasks < 1:
        parser.error("--hosts must be at least 2 and --tasks at least 1")
    if args.poll_intervals:
        print("one task of %d s on one local host, best of %d" % (args.wait, args.repeat))
        print("%-24s %28s" % ("internal_poll_interval", "controller CPU s per wall s"))
        with tempfile.TemporaryDirectory(prefix="task-floor-") as workdir:
            for interval in args.poll_intervals:
                print("%-24s %28.3f" % (interval, poll_cost(workdir, interval, args.wait, args.repeat)))
        return 0
    print(
        "%d tasks, 1 and %d local hosts, %d forks, internal_poll_interval %s, best of %d"
        % (args.tasks, args.hosts, args.forks, args.poll_interval, args.repeat)
    )
    print("%-10s %10s %10s %22s" % ("kind", "CPU 1 host", "CPU N", "ms per task and host"))
    with tempfile.TemporaryDirectory(prefix="task-floor-") as workdir:
        for kind in args.kinds:
            row = measure(workdir, kind, args.tasks, args.hosts, args.forks, args.repeat, args.poll_interval)
            print("%-10s %9.2fs %9.2fs %22.1f" % (kind, row["cpu_1"], row["cpu_n"], row["ms_per_task_host"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
