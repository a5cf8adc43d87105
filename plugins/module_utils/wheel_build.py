# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build wheels from a source checkout in a staging copy and publish them to a keyed cache atomically.

A build either publishes every wheel of the key (cache_dir/KEY/ appears whole, by one rename, after its files are
on disk) or publishes nothing and leaves the staging directory and its build.log for inspection.

One build at a time per staging directory (a lock file in it): MAX_JOBS is sized for the build host's memory, so two
builds at once could run it out. A build whose ansible-playbook was killed keeps running as an orphaned async job; a
rerun waits for it instead of deleting its tree, and takes its wheels when it built the same key.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import time

from ansible_collections.instinct.stack.plugins.module_utils.build_farm import ccache_stats
from ansible_collections.instinct.stack.plugins.module_utils.build_progress import step_header

BUILD_INFO = "build-info.json"
BUILD_LOCK = ".build.lock"
# Below this much free space in the staging or cache directory a failed step is reported as a full disk.
LOW_SPACE_BYTES = 64 * 1024 * 1024


class BuildError(Exception):
    """A build step failed; carries the step, the log path and the log's tail."""

    def __init__(self, name, step, detail, log_path, tail):
        self.step, self.log_path, self.tail = step, log_path, tail
        super(BuildError, self).__init__(
            "%s build failed at step '%s' (%s); the previous stack stays in service. Log: %s. Last lines:\n%s"
            % (name, step, detail, log_path, tail)
        )


def cache_entry(cache_dir, key):
    return os.path.join(cache_dir, key)


def cached_build(cache_dir, key):
    """The build-info of a published key, or None."""
    path = os.path.join(cache_entry(cache_dir, key), BUILD_INFO)
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        info = json.load(handle)
    info["wheels"] = [os.path.join(cache_entry(cache_dir, key), wheel) for wheel in info["wheel_files"]]
    return info


def _free_bytes(path):
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    try:
        stat = os.statvfs(path or "/")
    except (IOError, OSError):
        return None
    return stat.f_bavail * stat.f_frsize


def _full_disk_hint(path, tail):
    """A sentence naming a full staging or cache filesystem, or "" when there is room and no ENOSPC in the log."""
    free = _free_bytes(path)
    if "No space left on device" not in tail and (free is None or free >= LOW_SPACE_BYTES):
        return ""
    return (
        " The filesystem of %s is full (%s MiB free): free space there or point build_staging_dir (every source "
        "build stages there) or build_wheel_cache at a larger filesystem, then rerun."
        % (path, "?" if free is None else free // (1024 * 1024))
    )


def describe_exit(rc):
    """What a step's return code means to the user; a signal says which, SIGKILL with the usual cause."""
    if rc >= 0:
        return "exit code %d" % rc
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = "signal %d" % -rc
    detail = "killed by %s" % name
    if -rc == signal.SIGKILL:
        detail += (
            "; the kernel's out-of-memory killer sends SIGKILL: if the build host ran out of memory, lower "
            "build_max_jobs or raise build_mem_per_job_mb"
        )
    return detail


def _fsync(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tail(path, lines):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except (IOError, OSError):
        return ""


def build(
    name,
    src,
    key,
    cache_dir,
    staging_dir,
    steps,
    environment=None,
    dist_dir="dist",
    log_tail_lines=40,
    metadata=None,
    ccache=False,
):
    """Run steps (each {"name", "argv"}) in a staging copy of src; publish its wheels as cache_dir/key.

    Returns the build-info dict (with "wheels" as absolute paths). Raises BuildError on a failed step.
    With ccache, the build-info records the build's ccache hits and misses (see _ccache).
    """
    published = cached_build(cache_dir, key)
    if published:
        return published
    if not os.path.isdir(staging_dir):
        os.makedirs(staging_dir)
    # The lock is released when this process exits, killed or not.
    with open(os.path.join(staging_dir, BUILD_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another run may have built this key while this one waited for the lock.
        published = cached_build(cache_dir, key)
        if published:
            published["reused"] = True
            return published
        return _build_locked(
            name, src, key, cache_dir, staging_dir, steps, environment, dist_dir, log_tail_lines, metadata, ccache
        )


def _ccache(argument, env):
    """Run `ccache ARGUMENT` in the build's environment (its CCACHE_DIR); its output, or None when it cannot run.

    The statistics are the cache directory's, not the process's: they are this build's because the lock above lets
    one build at a time run per staging directory, and the roles give each build host one ccache directory.
    """
    try:
        # From the build's PATH, the one its compiler launcher (CMAKE_*_COMPILER_LAUNCHER=ccache) finds.
        return subprocess.check_output(["ccache", argument], env=env, stderr=subprocess.STDOUT).decode(  # noqa: S607
            "utf-8", "replace"
        )
    except (IOError, OSError, subprocess.CalledProcessError):
        return None


def _build_locked(
    name, src, key, cache_dir, staging_dir, steps, environment, dist_dir, log_tail_lines, metadata, ccache=False
):
    work = os.path.join(staging_dir, "%s-%s" % (name, key))
    tree = os.path.join(work, "src")
    log_path = os.path.join(work, "build.log")
    env = dict(os.environ)
    env.update(dict((str(k), str(v)) for k, v in (environment or {}).items()))
    started = time.time()
    try:
        if os.path.exists(work):
            shutil.rmtree(work)
        os.makedirs(work)
        if ccache:
            # Each build key compiles in its own staging tree, so absolute paths (the preprocessor's line markers,
            # -I directories) differ between keys and every object would miss. Relative to the tree they are the same:
            # a second arch list hits on every unit its offload flags do not touch (ccache's base_dir, and hash_dir
            # off, since the working directory moves with the tree too).
            env.setdefault("CCACHE_BASEDIR", tree)
            env.setdefault("CCACHE_NOHASHDIR", "1")
            _ccache("--zero-stats", env)
        _run_steps(name, src, tree, log_path, steps, env, staging_dir, log_tail_lines)
    except (IOError, OSError) as exc:
        # Writing the staging copy or the build log failed, most often for lack of space.
        detail = str(exc)[:500] + _full_disk_hint(staging_dir, detail_text(exc))
        raise BuildError(name, "staging", detail, log_path, _tail(log_path, log_tail_lines)) from exc
    wheels = sorted(glob.glob(os.path.join(tree, dist_dir, "*.whl")))
    if not wheels:
        raise BuildError(name, "collect wheels", "no wheel in %s" % dist_dir, log_path, _tail(log_path, log_tail_lines))
    info = {
        "name": name,
        "key": key,
        "wheel_files": [os.path.basename(wheel) for wheel in wheels],
        "steps": [step["name"] for step in steps],
        "seconds": round(time.time() - started, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "metadata": metadata or {},
    }
    if ccache:
        # None when ccache could not report (not installed, older than 4.0 without --print-stats).
        info["ccache"] = ccache_stats(_ccache("--print-stats", env))
    try:
        _publish(cache_dir, key, wheels, log_path, info)
    except (IOError, OSError) as exc:
        detail = str(exc) + _full_disk_hint(cache_dir, detail_text(exc))
        raise BuildError(name, "publish", detail, log_path, _tail(log_path, log_tail_lines)) from exc
    shutil.rmtree(work)
    return cached_build(cache_dir, key)


def _run_steps(name, src, tree, log_path, steps, env, staging_dir, log_tail_lines):
    with open(log_path, "a") as log:
        log.write("== staging copy of %s\n" % src)
        log.flush()
        try:
            shutil.copytree(src, tree, symlinks=True)
        except (IOError, OSError, shutil.Error) as exc:
            detail = str(exc)[:500] + _full_disk_hint(staging_dir, detail_text(exc))
            raise BuildError(name, "copy source", detail, log_path, _tail(log_path, log_tail_lines)) from exc
        for step in steps:
            log.write(step_header(step["name"], step["argv"]))
            log.flush()
            try:
                rc = subprocess.call(
                    step["argv"],
                    cwd=os.path.join(tree, step.get("cwd", ".")),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            except (IOError, OSError) as exc:
                log.write("cannot run: %s\n" % exc)
                log.flush()
                rc = 127
            if rc != 0:
                log.flush()
                tail = _tail(log_path, log_tail_lines)
                raise BuildError(
                    name, step["name"], describe_exit(rc) + _full_disk_hint(staging_dir, tail), log_path, tail
                )


def detail_text(exc):
    """An OSError (or shutil.Error's list of them) as text, with "No space left on device" where it was ENOSPC."""
    if getattr(exc, "errno", None) == errno.ENOSPC:
        return os.strerror(errno.ENOSPC)
    return str(exc)


def _publish(cache_dir, key, wheels, log_path, info):
    """cache_dir/key appears whole: files written and synced in a hidden directory, then one rename, then synced."""
    publishing = os.path.join(cache_dir, ".%s.tmp" % key)
    if os.path.exists(publishing):
        shutil.rmtree(publishing)
    os.makedirs(publishing)
    try:
        for wheel in wheels:
            shutil.copy2(wheel, publishing)
        shutil.copy2(log_path, os.path.join(publishing, "build.log"))
        with open(os.path.join(publishing, BUILD_INFO), "w") as handle:
            json.dump(info, handle, indent=2, sort_keys=True)
        # A power cut after the rename must not leave a published key with empty files.
        for entry in os.listdir(publishing):
            _fsync(os.path.join(publishing, entry))
        _fsync(publishing, directory=True)
        os.rename(publishing, cache_entry(cache_dir, key))
    except (IOError, OSError):
        shutil.rmtree(publishing, ignore_errors=True)
        raise
    _fsync(cache_dir, directory=True)
