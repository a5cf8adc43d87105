# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters about the fleet as a whole: whether its hosts can share one stack."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.instinct.stack.plugins.module_utils.python_abi import fleet_problem


def python_abi_problem(abis):
    if not isinstance(abis, dict):
        raise AnsibleFilterError("python_abi_problem takes a dict of host name to instinct_python_abi, got %r" % abis)
    return fleet_problem(abis)


class FilterModule(object):
    def filters(self):
        return {"python_abi_problem": python_abi_problem}
