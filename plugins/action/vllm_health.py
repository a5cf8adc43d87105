# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of instinct.stack.vllm_health: run the module every `progress` seconds and show each run.

Ansible prints a task's result only when the task ends. The action runs in a worker process, whose Display sends
its lines to ansible-playbook's main process through the results queue, so a line displayed here appears while the
task still runs. Each run of the module waits at most `progress` seconds; between runs the action displays the time
waited, the unit's state and its last journal line, and it stops at the first run that finds the service answering,
systemd giving up on it, or no time left.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.instinct.stack.plugins.module_utils.vllm_health import failure_message, progress_line

MODULE = "instinct.stack.vllm_health"
OPTIONS = ("unit", "host", "port", "path", "timeout", "progress", "delay", "restarts", "lines", "env_file")
DEFAULTS = {"timeout": 2700, "progress": 60, "delay": 5}
# A failed result keeps these of the module's keys (the journal is in its message).
KEPT = ("healthy", "status", "gave_up", "unit", "url", "since")

display = Display()


def as_int(args, name):
    value = args.get(name, DEFAULTS.get(name))
    if isinstance(value, bool):
        raise ValueError("%s must be an integer, got %r" % (name, value))
    try:
        return int(to_text(value).strip(), 10)
    except ValueError:
        raise ValueError("%s must be an integer, got %r" % (name, value)) from None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(OPTIONS)

    clock = staticmethod(time.monotonic)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no effect since ansible-core 2.6

        args = dict(self._task.args)
        try:
            timeout, progress, delay = (as_int(args, name) for name in ("timeout", "progress", "delay"))
        except ValueError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        if timeout < 0 or progress < 1 or delay < 1:
            result.update(failed=True, msg="timeout must be at least 0, progress and delay at least 1")
            return result
        unit = to_text(args.get("unit") or "")
        service = unit[: -len(".service")] if unit.endswith(".service") else unit
        host = task_vars.get("inventory_hostname", "?")

        start = self.clock()
        try:
            while True:
                left = max(0, int(timeout - (self.clock() - start)))
                module_args = dict(args, timeout=left, progress=progress, delay=delay)
                outcome = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
                elapsed = self.clock() - start
                if outcome.get("failed"):
                    result.update(outcome)
                    return result
                if outcome.get("healthy"):
                    result.update({key: outcome.get(key) for key in KEPT}, changed=False, waited=int(elapsed))
                    return result
                # The module polls again only when a poll fits before its timeout; so does this loop.
                if outcome.get("gave_up") or elapsed + delay > timeout:
                    result.update({key: outcome.get(key) for key in KEPT}, changed=False, waited=int(elapsed))
                    result.update(failed=True, msg=failure_message(service, timeout, elapsed, outcome))
                    return result
                display.display(progress_line(host, service, elapsed, timeout, outcome))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
