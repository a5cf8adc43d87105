#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: wheel_build
short_description: Build Python wheels from a source checkout into a keyed cache, atomically
version_added: "0.1.0"
description:
  - Copies O(src) into a staging directory, runs the build O(steps) there in order, and publishes the wheels
    the build leaves in O(dist_dir) as O(cache_dir)/O(key)/ with one rename, beside a C(build-info.json) and
    the build log.
  - When O(cache_dir)/O(key)/ is already published nothing is built and the module reports no change, so a
    key is built once however many hosts need it.
  - A failed step publishes nothing, keeps the staging copy and its C(build.log), and fails with the name of
    the step and the log's last lines. A step killed by a signal is named so (SIGKILL with the out-of-memory
    hint), and a full staging or cache filesystem is named with its free space.
  - The published files are synced to disk before the rename, so a power cut never leaves a key with empty files.
  - One build at a time per O(staging_dir), under a lock file there (MAX_JOBS is sized for the host's memory). A
    build started while another runs (after ansible-playbook was killed and its async build kept running) waits
    for it; when that one published the same key, its wheels are returned without building again, with no change.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  name:
    description: Component name, used in the staging directory name and the messages.
    type: str
    required: true
  src:
    description: The source checkout to build (it is copied, never modified).
    type: path
    required: true
  key:
    description: Identifier of the build (arch list, refs and flags); see the P(instinct.stack.build_key#filter) filter.
    type: str
    required: true
  cache_dir:
    description: Where published builds live, one directory per key.
    type: path
    required: true
  staging_dir:
    description: Where builds run.
    type: path
    required: true
  steps:
    description: Build commands, run in order in the staging copy, without a shell.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Step name for logs and errors (for example C(hipify)).
        type: str
        required: true
      argv:
        description: The command and its arguments.
        type: list
        elements: str
        required: true
      cwd:
        description: Directory inside the staging copy to run in.
        type: str
        default: "."
  environment:
    description: Environment variables for every step, on top of the module's own environment.
    type: dict
    default: {}
  dist_dir:
    description: Directory inside the staging copy where the build leaves its wheels.
    type: str
    default: dist
  log_tail_lines:
    description: Lines of the build log to include in a failure message.
    type: int
    default: 40
  metadata:
    description: Facts recorded in C(build-info.json) (refs, arch list, flags).
    type: dict
    default: {}
  ccache:
    description:
      - The build compiles through ccache (its C(CCACHE_DIR) from O(environment)). Zeroes ccache's statistics
        before the steps and records the build's hits, misses and hit rate (hits / (hits + misses)) from
        C(ccache --print-stats) (ccache 4 or newer) as C(ccache) in C(build-info.json), null when ccache cannot
        report. Without it C(build-info.json) has no C(ccache).
    type: bool
    default: false
    version_added: "0.3.0"
attributes:
  check_mode:
    description: Reports whether the key would be built, without building.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Build the torch wheel for gfx942
  instinct.stack.wheel_build:
    name: pytorch
    src: /var/lib/instinct-stack/src/pytorch
    key: "{{ 'gfx942' | instinct.stack.build_key({'pytorch': pytorch_commit}) }}"
    cache_dir: /var/cache/instinct-stack/wheels/pytorch
    staging_dir: /var/lib/instinct-stack/build
    environment:
      USE_ROCM: "1"
      PYTORCH_ROCM_ARCH: gfx942
    steps:
      - name: hipify
        argv: [/var/lib/instinct-stack/build-venv/bin/python, tools/amd_build/build_amd.py]
      - name: wheel
        argv: [/var/lib/instinct-stack/build-venv/bin/python, setup.py, bdist_wheel]
"""

RETURN = r"""
built:
  description: Whether this run built the key.
  returned: success
  type: bool
wheels:
  description: Absolute paths of the published wheels.
  returned: success and not check mode or already built
  type: list
  elements: str
key:
  description: The key.
  returned: always
  type: str
build_info:
  description: The published C(build-info.json).
  returned: success and not check mode or already built
  type: dict
failed_step:
  description: The step that failed.
  returned: failure of a step
  type: str
log:
  description: Path of the failed build's log.
  returned: failure of a step
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.wheel_build import BuildError, build, cached_build


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            src=dict(type="path", required=True),
            key=dict(type="str", required=True, no_log=False),
            cache_dir=dict(type="path", required=True),
            staging_dir=dict(type="path", required=True),
            steps=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(
                    name=dict(type="str", required=True),
                    argv=dict(type="list", elements="str", required=True),
                    cwd=dict(type="str", default="."),
                ),
            ),
            environment=dict(type="dict", default={}),
            dist_dir=dict(type="str", default="dist"),
            log_tail_lines=dict(type="int", default=40),
            metadata=dict(type="dict", default={}),
            ccache=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    published = cached_build(p["cache_dir"], p["key"])
    if published:
        module.exit_json(changed=False, built=False, key=p["key"], wheels=published["wheels"], build_info=published)
    if module.check_mode:
        module.exit_json(changed=True, built=False, key=p["key"])
    try:
        info = build(
            p["name"],
            p["src"],
            p["key"],
            p["cache_dir"],
            p["staging_dir"],
            p["steps"],
            environment=p["environment"],
            dist_dir=p["dist_dir"],
            log_tail_lines=p["log_tail_lines"],
            metadata=p["metadata"],
            ccache=p["ccache"],
        )
    except BuildError as exc:
        module.fail_json(msg=str(exc), key=p["key"], failed_step=exc.step, log=exc.log_path)
    # A key that another run (an orphaned build of a killed ansible-playbook) published while this one waited.
    reused = info.pop("reused", False)
    module.exit_json(changed=not reused, built=not reused, key=p["key"], wheels=info["wheels"], build_info=info)


if __name__ == "__main__":
    main()
