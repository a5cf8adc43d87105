#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollout_lock
short_description: Hold a host for one rollout, so a concurrent second rollout is refused
version_added: "0.2.0"
description:
  - Takes (O(state=present)) or gives back (O(state=absent)) the rollout lock of a host, a file (O(path)) naming the
    rollout that holds it. C(playbooks/site.yml) and C(playbooks/rollback.yml) take it on every host in their first
    play and give it back in their last one, so a second rollout against the same hosts stops with a message
    naming the one that holds them.
  - The action plugin of the same name runs on the controller and builds this run's identity, the O(holder) the
    lock names; do not pass O(holder) or O(replace_run_id) yourself. The identity is the controller's node name
    (and machine id and boot id), the user, the pid of the main C(ansible-playbook) process (the worker that runs
    the task is forked from it, so it is the worker's parent), that process's start time (field 22 of
    C(/proc/PID/stat), so a pid reused by another process is not taken for the holder), when it started, the
    playbook, and a C(run_id) derived from controller, machine id, boot id, pid and start time.
  - When another run holds the lock the action plugin decides. A holder on this controller whose process no
    longer runs (its pid is gone, now belongs to a process started at another time, or the controller rebooted)
    left a stale lock, and this run takes it over, reporting a change and a warning that names the dead pid. A
    holder still running on this controller, or one on another controller, makes the task fail with a message
    naming it (user@controller, its pid, playbook and start time) and saying what to do.
  - The variable C(instinct_rollout_lock_break=true) (default V(false)) takes over any other holder; use it only
    when that rollout no longer runs, for instance after its controller was lost.
  - The lock is created atomically (a complete file hard-linked to O(path), which fails when the path exists) and
    another holder's lock is replaced only by compare-and-swap (only while it still names the run it named when
    read), under an flock on C(PATH.flock). It is given back only by the run it names; another holder's lock is
    left in place and reported.
  - A run's own lock is taken and given back within the run, so neither reports a change and an unchanged rerun
    stays idempotent; taking over another run's lock does report one.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  path:
    description:
      - The lock file, an absolute path. Keep it on persistent storage, not C(/run), because the rocm role may
        reboot a host mid-rollout and the lock must survive that.
      - The playbooks take it from C(instinct_rollout_lock_path).
    type: path
    default: /var/lib/instinct-stack/rollout.lock
  state:
    description:
      - V(present) takes the lock for this run; V(absent) gives it back if it names this run and otherwise leaves it.
    type: str
    choices: [present, absent]
    default: present
  holder:
    description:
      - This run's identity, the lock file's content (C(run_id), C(controller), C(machine_id), C(boot_id), C(user),
        C(pid), C(pid_start), C(started), C(playbook)). The action plugin sets it; without it the module fails.
    type: dict
  replace_run_id:
    description:
      - Replace a lock held by another run only while it still names this C(run_id) (compare-and-swap). The action
        plugin sets it when it decided to take over a stale holder.
    type: str
attributes:
  action:
    description: The action plugin builds the identity and decides about another run's lock on the controller.
    support: full
  check_mode:
    description: Writes nothing; reports the holder and fails, as a real run would, on a live holder of another run.
    support: full
  diff_mode:
    description: Not supported.
    support: none
notes:
  - A host that fails mid-rollout leaves the later plays and so keeps its lock, naming the rollout that failed; a
    rollout that C(max_fail_percentage) stops (a failed serve batch) never reaches its last play, so all its hosts
    keep theirs. The next run from the same controller finds that the pid no longer runs and takes the locks over
    with a warning; a run from another controller is refused until C(instinct_rollout_lock_break=true) is given.
  - C(ansible-playbook --check) takes no lock, writes nothing, and is refused like a real run while another rollout
    holds a host.
  - A run whose first play is refused on one host gives back the locks it took on the other hosts and stops there
    (C(playbooks/tasks/rollout_lock.yml)).
"""

EXAMPLES = r"""
- name: Take the rollout lock
  instinct.stack.rollout_lock:
    path: "{{ instinct_rollout_lock_path | default('/var/lib/instinct-stack/rollout.lock') }}"
  register: instinct_rollout_lock

- name: Give back the rollout lock
  instinct.stack.rollout_lock:
    path: "{{ instinct_rollout_lock_path | default('/var/lib/instinct-stack/rollout.lock') }}"
    state: absent
"""

RETURN = r"""
lock_file:
  description: The lock file.
  returned: success
  type: str
  sample: /var/lib/instinct-stack/rollout.lock
acquired:
  description: The lock names this run after the task (in check mode, it would).
  returned: success
  type: bool
released:
  description: This run's lock was removed (in check mode, would be).
  returned: success
  type: bool
holder:
  description: What the lock names after the task (null when there is no lock); on a refusal, the other holder.
  returned: always
  type: dict
  sample:
    run_id: 3f0c5d2e9a61b7c4
    controller: deploy1
    machine_id: 0b7c3e6a0d2f4e1c9a8b7c6d5e4f3a2b
    boot_id: 5e0a1c2d-3b4f-4a6b-8c7d-9e0f1a2b3c4d
    user: ops
    pid: 4242
    pid_start: 1234567
    started: "2026-05-09T07:35:25Z"
    playbook: site.yml
previous:
  description: The holder this task replaced or removed (a stale one it took over, or this run's lock it gave back).
  returned: success
  type: dict
run_id:
  description: This run's run_id (set by the action plugin).
  returned: always
  type: str
refused:
  description: Another rollout holds the host and this run did not take the lock (set by the action plugin).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.rollout_lock import (
    DEFAULT_PATH,
    RolloutLockError,
    acquire,
    release,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=DEFAULT_PATH),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            holder=dict(type="dict"),
            replace_run_id=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    run_id = (p["holder"] or {}).get("run_id")
    if not run_id:
        module.fail_json(msg="holder has no run_id: run the module through its action plugin, as a task of its own")
    try:
        if p["state"] == "present":
            outcome = acquire(p["path"], p["holder"], p["replace_run_id"], check_mode=module.check_mode)
        else:
            outcome = release(p["path"], run_id, check_mode=module.check_mode)
    except (RolloutLockError, IOError, OSError) as exc:
        module.fail_json(msg="rollout lock %s: %s" % (p["path"], exc))
    module.exit_json(lock_file=p["path"], run_id=run_id, **outcome)


if __name__ == "__main__":
    main()
