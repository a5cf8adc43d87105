# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build wheels from a source checkout in a staging copy and publish them to a keyed cache atomically.

A build either publishes every wheel of the key (cache_dir/KEY/ appears whole, by one rename) or
publishes nothing and leaves the staging directory and its build.log for inspection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import shutil
import subprocess
import time

from ansible_collections.instinct.stack.plugins.module_utils.build_progress import step_header

BUILD_INFO = "build-info.json"


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


def _tail(path, lines):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except (IOError, OSError):
        return ""


def build(
    name, src, key, cache_dir, staging_dir, steps, environment=None, dist_dir="dist", log_tail_lines=40, metadata=None
):
    """Run steps (each {"name", "argv"}) in a staging copy of src; publish its wheels as cache_dir/key.

    Returns the build-info dict (with "wheels" as absolute paths). Raises BuildError on a failed step.
    """
    published = cached_build(cache_dir, key)
    if published:
        return published
    work = os.path.join(staging_dir, "%s-%s" % (name, key))
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    tree = os.path.join(work, "src")
    log_path = os.path.join(work, "build.log")
    env = dict(os.environ)
    env.update(dict((str(k), str(v)) for k, v in (environment or {}).items()))
    started = time.time()
    with open(log_path, "a") as log:
        log.write("== staging copy of %s\n" % src)
        log.flush()
        try:
            shutil.copytree(src, tree, symlinks=True)
        except (IOError, OSError, shutil.Error) as exc:
            raise BuildError(name, "copy source", str(exc), log_path, _tail(log_path, log_tail_lines)) from exc
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
                raise BuildError(name, step["name"], "exit code %d" % rc, log_path, _tail(log_path, log_tail_lines))
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
    publishing = os.path.join(cache_dir, ".%s.tmp" % key)
    if os.path.exists(publishing):
        shutil.rmtree(publishing)
    os.makedirs(publishing)
    for wheel in wheels:
        shutil.copy2(wheel, publishing)
    shutil.copy2(log_path, os.path.join(publishing, "build.log"))
    with open(os.path.join(publishing, BUILD_INFO), "w") as handle:
        json.dump(info, handle, indent=2, sort_keys=True)
    os.rename(publishing, cache_entry(cache_dir, key))
    shutil.rmtree(work)
    return cached_build(cache_dir, key)
