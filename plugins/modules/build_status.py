#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: build_status
short_description: Poll an asynchronous source build and report its own progress
version_added: "0.3.0"
description:
  - Reads the result of an asynchronous task (C(async) with C(poll=0)) from its O(results_file), as
    M(ansible.builtin.async_status) does, and, while the job runs, the build's progress from O(log) - the step
    that runs, Ninja's C([done/total]) counter, the percent and an ETA from the rate so far.
  - Polled with C(until) and C(retries), each attempt's result carries RV(build_progress), so the
    C(instinct-stack rollout) display and C(-v) output show a build that runs for hours moving.
  - When the job is over the module returns the job's own result (failed when the build failed).
author:
  - instinct.stack contributors (@instinct-stack)
options:
  results_file:
    description: The async job's results file, the C(results_file) that the async task (C(poll=0)) returns.
    type: path
    required: true
  log:
    description: The build's log, which the build writes while it runs (wheel_build's C(STAGING/NAME-KEY/build.log)).
    type: path
extends_documentation_fragment:
  - instinct.stack.read_only
"""

EXAMPLES = r"""
- name: Start the build
  instinct.stack.wheel_build:
    name: pytorch
    src: /var/lib/instinct-stack/src/pytorch
    key: "{{ key }}"
    cache_dir: /var/cache/instinct-stack/wheels/pytorch
    staging_dir: /var/lib/instinct-stack/build
    steps:
      - name: bdist_wheel
        argv: [python, setup.py, bdist_wheel]
  async: 14400
  poll: 0
  register: build_job

- name: Wait for the build, showing its progress
  instinct.stack.build_status:
    results_file: "{{ build_job.results_file }}"
    log: "/var/lib/instinct-stack/build/pytorch-{{ key }}/build.log"
  register: build
  until: build.finished
  retries: 1440
  delay: 10
"""

RETURN = r"""
finished:
  description: Whether the job is over. When it is, the job's own result keys are returned too.
  returned: always
  type: bool
build_progress:
  description: The running build's progress; absent once the job is over.
  returned: while the job runs and its log exists
  type: dict
  contains:
    phase:
      description: The step that runs (for example C(bdist_wheel)).
      type: str
    done:
      description: Ninja's count of finished edges, or null before the first.
      type: int
    total:
      description: Ninja's count of edges to run.
      type: int
    percent:
      description: done * 100 / total.
      type: int
    elapsed_seconds:
      description: Seconds since the step began.
      type: int
    eta_seconds:
      description: Seconds left at the rate so far, or null before the first counter.
      type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.build_progress import job_state, read_progress


def main():
    module = AnsibleModule(
        argument_spec=dict(results_file=dict(type="path", required=True), log=dict(type="path")),
        supports_check_mode=True,
    )
    try:
        finished, data = job_state(module.params["results_file"])
    except (IOError, OSError) as exc:
        module.fail_json(msg=str(exc), finished=True)
    if finished:
        result = dict(data)
        result["finished"] = True
        if result.get("failed"):
            module.fail_json(msg=result.pop("msg", "the build failed"), **result)
        module.exit_json(**result)
    progress = read_progress(module.params["log"]) if module.params["log"] else None
    result = dict(changed=False, finished=False)
    if progress:
        result["build_progress"] = progress
    module.exit_json(**result)


if __name__ == "__main__":
    main()
