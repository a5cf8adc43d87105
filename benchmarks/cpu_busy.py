"""How busy the machine's cores are while a command runs, overall and per stage of it.

    .venv/bin/python -m benchmarks.cpu_busy sample build/cpu.log -- .ci/run      # run it, sampling /proc/stat
    .venv/bin/python -m benchmarks.cpu_busy report build/cpu.log --results build/test-results

`sample` runs the command and writes one line every --every seconds (default 10): the epoch seconds and the first
line of /proc/stat (all cores' jiffies: user nice system idle iowait ...). Its exit status is the command's.

`report` gives the busy share of all cores (100 % = every core busy) over the whole log and, with --results
(scripts/test.sh's build/test-results: NAME RESULT SECONDS s per line, in the order the stages ended), per stage,
each stage taken to start where the one before it ended. That holds for a run with INSTINCT_TEST_LANES=1 (one
stage after another); with two lanes the stages overlap and only the whole figure means anything.
"""

import argparse
import os
import subprocess
import sys
import threading
import time


def stat_line():
    with open("/proc/stat") as handle:
        return handle.readline().strip()


def parse(lines):
    """[(epoch, total jiffies, idle jiffies)] from sample lines; idle counts idle and iowait."""
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) < 7 or fields[1] != "cpu":
            continue
        jiffies = [int(value) for value in fields[2:]]
        points.append((int(fields[0]), sum(jiffies), jiffies[3] + jiffies[4]))
    return points


def busy(points, start=None, end=None):
    """The busy share (0-100) between the first and last sample within [start, end] (epoch seconds), or None."""
    inside = [p for p in points if (start is None or p[0] >= start) and (end is None or p[0] <= end)]
    if len(inside) < 2 or inside[-1][1] == inside[0][1]:
        return None
    total = inside[-1][1] - inside[0][1]
    idle = inside[-1][2] - inside[0][2]
    return 100.0 * (total - idle) / total


def stages(results_text):
    """[(name, seconds)] from scripts/test.sh's results file."""
    parsed = []
    for line in results_text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[-1] == "s":
            parsed.append((fields[0], int(fields[-2])))
    return parsed


def report(points, stage_list):
    lines = []
    if not points:
        return "no samples"
    start = points[0][0]
    lines.append(
        "whole run: %d s, busy %.1f %% of all cores (%d samples)" % (points[-1][0] - start, busy(points), len(points))
    )
    for name, seconds in stage_list:
        share = busy(points, start, start + seconds)
        lines.append("%-24s %6d s  %s" % (name, seconds, "-" if share is None else "%5.1f %%" % share))
        start += seconds
    return "\n".join(lines)


def sample(path, argv, every):
    done = threading.Event()

    def sampler():
        with open(path, "w") as log:
            while True:
                log.write("%d %s\n" % (int(time.time()), stat_line()))
                log.flush()
                if done.wait(every):
                    log.write("%d %s\n" % (int(time.time()), stat_line()))
                    return

    thread = threading.Thread(target=sampler)
    thread.start()
    try:
        return subprocess.run(argv, check=False).returncode  # noqa: S603
    finally:
        done.set()
        thread.join()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    sampling = sub.add_parser("sample", help="run a command, sampling /proc/stat")
    sampling.add_argument("log")
    sampling.add_argument("--every", type=float, default=10)
    reporting = sub.add_parser("report", help="busy share overall and per stage")
    reporting.add_argument("log")
    reporting.add_argument("--results", help="scripts/test.sh's build/test-results")
    argv = list(sys.argv[1:] if argv is None else argv)
    # The command to sample is everything after "--", taken before argparse sees the options.
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = parser.parse_args(argv)
    if args.action == "sample":
        if not command:
            parser.error("sample: give the command after --")
        return sample(args.log, command, args.every)
    with open(args.log) as handle:
        points = parse(handle)
    stage_list = []
    if args.results:
        if not os.path.exists(args.results):
            parser.error("no results file at %s" % args.results)
        with open(args.results) as handle:
            stage_list = stages(handle.read())
    print(report(points, stage_list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
