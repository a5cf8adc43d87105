"""Where one host's share of a run's controller CPU goes, from the task_cpu callback (benchmarks.scale --profile).

Each task's controller CPU is split evenly over the hosts that reported a result for it (a skipped host counts: its
worker ran), and the host's shares are summed by role and listed by task, the largest first:

    .venv/bin/python -m benchmarks.task_cpu build/bench-scale/logs/ansible-4-first-task-cpu.json --host ibench-4

A task that runs on one host alone (run_once, a delegated build) is the build host's and the run's, not an added
host's: it shows under the host it reported on. Loop items are counted (items) beside the task.
"""

import argparse
import collections
import json
import sys


def host_shares(entries, host):
    """[(cpu share, entry)] of each task that reported on host."""
    shares = []
    for entry in entries:
        if host in entry["hosts"]:
            shares.append((entry["cpu"] / len(entry["hosts"]), entry))
    return shares


def summary(entries, host, top=25):
    shares = host_shares(entries, host)
    by_role = collections.Counter()
    runs = collections.Counter()
    for share, entry in shares:
        by_role[entry["role"] or "(plays)"] += share
        runs[entry["role"] or "(plays)"] += 1
    lines = [
        "%s: %d task runs, controller CPU share %.2f s" % (host, len(shares), sum(share for share, _entry in shares)),
        "by role (task runs, CPU s):",
    ]
    lines += ["  %-14s %4d %7.2f" % (role, runs[role], cpu) for role, cpu in by_role.most_common()]
    lines.append("largest tasks (CPU s, action, statuses on this host):")
    for share, entry in sorted(shares, key=lambda pair: -pair[0])[:top]:
        statuses = ",".join("%s=%d" % pair for pair in sorted(entry["hosts"][host].items()))
        lines.append(
            "  %6.3f  %-34s %-22s %s"
            % (share, entry["action"][:34], statuses, (entry["role"] + ": " + entry["task"])[:90])
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", help="the task_cpu callback's JSON file")
    parser.add_argument("--host", required=True, help="the host whose share to show")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    with open(args.file) as handle:
        entries = json.load(handle)
    print(summary(entries, args.host, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
