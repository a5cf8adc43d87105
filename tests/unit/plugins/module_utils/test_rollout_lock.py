"""The rollout lock's host side (acquire, compare-and-swap, release) and its controller-side decision."""

import calendar
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import rollout_lock

CONTROLLER = {"controller": "deploy1", "machine_id": "m1", "boot_id": "b1"}


def holder(pid, pid_start=1000, user="ops", playbook="site.yml", **fields):
    identity = dict(CONTROLLER, user=user, pid=pid, pid_start=pid_start, playbook=playbook)
    identity.update(fields)
    identity.setdefault("started", "2026-05-09T07:35:25Z")
    identity["run_id"] = rollout_lock.make_run_id(
        identity["controller"], identity["machine_id"], identity["boot_id"], pid, identity["pid_start"]
    )
    return identity


@pytest.fixture
def lock(tmp_path):
    return str(tmp_path / "state" / "rollout.lock")


def on_disk(path):
    with open(path) as handle:
        return json.load(handle)


def listing(path):
    return sorted(os.listdir(os.path.dirname(path)))


# Host side ---------------------------------------------------------------------------------------------------------


def test_acquire_writes_the_holder_atomically_and_leaves_no_staging_file(lock):
    mine = holder(4242)
    outcome = rollout_lock.acquire(lock, mine)
    assert outcome == {"acquired": True, "changed": True, "holder": mine, "previous": None, "released": False}
    assert on_disk(lock) == mine
    assert list(on_disk(lock)) == list(rollout_lock.HOLDER_FIELDS)
    assert listing(lock) == ["rollout.lock", "rollout.lock.flock"]
    assert os.stat(lock).st_mode & 0o777 == 0o644


def test_acquire_again_by_the_same_run_changes_nothing(lock):
    mine = holder(4242)
    rollout_lock.acquire(lock, mine)
    before = os.stat(lock)
    outcome = rollout_lock.acquire(lock, mine)
    assert outcome["acquired"] and not outcome["changed"] and outcome["holder"] == mine
    assert os.stat(lock).st_ino == before.st_ino


def test_another_run_is_not_given_the_lock_and_sees_the_holder(lock):
    theirs, mine = holder(4242), holder(5151)
    rollout_lock.acquire(lock, theirs)
    outcome = rollout_lock.acquire(lock, mine)
    assert not outcome["acquired"] and not outcome["changed"] and outcome["holder"] == theirs
    assert on_disk(lock) == theirs


def test_compare_and_swap_replaces_only_the_named_holder(lock):
    stale, mine = holder(4242), holder(5151)
    rollout_lock.acquire(lock, stale)
    outcome = rollout_lock.acquire(lock, mine, replace_run_id="not-the-holder")
    assert not outcome["acquired"] and not outcome["changed"] and on_disk(lock) == stale
    outcome = rollout_lock.acquire(lock, mine, replace_run_id=stale["run_id"])
    assert outcome["acquired"] and outcome["changed"] and outcome["previous"] == stale
    assert on_disk(lock) == mine
    assert listing(lock) == ["rollout.lock", "rollout.lock.flock"]


def test_a_racing_compare_and_swap_loses_to_the_first(lock):
    stale, first, second = holder(4242), holder(5151), holder(6161)
    rollout_lock.acquire(lock, stale)
    assert rollout_lock.acquire(lock, first, replace_run_id=stale["run_id"])["acquired"]
    outcome = rollout_lock.acquire(lock, second, replace_run_id=stale["run_id"])
    assert not outcome["acquired"] and outcome["holder"] == first and on_disk(lock) == first


# A contender: loads module_utils/rollout_lock.py by its path (it needs nothing but the standard library), waits for
# the start file, then tries once. A fresh interpreter each: forking this test process (it may hold threads and their
# locks from other tests) could deadlock.
CONTENDER = """
import importlib.util, json, os, sys, time
path, lock, pid, replace, start = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("rollout_lock", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
holder = json.loads(sys.argv[6])
while not os.path.exists(start):
    time.sleep(0.001)
print(json.dumps(module.acquire(lock, holder, replace_run_id=replace or None)["acquired"]))
"""


@pytest.mark.parametrize("stale", [False, True], ids=["free", "stale"])
def test_of_many_processes_racing_for_the_lock_exactly_one_wins(lock, tmp_path, stale):
    replace = ""
    if stale:
        replace = holder(1)["run_id"]
        rollout_lock.acquire(lock, holder(1))
    start = tmp_path / "start"
    contenders = {
        pid: subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONTENDER,
                rollout_lock.__file__,
                lock,
                str(pid),
                replace,
                str(start),
                json.dumps(holder(pid)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for pid in range(100, 112)
    }
    time.sleep(0.5)  # let them load and wait at the start line
    start.touch()
    results = {pid: json.loads(proc.communicate(timeout=60)[0]) for pid, proc in contenders.items()}
    winners = [pid for pid, acquired in results.items() if acquired]
    assert len(winners) == 1, results
    assert on_disk(lock)["pid"] == winners[0]
    assert listing(lock) == ["rollout.lock", "rollout.lock.flock"]


def test_a_lock_created_outside_the_flock_is_never_overwritten(lock, monkeypatch):
    theirs, mine = holder(4242), holder(5151)
    os.makedirs(os.path.dirname(lock))
    real_link = os.link

    def link_after_them(source, target):
        with open(target, "w") as handle:
            json.dump(theirs, handle)
        real_link(source, target)  # fails: the path exists

    monkeypatch.setattr(rollout_lock.os, "link", link_after_them)
    outcome = rollout_lock.acquire(lock, mine)
    assert not outcome["acquired"] and outcome["holder"] == theirs and on_disk(lock) == theirs
    assert listing(lock) == ["rollout.lock", "rollout.lock.flock"]


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"user": "ops"}', b"[1, 2]"])
def test_a_broken_lock_is_a_holder_replaced_only_by_its_own_hash(lock, content):
    os.makedirs(os.path.dirname(lock))
    with open(lock, "wb") as handle:
        handle.write(content)
    broken = rollout_lock.read(lock)
    assert broken["broken"] and broken["run_id"].startswith(rollout_lock.BROKEN_PREFIX) and lock in broken["reason"]
    mine = holder(5151)
    assert not rollout_lock.acquire(lock, mine)["acquired"]
    assert not rollout_lock.acquire(lock, mine, replace_run_id=rollout_lock.BROKEN_PREFIX + "0" * 16)["acquired"]
    outcome = rollout_lock.acquire(lock, mine, replace_run_id=broken["run_id"])
    assert outcome["acquired"] and outcome["previous"] == broken and on_disk(lock) == mine


def test_release_removes_only_this_runs_lock(lock):
    theirs, mine = holder(4242), holder(5151)
    rollout_lock.acquire(lock, theirs)
    outcome = rollout_lock.release(lock, mine["run_id"])
    assert outcome == {"acquired": False, "changed": False, "holder": theirs, "previous": None, "released": False}
    assert on_disk(lock) == theirs
    outcome = rollout_lock.release(lock, theirs["run_id"])
    assert outcome["released"] and outcome["changed"] and outcome["previous"] == theirs and outcome["holder"] is None
    assert not os.path.exists(lock)
    assert rollout_lock.release(lock, theirs["run_id"])["changed"] is False


def test_release_without_the_directory_creates_nothing(lock):
    assert rollout_lock.release(lock, "r1") == rollout_lock._outcome()
    assert not os.path.exists(os.path.dirname(lock))


def test_check_mode_writes_nothing_and_reports_what_would_happen(lock):
    theirs, mine = holder(4242), holder(5151)
    outcome = rollout_lock.acquire(lock, mine, check_mode=True)
    assert outcome["acquired"] and outcome["changed"]
    assert not os.path.exists(os.path.dirname(lock))
    rollout_lock.acquire(lock, theirs)
    assert rollout_lock.acquire(lock, mine, check_mode=True)["holder"] == theirs
    outcome = rollout_lock.acquire(lock, mine, replace_run_id=theirs["run_id"], check_mode=True)
    assert outcome["changed"] and outcome["previous"] == theirs and on_disk(lock) == theirs
    outcome = rollout_lock.release(lock, theirs["run_id"], check_mode=True)
    assert outcome["released"] and on_disk(lock) == theirs
    assert listing(lock) == ["rollout.lock", "rollout.lock.flock"]


def test_a_relative_path_or_a_holder_without_run_id_is_refused(lock):
    with pytest.raises(rollout_lock.RolloutLockError, match="not absolute"):
        rollout_lock.acquire("rollout.lock", holder(1))
    with pytest.raises(rollout_lock.RolloutLockError, match="no run_id"):
        rollout_lock.acquire(lock, {"pid": 1})


# Controller side ---------------------------------------------------------------------------------------------------


def fake_proc(tmp_path, pid, stat_start, btime=1_700_000_000, comm="ansible-playbook"):
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    # Field 22 of /proc/PID/stat is the start time; the command name may hold spaces and parentheses.
    fields = ["S", "1"] + ["0"] * 17 + [str(stat_start)] + ["0"] * 20
    (proc / str(pid) / "stat").write_text("%d (%s) %s\n" % (pid, comm, " ".join(fields)))
    (proc / "stat").write_text("cpu  1 2 3\nbtime %d\nprocesses 9\n" % btime)
    (proc / "sys" / "kernel" / "random").mkdir(parents=True)
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text("boot-1\n")
    (proc / "self").mkdir()
    return str(proc)


def test_process_start_reads_field_22_past_a_command_name_with_parentheses(tmp_path):
    proc = fake_proc(tmp_path, 77, 987654, comm="python3 (x) y)")
    assert rollout_lock.process_start(77, proc) == 987654
    assert rollout_lock.process_start(78, proc) is None


def test_process_start_of_real_processes():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(1.5)
        me = rollout_lock.controller_identity(child.pid, "deploy1", "ops", "site.yml")
        assert me["pid_start"] == rollout_lock.process_start(child.pid) >= rollout_lock.process_start(os.getpid())
        # The start time agrees with what ps reads (elapsed seconds). Three roundings down, each under a second: the
        # kernel's boot time (btime), the record's whole seconds and ps's; plus ps's own run on a loaded machine.
        ps = shutil.which("ps")
        asked = time.time()
        elapsed = int(subprocess.check_output([ps, "-o", "etimes=", "-p", str(child.pid)]))
        started = calendar.timegm(time.strptime(me["started"], "%Y-%m-%dT%H:%M:%SZ"))
        assert -1 <= asked - started - elapsed <= 3.5
    finally:
        child.kill()
        child.wait()
    assert rollout_lock.process_start(child.pid) is None


def test_controller_identity_dates_the_run_from_its_process(tmp_path):
    proc = fake_proc(tmp_path, 4242, 250 * 100)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "machine-id").write_text("m1\n")
    me = rollout_lock.controller_identity(4242, "deploy1", "ops", "site.yml", proc, str(etc), ticks_per_second=100)
    assert me == {
        "run_id": rollout_lock.make_run_id("deploy1", "m1", "boot-1", 4242, 25000),
        "controller": "deploy1",
        "machine_id": "m1",
        "boot_id": "boot-1",
        "user": "ops",
        "pid": 4242,
        "pid_start": 25000,
        "started": "2023-11-14T22:17:30Z",  # btime 1700000000 + 250 s
        "playbook": "site.yml",
    }
    assert me["run_id"] != rollout_lock.make_run_id("deploy1", "m1", "boot-1", 4242, 25001)


HOST = "gpu1"
ME = holder(5151, pid_start=9000)


def test_decide_no_holder_or_this_run():
    assert rollout_lock.decide(HOST, None, ME, None) == ("acquire", None)
    assert rollout_lock.decide(HOST, dict(ME), ME, 9000) == ("ours", None)


def test_decide_refuses_a_holder_on_another_controller_and_says_what_to_do():
    theirs = holder(4242, controller="deploy2", machine_id="m2", boot_id="b2")
    decision = rollout_lock.decide(HOST, theirs, ME, None)
    assert decision.action == "refuse"
    assert decision.message == (
        "gpu1 is being rolled out by ops@deploy2 (ansible-playbook pid 4242, playbook site.yml, since "
        "2026-05-09T07:35:25Z). Wait for it to finish. If that rollout is no longer running, rerun with "
        "-e instinct_rollout_lock_break=true."
    )


def test_decide_a_same_named_controller_with_another_machine_id_is_another_controller():
    theirs = holder(4242, machine_id="m2", boot_id="b2")
    assert rollout_lock.decide(HOST, theirs, ME, None).action == "refuse"


def test_decide_refuses_a_holder_still_running_on_this_controller():
    theirs = holder(4242, pid_start=1000)
    decision = rollout_lock.decide(HOST, theirs, ME, 1000)
    assert decision.action == "refuse"
    assert decision.message.startswith("gpu1 is being rolled out by ops@deploy1 (ansible-playbook pid 4242,")
    assert "still runs on this controller" in decision.message and "kill 4242" in decision.message


def test_decide_takes_over_a_dead_pid_on_this_controller():
    decision = rollout_lock.decide(HOST, holder(4242), ME, None)
    assert decision == ("takeover", "ansible-playbook pid 4242 no longer runs on deploy1")


def test_decide_takes_over_a_reused_pid():
    decision = rollout_lock.decide(HOST, holder(4242, pid_start=1000), ME, 1777)
    assert decision.action == "takeover"
    assert decision.message == (
        "pid 4242 on deploy1 is now another process (started at tick 1777, not 1000), so that rollout ended"
    )


def test_decide_takes_over_after_the_controller_rebooted():
    theirs = holder(4242, pid_start=1000, boot_id="b0")
    # Even with a process of the same pid and start tick in this boot.
    decision = rollout_lock.decide(HOST, theirs, ME, 1000)
    assert decision == ("takeover", "deploy1 has rebooted since, so ansible-playbook pid 4242 ended")


def test_decide_takes_over_a_broken_lock():
    broken = {"broken": True, "run_id": "broken:abc", "reason": "/x/rollout.lock: not JSON: ..."}
    decision = rollout_lock.decide(HOST, broken, ME, None)
    assert decision == ("takeover", "the lock file was unreadable (/x/rollout.lock: not JSON: ...)")


@pytest.mark.parametrize("running", [None, 1000])
def test_decide_break_takes_over_any_holder(running):
    for theirs in (holder(4242, controller="deploy2"), holder(4242, pid_start=1000)):
        decision = rollout_lock.decide(HOST, theirs, ME, running, break_lock=True)
        assert decision.action == "takeover" and "instinct_rollout_lock_break=true broke it" in decision.message


def test_takeover_warning_names_the_dead_pid():
    reason = rollout_lock.decide(HOST, holder(4242), ME, None).message
    assert rollout_lock.takeover_warning(HOST, holder(4242), reason) == (
        "gpu1: took over the rollout lock of ops@deploy1 (ansible-playbook pid 4242, playbook site.yml, since "
        "2026-05-09T07:35:25Z): ansible-playbook pid 4242 no longer runs on deploy1."
    )
    assert rollout_lock.takeover_warning(HOST, holder(4242), reason, check_mode=True).startswith(
        "gpu1: would take over (check mode) the rollout lock of ops@deploy1"
    )


def test_read_reports_an_unreadable_lock_as_an_error(lock):
    os.makedirs(lock)  # a directory where the file should be
    with pytest.raises(rollout_lock.RolloutLockError, match="cannot read the rollout lock"):
        rollout_lock.read(lock)
