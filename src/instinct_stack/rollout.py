"""Drive site.yml through ansible-runner with a live per-host progress display and a JSON report."""

import base64
import json
import sys

import jmespath

from instinct_stack.collection import run_playbook

_STACK_RECORD_TASK = "Read the installed stack's verification record"
_GFX_ACTION = "instinct.stack.gfx_arch"
_DRIVER_ACTION = "instinct.stack.amdgpu_driver"


class Progress:
    """Per-host counters from ansible-runner events, shown live: one line per host on a terminal, else a log."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.live = hasattr(stream, "isatty") and stream.isatty()
        self.hosts = {}
        self.task = ""
        self.drawn = 0

    def host(self, name):
        return self.hosts.setdefault(
            name, {"ok": 0, "changed": 0, "failed": 0, "skipped": 0, "unreachable": 0, "task": ""}
        )

    def handle(self, event):
        kind, data = event.get("event", ""), event.get("event_data", {})
        if kind == "playbook_on_task_start":
            role = data.get("role")
            self.task = ("%s : %s" % (role, data.get("task")) if role else data.get("task", "")).strip()
            return True
        if not kind.startswith("runner_on_") or "host" not in data:
            return True
        state = self.host(data["host"])
        state["task"] = self.task
        result = data.get("res", {})
        if kind == "runner_on_ok":
            state["changed" if result.get("changed") else "ok"] += 1
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            state["failed"] += 1
        elif kind == "runner_on_skipped":
            state["skipped"] += 1
        elif kind == "runner_on_unreachable":
            state["unreachable"] += 1
        else:
            return True
        self.draw(data["host"])
        return True

    def line(self, name):
        state = self.hosts[name]
        return "%-24s ok=%-4d changed=%-4d failed=%-3d unreachable=%-2d %s" % (
            name,
            state["ok"],
            state["changed"],
            state["failed"],
            state["unreachable"],
            state["task"][:70],
        )

    def draw(self, updated):
        if not self.live:
            self.stream.write(self.line(updated) + "\n")
            return
        if self.drawn:
            self.stream.write("\x1b[%dA" % self.drawn)
        for name in sorted(self.hosts):
            self.stream.write("\x1b[2K" + self.line(name) + "\n")
        self.drawn = len(self.hosts)
        self.stream.flush()


_HOST_EVENTS = "[?event_data.host == '{host}' && starts_with(event, 'runner_on_')]"


def build_report(events, rc, check=False):
    """Per host: gfx arch, stack versions, pending reboot, changed tasks, failures; plus the run's totals."""
    hosts = sorted(
        {
            e["event_data"]["host"]
            for e in events
            if e.get("event", "").startswith("runner_on_") and "host" in e.get("event_data", {})
        }
    )
    report = {"rc": rc, "check_mode": check, "ok": True, "hosts": {}}
    for host in hosts:
        mine = jmespath.search(_HOST_EVENTS.format(host=host), events) or []
        entry = {
            "gfx_arch": None,
            "pytorch_rocm_arch": None,
            "stack": None,
            "reboot": None,
            "changed_tasks": [],
            "failures": [],
            "unreachable": False,
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
                if data.get("task") == _STACK_RECORD_TASK and result.get("content"):
                    entry["stack"] = json.loads(base64.b64decode(result["content"]))
                if result.get("changed"):
                    entry["changed_tasks"].append(label)
            elif kind == "runner_on_failed" and not data.get("ignore_errors"):
                entry["failures"].append({"task": label, "msg": result.get("msg", "")})
            elif kind == "runner_on_unreachable":
                entry["unreachable"] = True
                entry["failures"].append({"task": label, "msg": result.get("msg", "unreachable")})
        entry["changed"] = len(entry["changed_tasks"])
        report["hosts"][host] = entry
        report["ok"] = report["ok"] and not entry["failures"]
    report["ok"] = report["ok"] and rc == 0
    return report


def rollout(inventory, limit=None, check=False, extravars=None, root=None, progress=None):
    """Run site.yml; return (report, ansible-playbook output)."""
    events, rc, output = run_playbook(
        "site.yml",
        inventory,
        limit=limit,
        extravars=extravars,
        cmdline="--check" if check else None,
        event_handler=(progress or Progress()).handle,
        root=root,
    )
    return build_report(events, rc, check), output
