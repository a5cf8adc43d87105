#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: converged
short_description: Check in one call whether a host is still as the last whole rollout left it, or record that it is
version_added: "0.3.0"
description:
  - The converged fast path of C(playbooks/site.yml). A whole rollout that ends without failing on a host records
    there (O(state=record)) what it applied and what it left; the next run checks each host first
    (O(state=check)) and leaves the converged ones out of its prepare, build and serve plays, so a converged host
    runs only the rollout lock, this check and the lock's give-back.
  - The record (O(path), JSON, mode 0600, written atomically) holds the O(fingerprint) of what the host should be,
    a sha256 per watched file (null for an absent one), the resolved targets of the watched links, the active
    units, the stack the C(current) link names, and a summary (gfx arch, pending reboot) for the run's report.
  - The check compares the record with O(fingerprint) and with what the host shows now. Any difference or doubt
    makes the host not converged, with short reasons such as C(no record), C(the inputs changed),
    C(/etc/ld.so.conf.d/20-instinct-rocm.conf changed), C(vllm-fixture.service is not active), C(current moved)
    or C(stacks/KEY has no .verified).
  - The action plugin of the same name runs on the controller. It computes O(fingerprint) (a sha256 of the host's
    role inputs, every variable named C(rocm_*), C(toolchain_*), C(ldconfig_*), C(build_*), C(pytorch_*), C(triton_*),
    C(vllm_*) or C(instinct_*) resolved, its groups, the C(build_hosts) group, and a digest of the collection's
    roles, plugins and playbooks with the ansible-core version), and the watch list (O(files), O(links), O(units),
    O(stack_root)) from the host's variables, in one place (the function C(watch_list) of the collection's
    C(module_utils/converged.py)). Do not pass O(files), O(links), O(units), O(stack_root) or O(summary) yourself.
  - The check does not see what the roles only learn by running, such as a git branch or tag that moved on the
    mirror (the inputs name the ref, not the commit it resolves to), nor a package changed by hand that no watched
    file shows (see C(docs/docsite/rst/rollout.rst)). C(instinct_converged_check=false), C(--check), or any
    C(--tags) or C(--skip-tags) makes C(site.yml) run every host in full.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  state:
    description:
      - V(check) reads the record and the host and changes nothing; V(record) writes the record when it differs
        from the one there.
    type: str
    choices: [check, record]
    default: check
  path:
    description:
      - The record, an absolute path on the host. The playbooks take it from C(instinct_converged_path).
    type: path
    default: /var/lib/instinct-stack/converged.json
  fingerprint:
    description:
      - The sha256 (64 lower-case hex digits) of what the host should be. The action plugin computes it when it is
        not given; give O(state=record) after the roles ran the one a check returned before them (the roles set
        facts whose names the inputs share), as C(playbooks/site.yml) does.
    type: str
  files:
    description: Files and globs whose content is recorded (set by the action plugin).
    type: list
    elements: str
    default: []
  links:
    description: Links whose resolved target is recorded (set by the action plugin).
    type: list
    elements: str
    default: []
  units:
    description: systemctl patterns whose active units are recorded (set by the action plugin).
    type: list
    elements: str
    default: []
  stack_root:
    description: The directory of the C(current) link whose target is recorded (set by the action plugin).
    type: path
    default: /opt/instinct-stack
  summary:
    description: What the run's report shows of a skipped host, kept in the record (set by the action plugin).
    type: dict
    default: {}
attributes:
  action:
    description: The action plugin computes the fingerprint and the watch list on the controller.
    support: full
  check_mode:
    description: V(check) runs as usual (it changes nothing); V(record) writes nothing and reports whether it would.
    support: full
  diff_mode:
    description: Not supported.
    support: none
notes:
  - The module returns no file digest and no input, only paths and reasons, so no secret reaches the output.
  - A host where systemctl cannot list units is never converged.
seealso:
  - module: instinct.stack.rollout_lock
"""

EXAMPLES = r"""
- name: Check whether the host is still as the last whole rollout left it
  instinct.stack.converged:
    path: "{{ instinct_converged_path | default('/var/lib/instinct-stack/converged.json') }}"
  register: instinct_converged_state

- name: Record the host after a whole rollout, with the fingerprint the check computed before the roles ran
  instinct.stack.converged:
    state: record
    path: "{{ instinct_converged_path | default('/var/lib/instinct-stack/converged.json') }}"
    fingerprint: "{{ instinct_converged_state.fingerprint }}"
"""

RETURN = r"""
converged:
  description:
    - V(check) - the host is as its record says, and the record is of the inputs wanted now.
    - V(record) - a check right after it would find the host converged (false on a host whose units cannot be
      listed or with a file that cannot be read; a warning says which).
  returned: success
  type: bool
reasons:
  description:
    - V(check) - why the host is not converged; empty when it is.
    - V(record) - how the record differed from the one there (V(no record) on the first); empty when unchanged.
  returned: success
  type: list
  elements: str
  sample: ["the inputs changed", "vllm-fixture.service is not active", "current moved"]
fingerprint:
  description: The fingerprint checked or recorded.
  returned: always
  type: str
  sample: 9f2c4e0b7d1a3c5e8f6a2b4d0c9e7f1a3b5d7c9e1f3a5b7d9c1e3f5a7b9d1c3e
record:
  description: The record's path.
  returned: success
  type: str
  sample: /var/lib/instinct-stack/converged.json
recorded_at:
  description: When the record was written (UTC), null without one.
  returned: success
  type: str
  sample: "2026-05-09T07:35:25Z"
summary:
  description: The recorded gfx arch and driver state of a converged host (V(check)), for the run's report.
  returned: when converged
  type: dict
  sample: {gfx_arch: [gfx942], pytorch_rocm_arch: gfx942, reboot: {pending: false, load_failed: false, reason: ""}}
stack:
  description: The current stack's .verified record without its lock (versions, key, arch), for the run's report.
  returned: when converged
  type: dict
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.converged import (
    DEFAULT_PATH,
    DEFAULT_STACK_ROOT,
    check,
    make_record,
    observe,
    parse_units,
    read_record,
    read_stack,
    same_record,
    write_record,
)

SHA256 = re.compile(r"^[0-9a-f]{64}$")


def unit_lister(module):
    def list_units(patterns):
        systemctl = module.get_bin_path("systemctl")
        if systemctl is None:
            return None, "no systemctl"
        argv = [systemctl, "list-units", "--state=active", "--plain", "--no-legend", "--full", "--no-pager", "--"]
        rc, out, err = module.run_command(argv + patterns, environ_update={"LC_ALL": "C", "SYSTEMD_COLORS": "0"})
        if rc != 0:
            return None, (err or out).strip().splitlines()[-1] if (err or out).strip() else "rc %d" % rc
        return parse_units(out), None

    return list_units


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["check", "record"], default="check"),
            path=dict(type="path", default=DEFAULT_PATH),
            fingerprint=dict(type="str"),
            files=dict(type="list", elements="str", default=[]),
            links=dict(type="list", elements="str", default=[]),
            units=dict(type="list", elements="str", default=[]),
            stack_root=dict(type="path", default=DEFAULT_STACK_ROOT),
            summary=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not SHA256.match(p["fingerprint"] or ""):
        module.fail_json(
            msg="fingerprint must be a sha256 in 64 lower-case hex digits: run the module through its action plugin"
        )
    if not p["path"].startswith("/"):
        module.fail_json(msg="path must be absolute, not %s" % p["path"])
    watch = {"files": p["files"], "links": p["links"], "units": p["units"], "stack_root": p["stack_root"]}
    observed = observe(watch, unit_lister(module))
    try:
        old = read_record(p["path"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="converged record %s: %s" % (p["path"], exc))
    converged, reasons = check(old, p["fingerprint"], observed)
    result = dict(changed=False, fingerprint=p["fingerprint"], record=p["path"])
    if p["state"] == "check":
        result.update(converged=converged, reasons=reasons, recorded_at=(old or {}).get("recorded_at"))
        if converged:
            result.update(summary=old.get("summary") or {}, stack=read_stack(p["stack_root"]))
        module.exit_json(**result)
    new = make_record(p["fingerprint"], observed, p["summary"])
    changed = not same_record(old, new)
    if changed and not module.check_mode:
        try:
            write_record(p["path"], new)
        except (IOError, OSError) as exc:
            module.fail_json(msg="converged record %s: %s" % (p["path"], exc))
    # What the next check will find, were nothing to change: a host whose units cannot be listed, or a file that
    # cannot be read, is never converged.
    converged_next, doubts = check(new, p["fingerprint"], observed)
    if not converged_next:
        module.warn("the record %s will not make this host converged: %s" % (p["path"], "; ".join(doubts)))
    result.update(
        changed=changed,
        converged=converged_next,
        reasons=reasons if changed else [],
        recorded_at=new["recorded_at"] if changed else old.get("recorded_at"),
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
