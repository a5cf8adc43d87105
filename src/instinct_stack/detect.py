"""Run instinct.stack.gfx_arch on every host of an inventory through ansible-runner."""

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

import jmespath

from instinct_stack.collection import run_playbook

DETECT_ACTION = "instinct.stack.gfx_arch"
# One row per host from the runner's events: the gfx_arch result, or why the host has none.
_RESULT_EVENTS = jmespath.compile(
    "[?event_data.task_action == '%s' && contains(['runner_on_ok', 'runner_on_failed'], event)]" % DETECT_ACTION
)
_UNREACHABLE_EVENTS = jmespath.compile("[?event == 'runner_on_unreachable']")


class HostRow(TypedDict):
    """One host's detection: the gfx_arch result, or why the host has none (error)."""

    host: str
    ok: bool
    gpus: list[dict[str, Any]]
    gfx_arch: list[str]
    pytorch_rocm_arch: str
    source_used: str | None
    error: str | None


def detect(
    inventory: str | Iterable[str],
    limit: str | None = None,
    extravars: dict[str, Any] | None = None,
    **run_options: Any,
) -> tuple[list[HostRow], int, str, str]:
    """Run the detection; return (per-host dicts, ansible-playbook rc, its output, the run directory).

    Each dict holds host, ok, gpus, gfx_arch, pytorch_rocm_arch, source_used and error.
    """
    events, rc, output, run_dir = run_playbook(
        "playbooks/detect.yml", inventory, limit=limit, extravars=extravars, **run_options
    )
    return hosts_from_events(events), rc, output, run_dir


def hosts_from_events(events: Sequence[dict[str, Any]]) -> list[HostRow]:
    """Per-host results from ansible-runner events, sorted by host name."""
    rows: dict[str, HostRow] = {}
    for event in _RESULT_EVENTS.search(events) or []:
        data = event["event_data"]
        result = data.get("res", {})
        ok = event["event"] == "runner_on_ok"
        rows[data["host"]] = {
            "host": data["host"],
            "ok": ok,
            "gpus": result.get("gpus", []),
            "gfx_arch": result.get("gfx_arch", []),
            "pytorch_rocm_arch": result.get("pytorch_rocm_arch", ""),
            "source_used": result.get("source_used"),
            "error": None if ok else result.get("msg", "failed"),
        }
    for event in _UNREACHABLE_EVENTS.search(events) or []:
        data = event["event_data"]
        rows[data["host"]] = {
            "host": data["host"],
            "ok": False,
            "gpus": [],
            "gfx_arch": [],
            "pytorch_rocm_arch": "",
            "source_used": None,
            "error": "unreachable: %s" % data.get("res", {}).get("msg", ""),
        }
    return [rows[host] for host in sorted(rows)]


def format_table(rows: Iterable[HostRow]) -> str:
    """A plain-text table: host, GPUs, gfx, source (and the error for failed hosts)."""
    header = ("HOST", "GPUS", "GFX", "SOURCE")
    lines = []
    for row in rows:
        if row["ok"]:
            products = sorted({gpu.get("marketing_name") or gpu["gfx"] for gpu in row["gpus"]})
            gpus = "%d (%s)" % (len(row["gpus"]), ", ".join(products)) if row["gpus"] else "0"
            lines.append((row["host"], gpus, ",".join(row["gfx_arch"]) or "-", row["source_used"] or "-"))
        else:
            lines.append((row["host"], "-", "-", "FAILED: %s" % row["error"]))
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines, strict=True)]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header] + lines
    )
