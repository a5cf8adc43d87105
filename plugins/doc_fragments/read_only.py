# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes of a module that only reads the host: it runs in check mode as it does otherwise, and shows no
    # diff. A module adds its own attributes (facts, for one) beside these.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Reads only; it runs in check mode too.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
"""
