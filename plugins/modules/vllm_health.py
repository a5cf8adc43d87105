#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_health
short_description: Wait for a vLLM service's /health, showing what its systemd unit does meanwhile
version_added: "0.3.0"
description:
  - Waits until the service of the systemd O(unit) answers C(GET /health) with 200 on O(host) and O(port), for at
    most O(timeout) seconds, asking every O(delay) seconds.
  - The action plugin of the same name runs this module once every O(progress) seconds and, between runs, shows a
    line with the time waited, the unit's state (active state, time since it started, restarts) and the last line
    of the unit's journal since it started (C(journalctl -u UNIT --since)), so the first start of a large model,
    which can take many minutes, is seen moving.
  - It fails at once, without waiting out O(timeout), when systemd gave up on the unit - it failed, it stopped, it
    is not loaded - or the service crash-loops (systemd restarted it more than O(restarts) times since it was
    started). It fails with the unit's state and the last O(lines) lines of its journal since it started, as it
    does when O(timeout) passes; for a unit systemd restarted, the last O(lines) lines whenever written, since each
    restart moves its start past the error that ended the run before.
  - Values of the secret variables (names containing KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL) in
    O(env_file), such as C(VLLM_API_KEY), are masked in every journal line it returns; nothing else of that file is
    read or returned.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  unit:
    description: The service's systemd unit, for example C(vllm-llama.service).
    type: str
    required: true
  host:
    description:
      - The address the service binds. A service bound to every address (V(0.0.0.0), V(::)) is asked on the
        loopback address of that family.
    type: str
    default: 127.0.0.1
  port:
    description: The port the service listens on.
    type: int
    default: 8000
  path:
    description: The health endpoint's path.
    type: str
    default: /health
  timeout:
    description:
      - Seconds to wait for the service in all. The action plugin passes what is left of it to each run of the
        module, which waits at most the smaller of O(timeout) and O(progress).
    type: int
    default: 2700
  progress:
    description: Seconds between two progress lines (and two runs of this module).
    type: int
    default: 60
  delay:
    description: Seconds between two requests to O(path).
    type: int
    default: 5
  restarts:
    description:
      - Restarts of the unit (systemd's C(NRestarts) since it was started) that the wait accepts; one more counts as
        a crash loop and fails the wait at once. V(-1) accepts any number.
    type: int
    default: 2
  lines:
    description: Lines of the unit's journal to return (and to quote in a failure).
    type: int
    default: 40
  env_file:
    description:
      - The unit's environment file; the values of its secret variables are masked in the journal lines. Only
        read, never returned.
    type: path
extends_documentation_fragment:
  - instinct.stack.read_only
notes:
  - Ansible cannot print while a task runs; the progress lines come from the action plugin's display between two
    runs of the module, every O(progress) seconds, and appear in the output of C(ansible-playbook) as they happen.
seealso:
  - module: ansible.builtin.uri
"""

EXAMPLES = r"""
- name: Wait for /health of llama, showing its progress every minute
  instinct.stack.vllm_health:
    unit: vllm-llama.service
    host: 127.0.0.1
    port: 8000
    timeout: 2700
    progress: 60
    env_file: /etc/instinct-stack/vllm/llama.env
  register: llama_health
"""

RETURN = r"""
healthy:
  description: Whether the service answered O(path) with 200.
  returned: always
  type: bool
status:
  description: The last HTTP status of O(path), null when nothing answered.
  returned: always
  type: int
gave_up:
  description: Why waiting longer is pointless (the unit failed, stopped, or crash-loops), empty otherwise.
  returned: always
  type: str
waited:
  description: Seconds waited.
  returned: always
  type: int
unit:
  description: The unit's state when the service did not answer; null when it did.
  returned: always
  type: dict
  contains:
    active_state:
      description: systemd's ActiveState (for example C(activating), C(active), C(failed)).
      type: str
    sub_state:
      description: systemd's SubState (for example C(running), C(auto-restart)).
      type: str
    result:
      description: systemd's Result (for example C(success), C(exit-code)).
      type: str
    restarts:
      description: systemd's NRestarts, the restarts since the unit was started.
      type: int
    main_exit:
      description: How the main process ended, for example C(exited with status 1); empty while it runs.
      type: str
    up_seconds:
      description: Seconds since the unit was started, null when it never was.
      type: int
journal:
  description:
    - The unit's last O(lines) journal lines since it started, C(YYYY-MM-DD HH:MM:SS message), secrets masked.
      Returned by the module; the action plugin puts them in its failure message instead.
  returned: when the service did not answer
  type: list
  elements: str
since:
  description: The journal's start (C(@EPOCH), when the unit was last started), null when it never was.
  returned: when the service did not answer
  type: str
"""

import os
from urllib.error import HTTPError, URLError
from urllib.request import ProxyHandler, build_opener

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.vllm_health import (
    PROPERTIES,
    env_secrets,
    health_url,
    journal_since,
    parse_journal,
    parse_show,
    redact,
    unit_state,
    wait,
)


def probe_health(url, timeout):
    """The HTTP status of url, None when nothing answers. Never through a proxy: the service is on this machine."""
    opener = build_opener(ProxyHandler({}))
    try:
        response = opener.open(url, timeout=timeout)
        try:
            return response.getcode()
        finally:
            response.close()
    except HTTPError as error:
        return error.code
    except (URLError, OSError, ValueError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=8000),
            path=dict(type="str", default="/health"),
            timeout=dict(type="int", default=2700),
            progress=dict(type="int", default=60),
            delay=dict(type="int", default=5),
            restarts=dict(type="int", default=2),
            lines=dict(type="int", default=40),
            env_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for name, minimum in (("timeout", 0), ("progress", 1), ("delay", 1), ("lines", 1), ("port", 1)):
        if p[name] < minimum:
            module.fail_json(msg="%s must be at least %d, got %d" % (name, minimum, p[name]))
    unit = p["unit"]
    if not unit.endswith(".service"):
        unit += ".service"
    systemctl = module.get_bin_path("systemctl", required=True)
    journalctl = module.get_bin_path("journalctl", required=True)
    url = health_url(p["host"], p["port"], p["path"])

    def read_unit():
        rc, out, err = module.run_command([systemctl, "show", unit, "--property=" + ",".join(PROPERTIES)])
        if rc != 0:
            module.fail_json(msg="systemctl show %s failed: %s" % (unit, (err or out).strip()))
        return unit_state(parse_show(out))

    outcome = wait(
        lambda: probe_health(url, max(1, min(p["delay"], 10))),
        read_unit,
        timeout=min(p["timeout"], p["progress"]),
        delay=p["delay"],
        restarts=p["restarts"],
    )
    unit_info = outcome["unit"]
    result = dict(changed=False, url=url, **outcome)
    if unit_info is not None:
        unit_info = dict(unit_info)
        started = unit_info.pop("started_monotonic")
        result["unit"] = unit_info
        # A crash loop restarts the unit, and each restart moves its start: the journal since the last one holds
        # systemd's restart lines, not the error that ended the run before. Then the last lines show that error.
        since = journal_since(started) if not unit_info.get("restarts") else None
        command = [journalctl, "--no-pager", "--unit", unit, "--output", "json", "--output-fields", "MESSAGE"]
        command += ["--lines", str(p["lines"])] + (["--since", since] if since else [])
        rc, out, err = module.run_command(command)
        journal = parse_journal(out) if rc == 0 else ["(journalctl failed: %s)" % (err or out).strip()]
        secrets = set()
        if p["env_file"] and os.path.isfile(p["env_file"]):
            try:
                with open(p["env_file"]) as handle:
                    secrets = env_secrets(handle.read())
            except (IOError, OSError) as exc:
                module.fail_json(msg="cannot read %s: %s" % (p["env_file"], exc.strerror or exc))
        # Masked here, and also in whatever else the result carries (AnsibleModule masks its no_log values).
        module.no_log_values.update(secrets)
        result.update(journal=redact(journal[-p["lines"] :], secrets), since=since)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
