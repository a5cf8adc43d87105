# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of instinct.stack.converged: what a host should be (its fingerprint) and what to watch on it.

The fingerprint hashes the host's role inputs as this run resolves them, its groups and the collection's own files
(tree_digest(), computed once per process: each task's worker is forked from ansible-playbook, so in practice once
per host and task). The module gets the fingerprint, never an input: a secret among them (an instance's api_key)
goes into the hash on the controller and nowhere else.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_version

from ansible_collections.instinct.stack.plugins.module_utils.converged import (
    DEFAULT_PATH,
    DeclarationError,
    canonical,
    declared_inputs,
    desired_fingerprint,
    role_inputs,
    summary,
    tree_digest,
    watch_list,
)

MODULE = "instinct.stack.converged"
STATES = ("check", "record")
# The collection's root: plugins/action/ is two levels below it.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TREE_DIGESTS = {}


def collection_digest(root=COLLECTION_ROOT):
    """tree_digest() of the collection at root, computed once per process."""
    if root not in _TREE_DIGESTS:
        _TREE_DIGESTS[root] = tree_digest(root)
    return _TREE_DIGESTS[root]


class InputError(Exception):
    pass


def is_sha256(value):
    return isinstance(value, str) and len(value) == 64 and all(char in "0123456789abcdef" for char in value)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "path", "fingerprint"))

    def resolved_inputs(self, task_vars, names):
        """(inputs, doubts): the host's variables named in names, templated as the roles would see them, as plain
        JSON types. One that names a variable not defined yet (a fact this run has not gathered) counts by its text.
        One that fails otherwise (a lookup that cannot read its file, a filter error) counts by its text too, and is
        a doubt: the host is not converged. One whose text cannot be read either (a vaulted value without the
        vault's password) raises InputError."""
        resolved, doubts = {}, []
        for name in names:
            value = task_vars[name]
            try:
                resolved[name] = canonical(self._templar.template(value))
            except Exception as exc:  # noqa: BLE001 - any templating error: the unresolved text counts
                if not isinstance(exc, AnsibleUndefinedVariable):
                    # The error's type only: its message may quote the template, and so a secret in it.
                    doubts.append(
                        "the role input %s cannot be resolved before the roles run (%s)" % (name, type(exc).__name__)
                    )
                try:
                    resolved[name] = {"unresolved": canonical(value), "error": type(exc).__name__}
                except Exception as again:  # noqa: BLE001
                    raise InputError("the role input %s cannot be read: %s" % (name, again)) from None
        return resolved, doubts

    def fingerprint(self, task_vars, inputs):
        groups = task_vars.get("groups") or {}
        variables = dict(
            inputs,
            group_names=task_vars.get("group_names") or [],
            groups={"build_hosts": groups.get("build_hosts") or []},
        )
        return desired_fingerprint(variables, collection_digest(), runtime="ansible-core %s" % ansible_version)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no effect since ansible-core 2.6

        state = self._task.args.get("state", "check")
        path = self._task.args.get("path", DEFAULT_PATH)
        given = self._task.args.get("fingerprint")
        if state not in STATES:
            result.update(failed=True, msg="state must be check or record, not %r" % (state,))
            return result
        if not isinstance(path, str) or not path.startswith("/"):
            result.update(failed=True, msg="path must be an absolute path on the host, not %r" % (path,))
            return result
        if given is not None and not is_sha256(given):
            result.update(
                failed=True,
                msg="fingerprint must be the sha256 (64 lower-case hex digits) a check of this module returned, "
                "not %r" % (given,),
            )
            return result

        # Given a fingerprint (the check's, before the roles set facts whose names the inputs share), only the
        # variables of the watch list are read.
        names = [name for name in declared_inputs() if name in task_vars] if given else role_inputs(task_vars)
        try:
            inputs, doubts = self.resolved_inputs(task_vars, names)
        except InputError as exc:
            result.update(failed=True, msg="%s: %s" % (task_vars.get("inventory_hostname", "this host"), exc))
            return result
        fingerprint = given or self.fingerprint(task_vars, inputs)
        try:
            watch = watch_list(inputs)
        except DeclarationError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        module_args = dict(watch, state=state, path=path, fingerprint=fingerprint)
        if state == "record":
            module_args["summary"] = summary(task_vars)
        try:
            result.update(self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result["fingerprint"] = fingerprint
        if state == "check" and doubts and not result.get("failed"):
            result.update(converged=False, reasons=doubts + list(result.get("reasons") or []))
            result.pop("summary", None)
            result.pop("stack", None)
        return result
