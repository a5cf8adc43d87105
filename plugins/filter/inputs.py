# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' argument specs as the first play of a rollout checks them, before any host changes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def _plain(value):
    """value rebuilt as plain dicts and lists. Not copy.deepcopy: ansible-core 2.19 hands a filter its data in lazy
    template containers, whose deep copy carries every value's tags along and took 20 s of controller CPU for the
    roles' specs, on every rollout (py-spy: dataclasses.fields under _AnsibleLazyTemplateDict.__deepcopy__)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _without_defaults(options):
    stripped = {}
    for name, spec in (options or {}).items():
        spec = {key: _plain(value) for key, value in spec.items() if key != "default"}
        if isinstance(spec.get("options"), dict):
            spec["options"] = _without_defaults(spec["options"])
        stripped[name] = spec
    return stripped


def given_inputs_spec(argument_specs, entry_point="main"):
    """The options of one role's entry point, or of several roles' merged, with their defaults left out: the first
    play validates what the inventory and the command line give, while the roles' own defaults (templates of other
    roles' facts) are not loaded yet; each role validates its whole spec again when it starts."""
    merged = {}
    for specs in argument_specs if isinstance(argument_specs, list) else [argument_specs]:
        try:
            options = specs["argument_specs"][entry_point]["options"]
        except (KeyError, TypeError) as exc:
            raise AnsibleFilterError(
                "no options for entry point %r in the argument specs: %s" % (entry_point, exc)
            ) from exc
        for name, spec in _without_defaults(options).items():
            if name in merged and merged[name] != spec:
                # Role-prefixed names make this a defect of a role's spec, not of the user's input.
                raise AnsibleFilterError("option %r is declared differently by two roles' argument specs" % name)
            merged[name] = spec
    return merged


class FilterModule(object):
    def filters(self):
        return {"given_inputs_spec": given_inputs_spec}
