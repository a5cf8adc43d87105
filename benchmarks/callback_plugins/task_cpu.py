"""A benchmark's callback: the controller CPU each task takes over all its hosts (issue 29's fold, by measurement).

Not part of the collection: benchmarks.scale enables it with --profile (ANSIBLE_CALLBACK_PLUGINS names this directory).
The linear strategy starts a task only when the previous one ended on every host, and each task run on a host is a
worker process the strategy has reaped by then; so the controller CPU (ansible-playbook itself and its reaped
children: workers, ssh clients) between one task's start and the next one's is that task's, over all its hosts. Each
task's entry also counts its results by status per host, so a per-host figure can be read for any one host.

The entries go to the JSON file INSTINCT_TASK_CPU_FILE names, when the playbook run ends.
"""

import json
import os
import resource

DOCUMENTATION = r"""
name: task_cpu
type: aggregate
short_description: the controller CPU of each task over all its hosts
description:
  - Writes, at the end of the run, the controller CPU seconds between each task's start and the next one's, with the
    task's results per host, to the file INSTINCT_TASK_CPU_FILE names. A benchmark's tool, not the collection's.
requirements:
  - enabled with ANSIBLE_CALLBACKS_ENABLED and found through ANSIBLE_CALLBACK_PLUGINS
"""

from ansible.plugins.callback import CallbackBase  # noqa: E402


def controller_cpu():
    """CPU seconds of this process and its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.entries = []
        self.current = None
        self.play = ""

    def _close(self):
        if self.current is not None:
            self.current["cpu"] = round(controller_cpu() - self.current.pop("started"), 4)
            self.entries.append(self.current)
            self.current = None

    def v2_playbook_on_play_start(self, play):
        self._close()
        self.play = play.get_name()

    def _start(self, task):
        self._close()
        role = task._role.get_name(include_role_fqcn=False) if task._role else ""
        self.current = {
            "play": self.play,
            "role": role,
            "task": task.get_name(),
            "action": task.action,
            "hosts": {},
            "started": controller_cpu(),
        }

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def _result(self, result, status):
        if self.current is not None:
            host = result._host.get_name()
            counts = self.current["hosts"].setdefault(host, {})
            counts[status] = counts.get(status, 0) + 1

    def v2_runner_on_ok(self, result):
        self._result(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_skipped(self, result):
        self._result(result, "skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._result(result, "unreachable")

    def v2_runner_item_on_ok(self, result):
        self._result(result, "item")

    def v2_runner_item_on_skipped(self, result):
        self._result(result, "item")

    def v2_runner_item_on_failed(self, result):
        self._result(result, "item")

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("INSTINCT_TASK_CPU_FILE")
        if path:
            with open(path, "w") as handle:
                json.dump(self.entries, handle, indent=1)
