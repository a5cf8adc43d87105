# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of the source builds: how many compile jobs fit, and what identifies a build."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json


def max_jobs(cpu_count, mem_total_mb, mem_per_job_mb=4096, reserve_mb=2048, limit=0):
    """Parallel compile jobs that fit in memory: min(cores, (memory - reserve) / memory per job), at least 1.

    PyTorch's ROCm compile units take 2-4 GiB each, so MAX_JOBS=nproc runs a large host out of memory.
    limit, when positive, caps the result (the user's override).
    """
    cpu_count, mem_total_mb, mem_per_job_mb = int(cpu_count), int(mem_total_mb), int(mem_per_job_mb)
    if cpu_count < 1 or mem_total_mb < 1 or mem_per_job_mb < 1:
        raise ValueError(
            "max_jobs needs positive cores (%r), memory (%r MB) and memory per job (%r MB)"
            % (cpu_count, mem_total_mb, mem_per_job_mb)
        )
    jobs = max(1, min(cpu_count, (mem_total_mb - int(reserve_mb)) // mem_per_job_mb))
    if int(limit) > 0:
        jobs = min(jobs, int(limit))
    return jobs


def build_key(arch, refs, flags=None):
    """A short stable hash of everything that changes a build's output: arch list, source refs, build flags."""
    document = {"arch": arch, "refs": refs, "flags": flags or {}}
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
