"""Live progress: PLAY RECAP counts, the build's own progress from a polled build, the rich table."""

import io

from rich.console import Console

from instinct_stack.progress import Progress, build_text


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def task(name, role="pytorch"):
    return {"event": "playbook_on_task_start", "event_data": {"task": name, "role": role}}


def result(kind, host, res=None, **extra):
    data = {"host": host, "res": res or {}}
    data.update(extra)
    return {"event": kind, "event_data": data}


def test_build_text():
    assert build_text(None) == ""
    assert build_text({"phase": "configure"}) == "configure"
    assert build_text({"done": 250, "total": 1000, "eta_seconds": 3725}) == "[250/1000] 25% ETA 1:02:05"
    assert build_text({"done": 1, "total": 3}) == "[1/3] 33%"


def test_a_polled_build_shows_ninjas_progress_and_the_task_elapsed():
    clock = Clock()
    stream = io.StringIO()
    progress = Progress(stream, live=False, clock=clock)
    progress.handle(task("Wait for the torch build"))
    clock.now += 90
    progress.handle(
        result("runner_retry", "gpu1", {"build_progress": {"done": 120, "total": 6000, "eta_seconds": 4410}})
    )
    clock.now += 30
    progress.handle(result("runner_retry", "gpu1", {"attempts": 3}))  # a retry without news keeps the last figure
    row = progress.row("gpu1")
    assert row["build"] == "[120/6000] 2% ETA 1:13:30"
    assert row["task"] == "pytorch : Wait for the torch build"
    assert row["task_elapsed"] == "2:00"
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and all("[120/6000] 2%" in line for line in lines)
    # The next task clears the build figure.
    progress.handle(task("Publish the wheel"))
    progress.handle(result("runner_on_ok", "gpu1", {"changed": True}))
    assert progress.row("gpu1")["build"] == "" and progress.row("gpu1")["changed"] == 1


def test_stats_take_the_play_recap_counts():
    progress = Progress(io.StringIO(), live=False)
    progress.handle(result("runner_on_ok", "gpu1", {"changed": False}))
    progress.stats(
        {
            "event": "playbook_on_stats",
            "event_data": {"ok": {"gpu1": 41}, "changed": {"gpu1": 3}, "dark": {"gpu2": 1}, "ignored": {"gpu1": 2}},
        }
    )
    assert progress.hosts["gpu1"].counts["ok"] == 41 and progress.hosts["gpu1"].counts["changed"] == 3
    assert progress.hosts["gpu1"].counts["ignored"] == 2 and progress.hosts["gpu2"].counts["unreachable"] == 1


def test_the_live_table_has_one_row_per_host():
    progress = Progress(io.StringIO(), live=False)
    progress.handle(task("Install the ROCm packages", role="rocm"))
    for host in ("gpu2", "gpu1"):
        progress.handle(result("runner_on_ok", host, {"changed": True}))
    progress.handle(result("runner_on_failed", "gpu2", {"msg": "boom"}))
    console = Console(file=io.StringIO(), width=200, record=True)
    console.print(progress.table())
    text = console.export_text()
    rows = [line for line in text.splitlines() if "gpu" in line]
    assert [row.split()[1] for row in rows] == ["gpu1", "gpu2"]
    assert "rocm : Install the ROCm packages" in rows[0]
    assert "1" in rows[1].split("│")[6]  # failed


def test_live_mode_draws_through_rich_live():
    stream = io.StringIO()
    progress = Progress(stream, live=True)
    progress.handle(task("Install the ROCm packages", role="rocm"))
    progress.handle(result("runner_on_ok", "gpu1", {"changed": True}))
    assert progress._live is not None
    progress.close()
    assert progress._live is None
