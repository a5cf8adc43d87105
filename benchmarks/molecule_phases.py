"""Wall time, task count and changed count of each molecule phase, from a `molecule test` log.

    scripts/test.sh                         # writes build/molecule-SCENARIO.log
    .venv/bin/python -m benchmarks.molecule_phases build/molecule-default.log
    molecule test 2>&1 | .venv/bin/python -m benchmarks.molecule_phases --stamp LOG   # passes the output on

With --stamp, every line goes on to stdout as it comes and into LOG behind the seconds since the start;
a stamped log gives each phase's whole wall time (verify and molecule's own work included), from its
"Executing" line to the next one. An unstamped log falls back to the profile_tasks callback the
scenarios enable (its running total at the end of each playbook, so no figure for verify).
ok/changed come from each phase's PLAY RECAP, summed over hosts.
"""

import re
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PHASE = re.compile(r"➜ (\w+): Executing\s*$")
STAMP = re.compile(r"^\[\s*(\d+\.\d+)\] ")
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
    """(name, seconds, ok, changed, hosts) per phase; seconds from the stamps where the log has them."""
    found = []  # [name, stamp of its "Executing" line, its lines]
    stamp = None
    for line in ANSI.sub("", text).splitlines():
        stamped = STAMP.match(line)
        if stamped:
            stamp = float(stamped.group(1))
        started = PHASE.search(line)
        if started:
            found.append((started.group(1), stamp, []))
        elif found:
            found[-1][2].append(line)
    for index, (name, start, lines) in enumerate(found):
        body = "\n".join(lines)
        end = found[index + 1][1] if index + 1 < len(found) else stamp
        if start is not None and end is not None:
            seconds = round(end - start, 1)
        else:
            totals = TOTAL.findall(body)
            seconds = int(totals[-1][0]) * 3600 + int(totals[-1][1]) * 60 + float(totals[-1][2]) if totals else None
        recap = recap_totals(body)
        yield name, seconds, recap["ok"], recap["changed"], recap["hosts"]


def stamp_lines(source, sink, log):
    """Copies source to sink line by line as it comes, and to log behind the seconds since the start."""
    started = time.monotonic()
    for line in source:
        sink.write(line)
        sink.flush()
        log.write("[%8.1f] %s" % (time.monotonic() - started, line))
        log.flush()


def main(path):
    with open(path, errors="replace") as handle:
        text = handle.read()
    print("%-12s %10s %8s %8s %6s" % ("phase", "seconds", "tasks", "changed", "hosts"))
    for name, seconds, ok, changed, hosts in phases(text):
        print("%-12s %10s %8d %8d %6d" % (name, "-" if seconds is None else "%.1f" % seconds, ok, changed, hosts))


if __name__ == "__main__":
    if sys.argv[1] == "--stamp":
        with open(sys.argv[2], "w") as log_file:
            stamp_lines(open(sys.stdin.fileno(), errors="replace", closefd=False), sys.stdout, log_file)  # noqa: SIM115
    else:
        main(sys.argv[1])
