"""Live per-host progress from ansible-runner events: a rich table on a terminal, plain lines otherwise.

Counts follow PLAY RECAP: ok includes changed; a failure with ignore_errors counts as ignored, not failed.
A source build that reports its progress (the roles poll it with instinct.stack.build_status, whose retries carry
`build_progress`) shows Ninja's [done/total], the percent and an ETA from the rate so far.
"""

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

COUNTERS = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return "%d:%02d:%02d" % (hours, minutes, seconds) if hours else "%d:%02d" % (minutes, seconds)


def build_text(progress: dict[str, Any] | None) -> str | None:
    """'[done/total] pct% ETA m:ss' for a build_progress dict, or '' when the build has not counted yet."""
    if not progress:
        return ""
    done, total = progress.get("done"), progress.get("total")
    if not total:
        return progress.get("phase", "")
    # build_status reports done whenever it reports total.
    text = "[%d/%d] %d%%" % (done, total, 100 * done // total)  # type: ignore[operator, str-format]
    eta = progress.get("eta_seconds")
    if eta is not None:
        text += " ETA %s" % _duration(eta)
    return text


class HostState:
    def __init__(self, now: float) -> None:
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.role = ""
        self.task = ""
        self.started = now
        self.task_started = now
        self.build: dict[str, Any] | None = None
        self.finished: float | None = None


class Progress:
    """Feed it ansible-runner events (handle); it draws live and keeps per-host state for the summary."""

    def __init__(
        self, stream: TextIO | None = None, live: bool | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = (hasattr(self.stream, "isatty") and self.stream.isatty()) if live is None else live
        self.clock = clock
        self.hosts: dict[str, HostState] = {}
        self.role = ""
        self.task = ""
        self.started = clock()
        self.task_started = self.started
        self._live: Live | None = None
        self.console = Console(file=self.stream, highlight=False, soft_wrap=True)

    # ansible-runner calls this for every event; returning True keeps the event in runner.events.
    def handle(self, event: dict[str, Any]) -> bool:
        kind, data = event.get("event", ""), event.get("event_data", {})
        if kind == "playbook_on_task_start":
            self.role, self.task = data.get("role") or "", (data.get("task") or "").strip()
            self.task_started = self.clock()
            return True
        if not kind.startswith("runner_") or "host" not in data:
            return True
        host = self.host(data["host"])
        if host.task != self.task or host.role != self.role:
            host.role, host.task, host.task_started, host.build = self.role, self.task, self.task_started, None
        result = data.get("res") or {}
        if kind == "runner_retry":
            host.build = result.get("build_progress") or host.build
            self.draw(data["host"], retry=True)
            return True
        if kind == "runner_on_ok":
            host.counts["ok"] += 1
            host.counts["changed"] += 1 if result.get("changed") else 0
        elif kind == "runner_on_failed":
            host.counts["ignored" if data.get("ignore_errors") else "failed"] += 1
        elif kind == "runner_on_skipped":
            host.counts["skipped"] += 1
        elif kind == "runner_on_unreachable":
            host.counts["unreachable"] += 1
        else:
            return True
        self.draw(data["host"])
        return True

    def host(self, name: str) -> HostState:
        if name not in self.hosts:
            self.hosts[name] = HostState(self.clock())
        return self.hosts[name]

    def stats(self, event: dict[str, Any]) -> None:
        """Take the exact counts from ansible's playbook_on_stats event (PLAY RECAP), when the run has one."""
        data = event.get("event_data", {})
        names = {"ok": "ok", "changed": "changed", "dark": "unreachable", "failures": "failed"}
        names.update({"skipped": "skipped", "rescued": "rescued", "ignored": "ignored"})
        for key, counter in names.items():
            for host, count in (data.get(key) or {}).items():
                self.host(host).counts[counter] = count

    def row(self, name: str) -> dict[str, Any]:
        host = self.hosts[name]
        now = self.clock()
        task = ("%s : %s" % (host.role, host.task) if host.role else host.task) or "-"
        return {
            "host": name,
            "task": task,
            "elapsed": _duration(now - host.started),
            "task_elapsed": _duration(now - host.task_started),
            "build": build_text(host.build),
            **host.counts,
        }

    def line(self, name: str) -> str:
        row = self.row(name)
        counts = " ".join("%s=%d" % (key, row[key]) for key in ("ok", "changed", "failed", "unreachable"))
        build = ("  " + row["build"]) if row["build"] else ""
        return "%-24s %s  %s  %s (%s)%s" % (
            row["host"],
            row["elapsed"],
            counts,
            row["task"][:80],
            row["task_elapsed"],
            build,
        )

    def table(self, title: str | None = None) -> Table:
        table = Table(title=title, title_justify="left", expand=False)
        for column in ("host", "role : task", "elapsed", "ok", "changed", "failed", "unreach.", "build"):
            table.add_column(column, no_wrap=column != "role : task")
        for name in sorted(self.hosts):
            row = self.row(name)
            failed = row["failed"] or row["unreachable"]
            table.add_row(
                row["host"],
                row["task"][:70] + (" (%s)" % row["task_elapsed"]),
                row["elapsed"],
                str(row["ok"]),
                str(row["changed"]),
                "[red]%d[/red]" % row["failed"] if failed else "0",
                "[red]%d[/red]" % row["unreachable"] if row["unreachable"] else "0",
                row["build"],
            )
        return table

    def draw(self, name: str, retry: bool = False) -> None:
        if not self.live:
            # Plain lines: one per host result; a build's retry only when it reports progress.
            if not retry or self.hosts[name].build:
                self.console.print(self.line(name), markup=False)
            return
        if self._live is None:
            self._live = Live(self.table(), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        self._live.update(self.table())

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
