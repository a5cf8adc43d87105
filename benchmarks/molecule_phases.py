"""Wall time, task count and changed count of each molecule phase, from a `molecule test` log.

    scripts/test.sh                         # writes build/molecule-SCENARIO.log
    .venv/bin/python benchmarks/molecule_phases.py build/molecule-default.log

Times come from the profile_tasks callback the scenarios enable (its running total at the end of each
playbook); ok/changed come from each phase's PLAY RECAP, summed over hosts.
"""

import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PHASE = re.compile(r"➜ (\w+): Executing")
TOTAL = re.compile(r"\(\d+:\d+:\d+\.\d+\)\s+(\d+):(\d+):(\d+\.\d+)")
RECAP = re.compile(
    r"(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)"
)


def recap_totals(text):
    """Sums the PLAY RECAP lines in text over hosts: ok (tasks run, changed included), changed, unreachable, failed."""
    totals = {"hosts": 0, "ok": 0, "changed": 0, "unreachable": 0, "failed": 0}
    for match in RECAP.finditer(text):
        totals["hosts"] += 1
        for field in ("ok", "changed", "unreachable", "failed"):
            totals[field] += int(match.group(field))
    return totals


def phases(text):
    text = ANSI.sub("", text)
    parts = PHASE.split(text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        totals = TOTAL.findall(body)
        seconds = int(totals[-1][0]) * 3600 + int(totals[-1][1]) * 60 + float(totals[-1][2]) if totals else None
        recap = recap_totals(body)
        yield name, seconds, recap["ok"], recap["changed"], recap["hosts"]


def main(path):
    with open(path, errors="replace") as handle:
        text = handle.read()
    print("%-12s %10s %8s %8s %6s" % ("phase", "seconds", "tasks", "changed", "hosts"))
    for name, seconds, ok, changed, hosts in phases(text):
        print("%-12s %10s %8d %8d %6d" % (name, "-" if seconds is None else "%.1f" % seconds, ok, changed, hosts))


if __name__ == "__main__":
    main(sys.argv[1])
