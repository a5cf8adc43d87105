# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stacks a host's services run from, read in one step: what the current and previous links name, and whether
the stack in service and the one to serve were verified and hold vllm.

The vllm role installs each stack under STACKS/KEY and writes STACKS/KEY/.verified once it verified it; the vllm_service
role serves the stack the link `current` names and keeps `previous` beside it (the stack it switched away from, for
rollback.yml). These were five stat tasks, a task run on the host each (issue 29): one read here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# What a stack holds once the vllm role installed and verified it.
RECORD = ".verified"
VLLM = os.path.join("venv", "bin", "vllm")


def link_target(path):
    """Where the symbolic link at path points, as written; '' when path is not a link (absent, or a file)."""
    try:
        return os.readlink(path)
    except OSError:
        return ""


def verified(stack):
    return bool(stack) and os.path.isfile(os.path.join(stack, RECORD))


def describe(link, target=""):
    """The stack in service (link's target), the previous one (the link `previous` beside it) and the one to serve
    (target, or the one in service when target is empty), with whether each was verified and the one to serve holds
    vllm. Paths are as the links name them."""
    current = link_target(link)
    to = target.strip() or current
    return {
        "current": current,
        "current_verified": verified(current),
        "previous": link_target(os.path.join(os.path.dirname(link), "previous")),
        "target": to,
        "target_runnable": bool(to) and os.access(os.path.join(to, VLLM), os.F_OK),
        "target_verified": verified(to),
    }
