"""instinct.stack.rollout_lock's action plugin: this run's identity, and what it does about another run's lock.

The module's run on the host is replaced by the module_utils functions it calls, on a lock file under tmp_path; the
holders are real processes of this machine (alive, ended, or a pid whose start time does not match).
"""

import json
import os
import platform
import subprocess
import sys
from unittest.mock import MagicMock

import pytest

from ansible_collections.instinct.stack.plugins.action import rollout_lock as action
from ansible_collections.instinct.stack.plugins.module_utils import rollout_lock

HOST = "gpu1"


def identity(pid, user="ops", playbook="site.yml", **fields):
    me = rollout_lock.controller_identity(pid, platform.node(), user, playbook)
    me.update(fields)
    if fields:
        me["run_id"] = rollout_lock.make_run_id(me["controller"], me["machine_id"], me["boot_id"], pid, me["pid_start"])
    return me


@pytest.fixture
def process():
    """A process of this machine and its holder identity; kill() ends it."""
    children = []

    def start():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        children.append(child)
        return child, identity(child.pid, user="other", playbook="rollback.yml")

    yield start
    for child in children:
        child.kill()
        child.wait()


class Harness:
    def __init__(self, path, me, check_mode=False, task_vars=None, args=None):
        self.path, self.me, self.check_mode = path, me, check_mode
        self.task_vars = dict({"inventory_hostname": HOST}, **(task_vars or {}))
        task = MagicMock(async_val=0, check_mode=check_mode, action="instinct.stack.rollout_lock")
        task.args = {"path": path} if args is None else args
        connection = MagicMock()
        connection._shell.tmpdir = None
        templar = MagicMock()
        templar.template.side_effect = lambda value: value
        self.plugin = action.ActionModule(task, connection, MagicMock(), None, templar, None)
        self.plugin.identity = lambda: me
        self.plugin.lock_module = self.lock_module
        self.plugin._remove_tmp_path = lambda *args, **kwargs: None
        self.calls = []

    def lock_module(self, task_vars, state, path, holder, replace_run_id=None):
        """The module on the host, as it would answer."""
        self.calls.append((state, replace_run_id))
        if state == "present":
            outcome = rollout_lock.acquire(path, holder, replace_run_id, check_mode=self.check_mode)
        else:
            outcome = rollout_lock.release(path, holder["run_id"], check_mode=self.check_mode)
        return dict(outcome, lock_file=path, run_id=holder["run_id"])

    def run(self):
        return self.plugin.run(task_vars=self.task_vars)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "rollout.lock")


def on_disk(path):
    with open(path) as handle:
        return json.load(handle)


def test_identity_is_the_ansible_playbook_process_the_worker_was_forked_from():
    plugin = action.ActionModule(MagicMock(), MagicMock(), MagicMock(), None, MagicMock(), None)
    me = plugin.identity()
    # This test process stands in for the worker: its parent is "ansible-playbook".
    assert me["pid"] == os.getppid()
    assert me["pid_start"] == rollout_lock.process_start(os.getppid())
    assert me["controller"] == platform.node()
    assert me["run_id"] == rollout_lock.make_run_id(
        me["controller"], me["machine_id"], me["boot_id"], me["pid"], me["pid_start"]
    )


def test_a_free_host_is_locked_without_a_change_to_report(path):
    me = identity(os.getpid())
    result = Harness(path, me).run()
    assert result["acquired"] and not result["changed"] and not result["refused"] and not result.get("warnings")
    assert result["run_id"] == me["run_id"] and on_disk(path) == me
    given = Harness(path, me, args={"path": path, "state": "absent"}).run()
    assert given["released"] and not given["changed"] and not given.get("warnings")
    assert not os.path.exists(path)


def test_a_holder_still_running_on_this_controller_refuses_the_run(path, process):
    child, theirs = process()
    rollout_lock.acquire(path, theirs)
    harness = Harness(path, identity(os.getpid()))
    result = harness.run()
    assert result["failed"] and result["refused"] and not result["changed"]
    who = "other@%s (ansible-playbook pid %d, playbook rollback.yml, since %s)" % (
        platform.node(), child.pid, theirs["started"])  # fmt: skip
    assert result["msg"] == (
        "gpu1 is being rolled out by %s, which still runs on this controller. Wait for it to finish. If it hangs, "
        "end it (kill %d) and rerun: the next run takes over the lock of a process that no longer runs."
        % (who, child.pid)
    )
    assert result["holder"] == theirs and on_disk(path) == theirs
    assert harness.calls == [("present", None)]


def test_a_dead_holder_on_this_controller_is_taken_over_with_a_warning(path, process):
    child, theirs = process()
    rollout_lock.acquire(path, theirs)
    child.kill()
    child.wait()
    me = identity(os.getpid())
    harness = Harness(path, me)
    result = harness.run()
    assert result["acquired"] and result["changed"] and not result.get("failed")
    who = "other@%s (ansible-playbook pid %d, playbook rollback.yml, since %s)" % (
        platform.node(), child.pid, theirs["started"])  # fmt: skip
    assert result["warnings"] == [
        "gpu1: took over the rollout lock of %s: ansible-playbook pid %d no longer runs on %s."
        % (who, child.pid, platform.node())
    ]
    assert result["previous"] == theirs and on_disk(path) == me
    assert harness.calls == [("present", None), ("present", theirs["run_id"])]


def test_a_reused_pid_is_not_taken_for_the_holder(path):
    # The holder's pid now runs this test, but it started at another time than the holder recorded.
    theirs = identity(os.getpid(), pid_start=rollout_lock.process_start(os.getpid()) - 1)
    rollout_lock.acquire(path, theirs)
    me = identity(os.getppid())
    result = Harness(path, me).run()
    assert result["changed"] and on_disk(path) == me
    assert "pid %d on %s is now another process" % (os.getpid(), platform.node()) in result["warnings"][0]


def test_a_holder_on_another_controller_is_refused_unless_broken(path):
    theirs = identity(os.getpid(), controller="deploy2", machine_id="m2")
    rollout_lock.acquire(path, theirs)
    me = identity(os.getppid())
    result = Harness(path, me).run()
    assert result["failed"] and result["refused"]
    assert result["msg"] == (
        "gpu1 is being rolled out by ops@deploy2 (ansible-playbook pid %d, playbook site.yml, since %s). Wait for it "
        "to finish. If that rollout is no longer running, rerun with -e instinct_rollout_lock_break=true."
        % (os.getpid(), theirs["started"])
    )
    assert on_disk(path) == theirs
    # -e instinct_rollout_lock_break=true arrives as a string.
    result = Harness(path, me, task_vars={"instinct_rollout_lock_break": "true"}).run()
    assert result["changed"] and on_disk(path) == me
    assert "instinct_rollout_lock_break=true broke it" in result["warnings"][0]


def test_a_break_value_that_is_not_a_boolean_fails_before_touching_the_lock(path):
    harness = Harness(path, identity(os.getpid()), task_vars={"instinct_rollout_lock_break": "maybe"})
    result = harness.run()
    assert result["failed"] and result["msg"].startswith("instinct_rollout_lock_break must be true or false")
    assert harness.calls == [] and not os.path.exists(path)


def test_check_mode_refuses_a_live_holder_and_writes_nothing(path, process):
    child, theirs = process()
    rollout_lock.acquire(path, theirs)
    result = Harness(path, identity(os.getpid()), check_mode=True).run()
    assert result["failed"] and result["refused"] and on_disk(path) == theirs
    child.kill()
    child.wait()
    result = Harness(path, identity(os.getpid()), check_mode=True).run()
    assert result["changed"] and result["warnings"][0].startswith("gpu1: would take over (check mode) the rollout lock")
    assert on_disk(path) == theirs
    # Giving back in check mode: nothing was taken, so another's lock is no news.
    given = Harness(path, identity(os.getpid()), check_mode=True, args={"path": path, "state": "absent"}).run()
    assert not given["released"] and not given.get("warnings") and on_disk(path) == theirs


def test_giving_back_leaves_another_runs_lock_and_says_so(path):
    theirs = identity(os.getpid(), controller="deploy2")
    rollout_lock.acquire(path, theirs)
    result = Harness(path, identity(os.getppid()), args={"path": path, "state": "absent"}).run()
    assert not result["released"] and not result["changed"] and on_disk(path) == theirs
    assert result["warnings"] == [
        "gpu1: left the rollout lock %s in place: it names ops@deploy2 (ansible-playbook pid %d, playbook site.yml, "
        "since %s), not this run" % (path, os.getpid(), theirs["started"])
    ]


def test_a_lock_that_keeps_changing_hands_gives_up(path):
    harness = Harness(path, identity(os.getpid()))
    stale = iter(range(900000, 900010))

    def always_another(task_vars, state, lock_path, holder, replace_run_id=None):
        harness.calls.append((state, replace_run_id))
        # A new dead holder every time: the swap never finds the one it was told to replace.
        return {"acquired": False, "changed": False, "holder": identity(next(stale), controller=platform.node())}

    harness.plugin.lock_module = always_another
    result = harness.run()
    assert result["failed"] and "changed hands 3 times" in result["msg"]
    assert len(harness.calls) == action.ATTEMPTS
