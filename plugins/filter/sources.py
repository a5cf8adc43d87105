# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters about the build's sources: which repository a URL names, and whether the sources are a released pairing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import git_repository_name
from ansible_collections.instinct.stack.plugins.module_utils.release_pairing import pairing_problems


def _release_pairing(requirements_text, built, source="requirements/rocm-build.txt"):
    return pairing_problems(requirements_text, dict(built or {}), source)


class FilterModule(object):
    def filters(self):
        return {"release_pairing": _release_pairing, "git_repository_name": git_repository_name}
