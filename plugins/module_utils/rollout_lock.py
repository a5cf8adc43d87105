# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout lock: one file on each host naming the rollout that holds it, so a second rollout is refused.

The file (default /var/lib/instinct-stack/rollout.lock, persistent: the rocm role may reboot a host mid-rollout)
holds the holder's identity as JSON: the controller (node name, machine id, boot id), the user, the pid of the main
ansible-playbook process and its start time (field 22 of /proc/PID/stat, so a pid reused by another process is not
taken for the holder), when it started, the playbook, and a run_id derived from them.

Host side: acquire() creates the file atomically (a complete temporary file hard-linked to the lock path, which
fails when the path exists), replaces another holder only by compare-and-swap ("only if the lock still names
run_id X"), and release() removes the file only when it names this run. Both work under an flock on a side file
(PATH.flock): the lock file itself is replaced by rename, so it cannot carry the flock.

Controller side: controller_identity() builds this run's holder, process_start() reads a pid's start time, and
decide() is the pure decision on a lock held by another run: refuse, or take it over (and say why).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections import namedtuple

DEFAULT_PATH = "/var/lib/instinct-stack/rollout.lock"
BREAK_VARIABLE = "instinct_rollout_lock_break"
# The fields a holder names, in the order a lock file lists them.
HOLDER_FIELDS = ("run_id", "controller", "machine_id", "boot_id", "user", "pid", "pid_start", "started", "playbook")
BROKEN_PREFIX = "broken:"

# action: "acquire" (no lock), "ours" (this run's), "refuse" (message: what the user sees and what to do), or
# "takeover" (message: why the holder is gone, or that the user broke the lock).
Decision = namedtuple("Decision", ["action", "message"])


class RolloutLockError(Exception):
    pass


# Controller side ---------------------------------------------------------------------------------------------------


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return ""


def process_start(pid, proc="/proc"):
    """The start time (clock ticks after boot, field 22 of /proc/PID/stat) of process pid, or None when none runs."""
    text = _read_text(os.path.join(proc, str(int(pid)), "stat"))
    if not text:
        return None
    # Field 2, the command name in parentheses, may itself hold spaces and parentheses: count after the last ')'.
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return int(fields[22 - 3])
    except (IndexError, ValueError):
        return None


def boot_time(proc="/proc"):
    """The boot time (seconds since the epoch) from /proc/stat's btime, or None."""
    for line in _read_text(os.path.join(proc, "stat")).splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    return None


def make_run_id(controller, machine_id, boot_id, pid, pid_start):
    """A short stable id of one ansible-playbook process: the same for every host and task of that run."""
    text = "%s|%s|%s|%s|%s" % (controller, machine_id, boot_id, pid, pid_start)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def iso_time(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def controller_identity(pid, controller, user, playbook, proc="/proc", etc="/etc", now=None, ticks_per_second=None):
    """The holder dict of the ansible-playbook process pid, as this controller sees it.

    started is that process's own start time (the same on every host and every task of the run); where /proc has
    no such process (a controller without /proc) pid_start is None and started is now.
    """
    pid_start = process_start(pid, proc)
    booted = boot_time(proc)
    if ticks_per_second is None:
        ticks_per_second = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    if pid_start is not None and booted is not None:
        started = booted + pid_start // ticks_per_second
    else:
        started = time.time() if now is None else now
    machine_id = _read_text(os.path.join(etc, "machine-id"))
    boot_id = _read_text(os.path.join(proc, "sys", "kernel", "random", "boot_id"))
    return {
        "run_id": make_run_id(controller, machine_id, boot_id, pid, pid_start),
        "controller": controller,
        "machine_id": machine_id,
        "boot_id": boot_id,
        "user": user,
        "pid": int(pid),
        "pid_start": pid_start,
        "started": iso_time(started),
        "playbook": playbook,
    }


def describe(holder):
    """'user@controller (ansible-playbook pid N, playbook P, since T)' for the messages."""
    return "%s@%s (ansible-playbook pid %s, playbook %s, since %s)" % (
        holder.get("user") or "?",
        holder.get("controller") or "?",
        holder.get("pid", "?"),
        holder.get("playbook") or "?",
        holder.get("started") or "?",
    )


def same_controller(holder, me):
    """The holder ran on this controller: the same node name, and the same machine id where both know one."""
    if holder.get("controller") != me.get("controller"):
        return False
    theirs, ours = holder.get("machine_id"), me.get("machine_id")
    return not (theirs and ours and theirs != ours)


def decide(host, holder, me, running_start, break_lock=False):
    """What to do about the lock of host, held by holder (a dict, or None), for the run me.

    running_start is the start time of the process that runs under holder's pid on this controller now (None when
    none does); it is read only for a holder on this controller. Pure: it reads nothing itself.
    """
    if holder is None:
        return Decision("acquire", None)
    if holder.get("broken"):
        return Decision("takeover", "the lock file was unreadable (%s)" % holder.get("reason", "not JSON"))
    if holder.get("run_id") == me["run_id"]:
        return Decision("ours", None)
    who = describe(holder)
    if break_lock:
        return Decision(
            "takeover",
            "%s=true broke it; if that rollout is still running, the two now run at the same time" % BREAK_VARIABLE,
        )
    if not same_controller(holder, me):
        return Decision(
            "refuse",
            "%s is being rolled out by %s. Wait for it to finish. If that rollout is no longer running, rerun with "
            "-e %s=true." % (host, who, BREAK_VARIABLE),
        )
    pid = holder.get("pid")
    if holder.get("boot_id") and me.get("boot_id") and holder["boot_id"] != me["boot_id"]:
        return Decision("takeover", "%s has rebooted since, so ansible-playbook pid %s ended" % (me["controller"], pid))
    if running_start is None:
        return Decision("takeover", "ansible-playbook pid %s no longer runs on %s" % (pid, me["controller"]))
    if holder.get("pid_start") is not None and running_start != holder["pid_start"]:
        return Decision(
            "takeover",
            "pid %s on %s is now another process (started at tick %s, not %s), so that rollout ended"
            % (pid, me["controller"], running_start, holder["pid_start"]),
        )
    return Decision(
        "refuse",
        "%s is being rolled out by %s, which still runs on this controller. Wait for it to finish. If it hangs, end "
        "it (kill %s) and rerun: the next run takes over the lock of a process that no longer runs." % (host, who, pid),
    )


def takeover_warning(host, holder, reason, check_mode=False):
    verb = "would take over (check mode)" if check_mode else "took over"
    if holder.get("broken"):
        return "%s: %s the rollout lock: %s." % (host, verb, reason)
    return "%s: %s the rollout lock of %s: %s." % (host, verb, describe(holder), reason)


# Host side ---------------------------------------------------------------------------------------------------------


def read(path):
    """The holder the lock file at path names, None without one; an unreadable file is a 'broken' holder whose
    run_id is its content's hash (so a compare-and-swap replaces exactly that content)."""
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise RolloutLockError("cannot read the rollout lock %s: %s" % (path, exc)) from None
    try:
        holder = json.loads(content.decode("utf-8"))
    except ValueError as exc:
        holder, reason = None, "not JSON: %s" % exc
    else:
        reason = "no run_id in it"
    if not isinstance(holder, dict) or not holder.get("run_id"):
        return {
            "broken": True,
            "run_id": BROKEN_PREFIX + hashlib.sha256(content).hexdigest()[:16],
            "reason": "%s: %s" % (path, reason),
        }
    return holder


def _guard(path):
    """An exclusive flock on PATH.flock, held until the returned descriptor is closed."""
    descriptor = os.open(path + ".flock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
    except Exception:
        os.close(descriptor)
        raise
    return descriptor


def _staged(path, holder):
    """A complete temporary file beside path holding holder, synced to disk."""
    directory = os.path.dirname(path)
    descriptor, staging = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(dict((field, holder.get(field)) for field in HOLDER_FIELDS), handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(staging, 0o644)  # noqa: S103 - who holds the lock is no secret
    except Exception:
        os.unlink(staging)
        raise
    return staging


def _sync_directory(directory):
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _outcome(acquired=False, changed=False, holder=None, previous=None, released=False):
    return {"acquired": acquired, "changed": changed, "holder": holder, "previous": previous, "released": released}


def acquire(path, holder, replace_run_id=None, check_mode=False):
    """Make the lock at path name holder; return acquired, changed, holder (what the lock names after) and previous.

    No lock: create it (hard link of a complete file: never a partial one, never over another's). The lock already
    names holder's run: nothing to do. It names replace_run_id: replace it (rename), under the flock, so a holder
    that changed since the caller read it is never overwritten. Any other holder: not acquired, holder is theirs.
    Check mode reads only and reports what would be done.
    """
    if not holder.get("run_id"):
        raise RolloutLockError("the holder has no run_id")
    if not os.path.isabs(path):
        raise RolloutLockError("the rollout lock path %s is not absolute" % path)
    directory = os.path.dirname(path)
    if check_mode:
        return _decide_acquire(read(path), holder, replace_run_id)
    try:
        os.makedirs(directory, 0o755)
    except OSError as exc:  # another run may have made it meanwhile
        if exc.errno != errno.EEXIST:
            raise
    guard = _guard(path)
    try:
        current = read(path)
        outcome = _decide_acquire(current, holder, replace_run_id)
        if not outcome["changed"]:
            return outcome
        staging = _staged(path, holder)
        try:
            if current is None:
                try:
                    os.link(staging, path)
                except OSError as exc:
                    if exc.errno != errno.EEXIST:
                        raise
                    # Created by a writer outside the flock: theirs, then.
                    return _outcome(holder=read(path))
            else:
                os.rename(staging, path)
        finally:
            if os.path.lexists(staging):
                os.unlink(staging)
        _sync_directory(directory)
        return outcome
    finally:
        os.close(guard)


def _decide_acquire(current, holder, replace_run_id):
    if current is None:
        return _outcome(acquired=True, changed=True, holder=holder)
    if current.get("run_id") == holder["run_id"]:
        return _outcome(acquired=True, holder=current)
    if replace_run_id and current.get("run_id") == replace_run_id:
        return _outcome(acquired=True, changed=True, holder=holder, previous=current)
    return _outcome(holder=current)


def release(path, run_id, check_mode=False):
    """Remove the lock at path if it names run_id; otherwise leave it and return its holder."""
    if not os.path.isabs(path):
        raise RolloutLockError("the rollout lock path %s is not absolute" % path)
    if check_mode or not os.path.isdir(os.path.dirname(path)):
        current = read(path)
        mine = current is not None and current.get("run_id") == run_id
        if mine:
            return _outcome(changed=True, released=True, previous=current)
        return _outcome(holder=current)
    guard = _guard(path)
    try:
        current = read(path)
        if current is None:
            return _outcome()
        if current.get("run_id") != run_id:
            return _outcome(holder=current)
        os.unlink(path)
        _sync_directory(os.path.dirname(path))
        return _outcome(changed=True, released=True, previous=current)
    finally:
        os.close(guard)
