"""benchmarks/cpu_busy.py: busy shares from /proc/stat samples, per stage of scripts/test.sh's results, and sample."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("cpu_busy", os.path.join(ROOT, "benchmarks", "cpu_busy.py"))
cpu_busy = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cpu_busy)

# Two cores: user nice system idle iowait irq softirq steal guest guest_nice, as /proc/stat's first line.
SAMPLES = [
    "1000 cpu  100 0 0 100 0 0 0 0 0 0",
    "1010 cpu  120 0 0 100 0 0 0 0 0 0",  # 10 s, both cores busy: 20 of 20 jiffies
    "1020 cpu  130 0 0 110 0 0 0 0 0 0",  # 10 s, one core busy: 10 of 20
    "1030 cpu  130 0 0 125 5 0 0 0 0 0",  # 10 s, idle (iowait counts as idle)
]


def test_busy_share_over_the_whole_log_and_a_window():
    points = cpu_busy.parse(SAMPLES + ["not a sample"])
    assert len(points) == 4
    assert cpu_busy.busy(points) == 50.0
    assert cpu_busy.busy(points, 1000, 1010) == 100.0
    assert cpu_busy.busy(points, 1010, 1030) == 25.0
    assert cpu_busy.busy(points, 1031, 1040) is None


def test_report_takes_the_stages_one_after_another():
    results = "setup                    ok         10 s\nsanity                   FAILED     20 s\nnoise\n"
    assert cpu_busy.stages(results) == [("setup", 10), ("sanity", 20)]
    text = cpu_busy.report(cpu_busy.parse(SAMPLES), cpu_busy.stages(results))
    assert text.splitlines() == [
        "whole run: 30 s, busy 50.0 % of all cores (4 samples)",
        "setup                        10 s  100.0 %",
        "sanity                       20 s   25.0 %",
    ]


def test_sample_runs_the_command_and_returns_its_status(tmp_path):
    log = tmp_path / "cpu.log"
    code = cpu_busy.main(["sample", str(log), "--every", "0.05", "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert code == 3
    points = cpu_busy.parse(log.read_text().splitlines())
    assert len(points) >= 2
