"""Drive site.yml through ansible-runner with a live per-host progress display and a JSON report."""

from collections.abc import Iterable, Sequence
from typing import Any, NotRequired, TextIO, TypedDict

import jmespath

from instinct_stack.collection import run_playbook
from instinct_stack.progress import Progress

# What the playbooks hand the report as data (ansible.builtin.set_stats into the run's stats, keyed by host): the vllm
# role and rollback.yml, {host: {"stack": the stack's verification record}}.
REPORT_STATS = "instinct_report"
_GFX_ACTION = "instinct.stack.gfx_arch"
_DRIVER_ACTION = "instinct.stack.amdgpu_driver"
# site.yml's converged fast path: a host it leaves alone runs no role, so its check carries what the report shows.
_CONVERGED_ACTION = "instinct.stack.converged"


_HOST_EVENTS = "[?event_data.host == '{host}' && starts_with(event, 'runner_on_')]"


class Failure(TypedDict):
    task: str
    msg: str


class ReportEntry(TypedDict):
    """One host of the report."""

    gfx_arch: list[str] | None
    pytorch_rocm_arch: str | None
    stack: dict[str, Any] | None  # the stack's verification record
    reboot: dict[str, Any] | None  # pending, load_failed, reason
    changed_tasks: list[str]
    failures: list[Failure]
    unreachable: bool
    converged: bool
    models: NotRequired[dict[str, str]]  # instance -> ORG/NAME@COMMIT of the Hub model it serves
    changed: NotRequired[int]


class Report(TypedDict):
    rc: int
    check_mode: bool
    ok: bool
    hosts: dict[str, ReportEntry]
    run_dir: NotRequired[str]
    playbook: NotRequired[str]


def failure_message(result: dict[str, Any], default: str = "") -> str:
    """A failed task's message. For a loop, its failed items' own messages (the build farm's build waits, for one):
    Ansible's message for the whole task only says that items failed."""
    items = [item for item in result.get("results") or [] if isinstance(item, dict) and item.get("failed")]
    if items:
        return "; ".join(str(item.get("msg", default)) for item in items)
    return result.get("msg", default)


def run_stats(events: Sequence[dict[str, Any]], name: str) -> dict[str, Any]:
    """The value the playbooks handed over as name with ansible.builtin.set_stats (not per host: ansible-runner's
    playbook_on_stats event carries the run's own stats), or {} when the run ended before any did."""
    for event in reversed(events):
        if event.get("event") == "playbook_on_stats":
            return ((event.get("event_data") or {}).get("artifact_data") or {}).get(name) or {}
    return {}


def build_report(events: Sequence[dict[str, Any]], rc: int, check: bool = False) -> Report:
    """Per host: gfx arch, stack versions, pending reboot, changed tasks, failures; plus the run's totals.

    A host the converged fast path left alone (site.yml) ran no role: its gfx arch and pending reboot come from the
    record of the last whole rollout, and its stack from the current stack's record, as the check returned them.
    """
    hosts = sorted(
        {
            e["event_data"]["host"]
            for e in events
            if e.get("event", "").startswith("runner_on_") and "host" in e.get("event_data", {})
        }
    )
    report: Report = {"rc": rc, "check_mode": check, "ok": True, "hosts": {}}
    handed = run_stats(events, REPORT_STATS)
    for host in hosts:
        mine = jmespath.search(_HOST_EVENTS.format(host=host), events) or []
        entry: ReportEntry = {
            "gfx_arch": None,
            "pytorch_rocm_arch": None,
            "stack": None,
            "reboot": None,
            "changed_tasks": [],
            "failures": [],
            "unreachable": False,
            "converged": False,
        }
        for event in mine:
            data, kind = event["event_data"], event["event"]
            result = data.get("res", {})
            label = "%s : %s" % (data.get("role"), data.get("task")) if data.get("role") else data.get("task")
            if kind == "runner_on_ok":
                if data.get("task_action") == _GFX_ACTION:
                    entry["gfx_arch"], entry["pytorch_rocm_arch"] = (
                        result.get("gfx_arch"),
                        result.get("pytorch_rocm_arch"),
                    )
                if data.get("task_action") == _DRIVER_ACTION and "reboot_pending" in result:
                    # The last check wins: after a reboot, the one that confirms the module loaded.
                    entry["reboot"] = {
                        "pending": result["reboot_pending"],
                        "load_failed": result.get("load_failed", False),
                        "reason": result.get("reason", ""),
                    }
                if data.get("task_action") == _CONVERGED_ACTION and result.get("converged") and "summary" in result:
                    summary = result["summary"] or {}
                    entry.update(
                        {
                            "converged": True,
                            "gfx_arch": summary.get("gfx_arch"),
                            "pytorch_rocm_arch": summary.get("pytorch_rocm_arch"),
                            "reboot": summary.get("reboot"),
                            "stack": result.get("stack"),
                        }
                    )
                if result.get("changed"):
                    entry["changed_tasks"].append(label)
            elif kind == "runner_on_failed" and not data.get("ignore_errors"):
                entry["failures"].append({"task": label, "msg": failure_message(result)})
            elif kind == "runner_on_unreachable":
                entry["unreachable"] = True
                entry["failures"].append({"task": label, "msg": result.get("msg", "unreachable")})
        if (handed.get(host) or {}).get("stack"):
            entry["stack"] = handed[host]["stack"]
        # The Hub model revision each instance serves after its switch ({instance: ORG/NAME@COMMIT}, vllm_service).
        entry["models"] = (handed.get(host) or {}).get("models") or {}
        entry["changed"] = len(entry["changed_tasks"])
        report["hosts"][host] = entry
        report["ok"] = report["ok"] and not entry["failures"]
    report["ok"] = report["ok"] and rc == 0
    return report


def exit_code(report: Report) -> int:
    """0 every host fine; 1 a host failed or was unreachable; 2 nothing ran (bad input: ansible-playbook stopped
    before any host, or the inventory and --limit matched no host)."""
    if not report["hosts"]:
        return 2
    return 0 if report["ok"] else 1


def rollout(
    inventory: str | Iterable[str],
    limit: str | None = None,
    check: bool = False,
    extravars: dict[str, Any] | None = None,
    cmdline_args: Iterable[str] | None = None,
    progress: Progress | None = None,
    playbook: str = "playbooks/site.yml",
    **run_options: Any,
) -> tuple[Report, str, str]:
    """Run site.yml (or the rollback playbook); return (report, ansible-playbook output, run directory)."""
    progress = progress or Progress()

    def handle(event: dict[str, Any]) -> bool:
        if event.get("event") == "playbook_on_stats":
            progress.stats(event)
        return progress.handle(event)

    try:
        events, rc, output, run_dir = run_playbook(
            playbook,
            inventory,
            limit=limit,
            extravars=extravars,
            cmdline_args=(["--check"] if check else []) + list(cmdline_args or []),
            event_handler=handle,
            **run_options,
        )
    finally:
        progress.close()
    report = build_report(events, rc, check)
    report["run_dir"] = run_dir
    report["playbook"] = playbook
    return report, output, run_dir


def summary_table(report: Report, stream: TextIO) -> None:
    """The end-of-run table: one row per host with its state, changes, gfx arch, stack and what needs a hand."""
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="instinct-stack %s%s"
        % (
            "rollback" if report.get("playbook", "").endswith("rollback.yml") else "rollout",
            " (check mode)" if report["check_mode"] else "",
        ),
        title_justify="left",
    )
    for column in ("host", "state", "changed", "gfx", "stack (torch / vllm)", "notes"):
        table.add_column(column)
    for host, entry in sorted(report["hosts"].items()):
        state = "UNREACHABLE" if entry["unreachable"] else "FAILED" if entry["failures"] else "ok"
        stack = entry["stack"] or {}
        notes = ["%s: %s" % (failure["task"], failure["msg"]) for failure in entry["failures"]]
        if entry.get("converged"):
            notes.append("converged: nothing to do")
        notes += ["%s serves %s" % (name, model) for name, model in sorted((entry.get("models") or {}).items())]
        if (entry.get("reboot") or {}).get("pending"):
            # A reboot that says pending is a dict.
            notes.append("reboot pending: %s" % entry["reboot"]["reason"])  # type: ignore[index]
        table.add_row(
            host,
            state,
            str(entry["changed"]),
            ",".join(entry["gfx_arch"] or []) or "-",
            "%s / %s" % (stack.get("torch", "-"), stack.get("vllm", "-")) if stack else "-",
            "\n".join(notes),
        )
    Console(file=stream, highlight=False, soft_wrap=False, width=160 if not stream.isatty() else None).print(table)
