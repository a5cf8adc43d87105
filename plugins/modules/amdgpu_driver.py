#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: amdgpu_driver
short_description: Tell whether a host runs its installed amdgpu kernel module or needs a reboot
version_added: "0.2.0"
description:
  - Compares the amdgpu module that C(amdgpu-dkms) installed for the running kernel (C(modinfo -F version amdgpu),
    or the package's C(/usr/src/amdgpu-VERSION/dkms.conf) when DKMS has built nothing for this kernel yet) with the
    one loaded (C(/sys/module/amdgpu/version), which AMD's out-of-tree module sets).
  - The real C(amdgpu-dkms) writes no C(/var/run/reboot-required), so the module keeps its own record in
    O(state_path) of the package version first seen unloaded and the boot it was seen in. A reboot is pending while
    that boot runs; a module still not loaded after a reboot is reported as a load failure, naming Secure Boot when
    it is enabled.
  - Changes nothing on the host but O(state_path).
author:
  - instinct.stack contributors (@instinct-stack)
options:
  state_path:
    description:
      - The record of the pending reboot. Written when a reboot becomes pending, removed when the installed module is
        loaded or amdgpu-dkms is gone.
    type: path
    default: /var/lib/instinct-stack/amdgpu-driver.json
  root:
    description:
      - The root to read C(sys), C(proc) and C(usr/src) under; a copied tree works for tests.
    type: path
    default: /
attributes:
  check_mode:
    description: Reports the same decision and whether the record would change, and writes nothing.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
notes:
  - AMD's install documentation asks for a reboot after every install or upgrade of C(amdgpu-dkms).
  - An upgrade can leave an older C(/usr/src/amdgpu-*) tree behind; it is returned in RV(leftover_sources) and warned
    about.
"""

EXAMPLES = r"""
- name: Check whether the new amdgpu module is loaded
  instinct.stack.amdgpu_driver:
  register: driver

- name: Reboot into it
  ansible.builtin.reboot:
  when: driver.reboot_pending
"""

RETURN = r"""
reboot_pending:
  description: The installed amdgpu module is not the loaded one and the host has not rebooted since it was installed.
  returned: always
  type: bool
load_failed:
  description: The host rebooted after the install but still does not run the installed module.
  returned: always
  type: bool
reason:
  description: What the decision rests on, in words.
  returned: always
  type: str
  sample: "amdgpu-dkms 1:6.14.14.30100200-2212064.22.04 is installed (module 6.14.14) but the running kernel has no
    amdgpu module from amdgpu-dkms: reboot to load it"
package_version:
  description: The installed amdgpu-dkms package version; null when it is not installed.
  returned: always
  type: str
installed_module:
  description: The amdgpu module version installed for the running kernel (or shipped as DKMS source).
  returned: always
  type: str
  sample: "6.14.14"
loaded_module:
  description: The loaded amdgpu module's version; null when none is loaded or the in-tree module is.
  returned: always
  type: str
secure_boot:
  description: Whether Secure Boot is enabled; null on a host without EFI variables.
  returned: always
  type: bool
leftover_sources:
  description: Older amdgpu DKMS source trees left beside the newest one.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils.amdgpu_driver import inspect, read_state


def first_line(module, argv):
    """The command's first output line, or None when it fails or says nothing (the package or module is absent)."""
    if module.get_bin_path(argv[0]) is None:
        return None
    rc, out, _err = module.run_command(argv)
    return out.strip().splitlines()[0] if rc == 0 and out.strip() else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state_path=dict(type="path", default="/var/lib/instinct-stack/amdgpu-driver.json"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    state_path = module.params["state_path"]
    old_state = read_state(state_path)
    package = first_line(module, ["dpkg-query", "-W", "-f=${Version}", "amdgpu-dkms"])
    result, new_state = inspect(
        package, first_line(module, ["modinfo", "-F", "version", "amdgpu"]), module.params["root"], old_state
    )
    changed = new_state != old_state
    if changed and not module.check_mode:
        if new_state is None:
            os.unlink(state_path)
        else:
            directory = os.path.dirname(state_path)
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            with open(state_path + ".tmp", "w") as handle:
                json.dump(new_state, handle, sort_keys=True)
            os.rename(state_path + ".tmp", state_path)
    for leftover in result["leftover_sources"]:
        module.warn("an older amdgpu DKMS source tree is left behind: /usr/src/amdgpu-%s (see dkms status)" % leftover)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
