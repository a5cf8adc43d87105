# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of instinct.stack.rollout_lock: this run's identity, and what to do about another run's lock.

The action runs in one of ansible-playbook's worker processes. ansible-core (2.18 and 2.19 alike) starts each
WorkerProcess with the multiprocessing 'fork' context (ansible/utils/multiprocessing.py) from the strategy's
_queue_task, which runs in the main ansible-playbook process (the TaskQueueManager is not a process of its own, and
results are read by a thread of that process). So os.getppid() here is the ansible-playbook pid: the same for every
host and task of one run, and alive exactly as long as that run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import getpass
import os
import platform

from ansible import context
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.instinct.stack.plugins.module_utils.rollout_lock import (
    BREAK_VARIABLE,
    DEFAULT_PATH,
    controller_identity,
    decide,
    describe,
    process_start,
    same_controller,
    takeover_warning,
)

MODULE = "instinct.stack.rollout_lock"
# Rereads of a lock that changed hands between the read and the compare-and-swap, before giving up.
ATTEMPTS = 3


def playbook_name():
    """The playbook(s) ansible-playbook was given (base names), from the command line the worker inherited."""
    args = context.CLIARGS.get("args") if context.CLIARGS else None
    if isinstance(args, (list, tuple)) and args:
        return ", ".join(os.path.basename(str(arg)) for arg in args)
    return "none (ad hoc)"


def user_name():
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def running_start(holder, me, proc="/proc"):
    """The start time of the process under holder's pid on this controller now, None when none runs there.

    Read only for a holder of this controller. Where there is no /proc a running process counts as the holder.
    """
    if not same_controller(holder, me):
        return None
    try:
        pid = int(holder.get("pid"))
    except (TypeError, ValueError):
        return None
    if os.path.isdir(os.path.join(proc, "self")):
        return process_start(pid, proc)
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return None
    return holder.get("pid_start")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "state"))

    def identity(self):
        return controller_identity(os.getppid(), platform.node(), user_name(), playbook_name())

    def break_lock(self, task_vars):
        value = task_vars.get(BREAK_VARIABLE, False)
        if isinstance(value, str):
            value = self._templar.template(value)
        return boolean(value, strict=True)

    def lock_module(self, task_vars, state, path, holder, replace_run_id=None):
        args = {"path": path, "state": state, "holder": holder}
        if replace_run_id:
            args["replace_run_id"] = replace_run_id
        return self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no effect since ansible-core 2.6

        host = task_vars.get("inventory_hostname", "this host")
        path = self._task.args.get("path", DEFAULT_PATH)
        state = self._task.args.get("state", "present")
        try:
            break_lock = self.break_lock(task_vars)
        except TypeError as exc:
            result.update(failed=True, msg="%s must be true or false: %s" % (BREAK_VARIABLE, exc))
            return result
        me = self.identity()
        result.update(run_id=me["run_id"], refused=False)
        try:
            if state == "absent":
                return self.give_back(result, host, task_vars, path, me)
            return self.take(result, host, task_vars, path, me, break_lock)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def give_back(self, result, host, task_vars, path, me):
        outcome = self.lock_module(task_vars, "absent", path, me)
        result.update(outcome)
        if outcome.get("failed"):
            return result
        # This run's own lock: taking and giving it back leaves the host as it was.
        result["changed"] = False
        # In check mode this run took no lock, so another run's is no news here.
        if not outcome.get("released") and outcome.get("holder") and not self._task.check_mode:
            result.setdefault("warnings", []).append(
                "%s: left the rollout lock %s in place: it names %s, not this run"
                % (host, path, describe(outcome["holder"]))
            )
        return result

    def take(self, result, host, task_vars, path, me, break_lock):
        replace, stale, reason = None, None, None
        for _attempt in range(ATTEMPTS):
            outcome = self.lock_module(task_vars, "present", path, me, replace)
            if outcome.get("failed"):
                result.update(outcome)
                return result
            if outcome.get("acquired"):
                result.update(outcome, refused=False)
                # A lock of this run's own is no change to the host; taking over another's is.
                result["changed"] = replace is not None
                if replace is not None:
                    result.setdefault("warnings", []).append(
                        takeover_warning(host, stale, reason, check_mode=bool(self._task.check_mode))
                    )
                return result
            holder = outcome.get("holder")
            decision = decide(host, holder, me, running_start(holder, me) if holder else None, break_lock)
            if decision.action == "refuse":
                result.update(outcome, failed=True, refused=True, changed=False, msg=decision.message)
                return result
            # takeover: replace exactly that holder; acquire (it went away meanwhile): try again
            replace, stale, reason = (holder["run_id"], holder, decision.message) if holder else (None, None, None)
        result.update(
            failed=True,
            changed=False,
            msg="the rollout lock %s of %s changed hands %d times while this run tried to take it; rerun"
            % (path, host, ATTEMPTS),
        )
        return result
