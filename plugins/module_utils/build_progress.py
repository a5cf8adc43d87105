# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A running source build's progress, read from its build.log, and the state of the async job that runs it.

wheel_build writes `== STEP (at EPOCH): ARGV` before each step; CMake's Ninja generator prints `[done/total]`
before each edge it runs (also when its output is a file, one line per edge). The last counter after the last
step header is the step's progress; the time since that header and the rate so far give an ETA.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

STEP_HEADER = re.compile(r"^== (?P<step>[^\s:()]+)(?: \(at (?P<at>\d+)\))?: ", re.MULTILINE)
NINJA_COUNTER = re.compile(r"^\[(?P<done>\d+)/(?P<total>\d+)\] ", re.MULTILINE)
TAIL_BYTES = 256 * 1024


def step_header(step, argv, now=None):
    """The log line wheel_build writes before a step."""
    return "== %s (at %d): %s\n" % (step, int(time.time() if now is None else now), " ".join(argv))


def _tail(path, size):
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        length = handle.tell()
        handle.seek(max(0, length - size))
        return handle.read().decode("utf-8", "replace")


def read_progress(log_path, now=None, tail_bytes=TAIL_BYTES):
    """{"phase", "done", "total", "percent", "elapsed_seconds", "eta_seconds"} from the log, or None without one.

    done/total/percent/eta_seconds are None until the step prints a Ninja counter.
    """
    try:
        text = _tail(log_path, tail_bytes)
    except (IOError, OSError):
        return None
    now = time.time() if now is None else now
    headers = list(STEP_HEADER.finditer(text))
    progress = {"phase": None, "done": None, "total": None, "percent": None, "elapsed_seconds": None}
    progress["eta_seconds"] = None
    start = 0
    if headers:
        last = headers[-1]
        start = last.end()
        progress["phase"] = last.group("step")
        if last.group("at"):
            progress["elapsed_seconds"] = max(0, int(now) - int(last.group("at")))
    counters = list(NINJA_COUNTER.finditer(text, start))
    if counters:
        done, total = int(counters[-1].group("done")), int(counters[-1].group("total"))
        progress.update(done=done, total=total, percent=100 * done // total if total else None)
        elapsed = progress["elapsed_seconds"]
        if elapsed is not None and 0 < done < total:
            progress["eta_seconds"] = int(elapsed * (total - done) / done)
        elif done >= total:
            progress["eta_seconds"] = 0
    return progress


def job_state(results_file):
    """The async job's result as async_status reads it: (finished, data). data is None while nothing is written."""
    if not os.path.exists(results_file):
        raise IOError("could not find the build job's results file %s" % results_file)
    try:
        with open(results_file) as handle:
            content = handle.read()
    except (IOError, OSError):
        return False, None
    if not content.strip():
        return False, None
    try:
        data = json.loads(content)
    except ValueError:
        return False, None  # being written
    if "started" not in data:
        return True, data  # the module's own result: the job is over
    return bool(data.get("finished")), data
