"""instinct-stack status: what every host runs now, read-only, from playbooks/status.yml's events."""

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any

from instinct_stack.collection import run_playbook
from instinct_stack.rollout import failure_message, run_stats

# What playbooks/status.yml hands over as data (ansible.builtin.set_stats into the run's stats): {host: {part: the
# registered result}}, for each of these parts.
STATUS_STATS = "instinct_status"
STATUS_PARTS = ("driver", "rocm", "gfx", "stack", "units", "services", "health", "models", "ray")
_STACK_FIELDS = ("key", "arch", "torch", "hip", "triton", "vllm")


def _content(result: dict[str, Any]) -> str | None:
    if result.get("content"):
        return base64.b64decode(result["content"]).decode("utf-8", "replace").strip()
    return None


def _properties(stdout: str | None) -> dict[str, str]:
    values = {}
    for line in (stdout or "").splitlines():
        key, separator, value = line.partition("=")
        if separator:
            values[key] = value
    return values


def served_models(stdout: str | None) -> dict[str, str]:
    """{instance: ORG/NAME@COMMIT} from `find SERVED -type l -printf '%f %l'`: each Hub-model instance's link names
    ROOT/ORG--NAME/COMMIT (the previous links, NAME.previous, are left out)."""
    served = {}
    for line in (stdout or "").splitlines():
        name, _space, target = line.partition(" ")
        parts = target.rstrip("/").split("/")
        if name.endswith(".previous") or len(parts) < 2 or "--" not in parts[-2]:
            continue
        served[name] = "%s@%s" % (parts[-2].replace("--", "/", 1), parts[-1])
    return served


def ray_view(description: str, nodes_result: dict[str, Any] | None) -> dict[str, Any]:
    """A Ray unit's part: its role and the group's nodes (from the unit's Description, "Ray ROLE of serving group
    NAME (NODE, NODE)"), and on the head Ray's nodes [{address, alive, gpus}] and the addresses Ray sees dead."""
    role = description.split(" ")[1] if description.startswith("Ray ") else "?"
    nodes = description.rpartition("(")[2].rstrip(")").split(", ") if "(" in description else []
    view: dict[str, Any] = {"role": role, "nodes": [node for node in nodes if node]}
    if nodes_result is not None:
        seen = nodes_result.get("nodes") or []
        view["cluster"] = [{key: node.get(key) for key in ("address", "alive", "gpus")} for node in seen]
        view["dead"] = sorted(str(node.get("address")) for node in seen if not node.get("alive"))
        if nodes_result.get("error") or nodes_result.get("failed"):
            view["error"] = nodes_result.get("error") or nodes_result.get("msg")
    return view


def _ray_text(view: dict[str, Any]) -> str:
    text = " %s of %s" % (view["role"], "+".join(view["nodes"]) or "?")
    if "error" in view:
        return text + " ray=UNREADABLE"
    if "cluster" in view:
        text += " ray=%s" % (
            "+".join(
                "%s(%s,%gGPU)" % (node["address"], "up" if node["alive"] else "DEAD", node.get("gpus") or 0)
                for node in view["cluster"]
            )
            or "none"
        )
    return text


def hosts_from_events(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per host: ok, driver, rocm, gfx_arch, stack, services [{name, state, health}], error."""
    results, unreachable, failed = dict(run_stats(events, STATUS_STATS)), {}, {}
    for event in events:
        kind, data = event.get("event", ""), event.get("event_data", {})
        if "host" not in data:
            continue
        if kind == "runner_on_unreachable":
            unreachable[data["host"]] = (data.get("res") or {}).get("msg", "unreachable")
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            failed[data["host"]] = "%s: %s" % (data.get("task"), failure_message(data.get("res") or {}, "failed"))
    rows = []
    for host in sorted(set(results) | set(unreachable) | set(failed)):
        if host in unreachable or host in failed:
            error = "unreachable: %s" % unreachable[host] if host in unreachable else failed[host]
            rows.append({"host": host, "ok": False, "error": error})
            continue
        got = results[host]
        driver = got.get("driver", {})
        record = _content(got.get("stack", {}))
        stack = None
        if record:
            try:
                stack = {key: value for key, value in json.loads(record).items() if key in _STACK_FIELDS}
            except ValueError:
                stack = {"error": "unreadable record"}
        health = {
            item.get("item", {}).get("item"): item
            for item in got.get("health", {}).get("results", [])
            if not item.get("skipped")
        }
        models = served_models(got.get("models", {}).get("stdout"))
        ray = {
            item.get("item", {}).get("item"): item
            for item in got.get("ray", {}).get("results", [])
            if not item.get("skipped")
        }
        services = []
        for item in got.get("services", {}).get("results", []):
            unit = item.get("item")
            props = _properties(item.get("stdout"))
            answer = health.get(unit)
            service = {
                "name": unit,
                "state": "%s/%s" % (props.get("ActiveState", "?"), props.get("SubState", "?")),
                "health": None if answer is None else answer.get("status") == 200,
                # The Hub model's revision it serves (vllm-NAME.service serves the link NAME), else none.
                "model": models.get(str(unit).removeprefix("vllm-").removesuffix(".service")),
            }
            if str(unit).endswith("-ray.service"):
                # A serving group's Ray head or worker (its Description names the group's nodes); on the head, Ray's
                # view of the cluster's nodes.
                service["ray"] = ray_view(props.get("Description", ""), ray.get(unit))
            services.append(service)
        units = got.get("units", {})
        systemd_error = None
        if units.get("rc"):
            systemd_error = "systemctl: %s" % ((units.get("stderr") or "").splitlines() or ["rc %s" % units["rc"]])[0]
        row = {
            "host": host,
            "systemd_error": systemd_error,
            "driver": {
                "reboot_pending": bool(driver.get("reboot_pending")),
                "load_failed": bool(driver.get("load_failed")),
                "reason": driver.get("reason", driver.get("msg", "")),
            },
            "rocm": _content(got.get("rocm", {})),
            "gfx_arch": got.get("gfx", {}).get("gfx_arch", []),
            "stack": stack,
            "services": services,
            "error": None,
        }
        row["ok"] = (
            not row["driver"]["load_failed"]
            and not systemd_error
            and all(
                service["state"].startswith("active/") and (service["health"] or "ray" in service)
                for service in services
            )
            and all(not service.get("ray", {}).get("dead") for service in services)
        )
        rows.append(row)
    return rows


def status(
    inventory: str | Iterable[str], limit: str | None = None, **run_options: Any
) -> tuple[list[dict[str, Any]], int, str, str]:
    events, rc, output, run_dir = run_playbook("playbooks/status.yml", inventory, limit=limit, **run_options)
    return hosts_from_events(events), rc, output, run_dir


def format_status(rows: Iterable[dict[str, Any]]) -> str:
    """host, driver, ROCm, gfx, stack, services (state and /health)."""
    header = ("HOST", "DRIVER", "ROCM", "GFX", "STACK", "SERVICES")
    lines = []
    for row in rows:
        if row.get("error"):
            lines.append((row["host"], "-", "-", "-", "-", row["error"]))
            continue
        driver = row["driver"]
        driver_text = "LOAD FAILED" if driver["load_failed"] else "reboot pending" if driver["reboot_pending"] else "ok"
        stack = row["stack"] or {}
        stack_text = (
            "%s (torch %s, vllm %s)"
            % (str(stack.get("key", "?"))[:12], stack.get("torch", "?"), stack.get("vllm", "?"))
            if stack
            else "none"
        )
        services = ", ".join(
            "%s %s%s%s"
            % (
                service["name"].removesuffix(".service"),
                service["state"],
                "" if service["health"] is None else " health=%s" % ("ok" if service["health"] else "FAILED"),
                " model=%s" % service["model"][: service["model"].index("@") + 13] if service.get("model") else "",
            )
            + (_ray_text(service["ray"]) if "ray" in service else "")
            for service in row["services"]
        )
        lines.append(
            (
                row["host"],
                driver_text,
                row["rocm"] or "none",
                ",".join(row["gfx_arch"]) or "-",
                stack_text,
                row["systemd_error"] or services or "none",
            )
        )
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines, strict=True)]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header] + lines
    )
