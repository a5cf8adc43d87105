# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converged fast path: whether a host is still as the last whole rollout left it, so site.yml can skip it.

A whole rollout that ends without failing on a host records there (/var/lib/instinct-stack/converged.json, 0600)
what it applied and what it left:

- fingerprint: a sha256 of the host's role inputs (every variable named rocm_*, toolchain_*, ldconfig_*, build_*,
  pytorch_*, triton_*, vllm_* (vllm_service_* included) or instinct_*, resolved; the run's own controls
  instinct_rollout_lock* and instinct_converged* are left out), its groups, the build_hosts group, and a digest of
  the collection's own files (roles/, plugins/, playbooks/) with the ansible-core version that runs them. Secrets
  among the inputs (an instance's api_key) go into that hash and nowhere else.
- files: a sha256 per file the roles manage or decide from (watch_list(): one list, here), null for an absent one;
  links: where the links the roles set resolve to; units: the active units of the services; current: the stack the
  current link names; summary: the host's gfx arch and pending reboot, for the run's report.

check() compares a record with the fingerprint wanted now and what the host shows now (observe()): any difference,
or any doubt (no record, an unreadable one, a file that cannot be read, units that cannot be listed), is "not
converged", with short reasons. What it cannot see: anything the roles would only learn by running, such as a git
branch or tag that moved on the mirror (the inputs name the ref, not the commit it resolves to), or a package
changed by hand that no watched file shows.

Controller side (pure): role_inputs(), desired_fingerprint(), tree_digest(), watch_list(), summary(), check().
Host side: observe(), read_record(), write_record().
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import glob
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping

FORMAT = 1
DEFAULT_PATH = "/var/lib/instinct-stack/converged.json"
CHECK_VARIABLE = "instinct_converged_check"
# The role inputs: every variable with one of these prefixes (vllm_ covers vllm_service_).
PREFIXES = ("rocm_", "toolchain_", "ldconfig_", "build_", "pytorch_", "triton_", "vllm_", "models_", "instinct_")
# The run's own controls and results, which change from run to run without changing what a host should be: the
# rollout lock's path, break switch and registered result; the fast path's own switch, record path and results.
RUN_CONTROLS = ("instinct_rollout_lock", "instinct_converged")
# The collection's directories whose files make the tree digest.
TREE_PARTS = ("roles", "plugins", "playbooks")
# roles/common/defaults: instinct_stack_root. The check runs in a play without roles, before any role's defaults load,
# so it knows the default itself (tests/unit/plugins/module_utils/test_converged.py holds the two equal).
DEFAULT_STACK_ROOT = "/opt/instinct-stack"
# Each role declares what it manages (roles/ROLE/meta/managed.yml); watch_list() merges the declarations' compared
# parts, whose "{{ NAME }}" placeholders name role variables.
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
DECLARATION = os.path.join("meta", "managed.yml")
COMPARED = ("files", "links", "units", "packages", "stack_root")
PLACEHOLDER = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
EMBEDDED = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
DIRECTORY = "directory"
UNREADABLE = "unreadable"


# Controller side ---------------------------------------------------------------------------------------------------


def is_role_input(name):
    return name.startswith(PREFIXES) and not name.startswith(RUN_CONTROLS)


def role_inputs(variables):
    """The names of variables that are role inputs, sorted."""
    return sorted(name for name in variables if is_role_input(name))


def canonical(value):
    """value as plain JSON types, mappings with sorted string keys; anything else by its text."""
    if isinstance(value, Mapping):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value
    return str(value)


def canonical_json(value):
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def desired_fingerprint(variables, tree_digest, runtime=""):
    """The sha256 (hex) of what a host should be: its role inputs (resolved values), its groups, the build hosts,
    and the collection's files (tree_digest) with what runs them (runtime, e.g. the ansible-core version).

    variables: the host's variables, the role inputs already resolved (templated); the others are not read besides
    group_names and groups['build_hosts'].
    """
    groups = variables.get("groups") or {}
    document = {
        "format": FORMAT,
        "inputs": {name: variables[name] for name in role_inputs(variables)},
        "group_names": sorted(str(name) for name in variables.get("group_names") or []),
        "build_hosts": list(groups.get("build_hosts") or []) if isinstance(groups, Mapping) else [],
        "tree": tree_digest,
        "runtime": runtime,
    }
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def tree_digest(root, parts=TREE_PARTS):
    """A sha256 over the collection's own files under root/PART (their paths and contents), bytecode left out."""
    digest = hashlib.sha256()
    for part in parts:
        base = os.path.join(root, part)
        for directory, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(name for name in dirnames if name != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root)
                digest.update(relative.encode("utf-8") + b"\0")
                digest.update((file_digest(path) or "absent").encode("ascii") + b"\0")
    return digest.hexdigest()


class DeclarationError(ValueError):
    """A role's declaration of what it manages cannot be read (roles/ROLE/meta/managed.yml)."""


def _text(value, default):
    value = default if value in (None, "") else value
    return str(value)


def load_declarations(roles_dir=ROLES_DIR):
    """Every role's declaration of what it manages (roles/ROLE/meta/managed.yml), by role, and the values its
    placeholders fall back to: every role's defaults and vars, the shared ones (roles/common) among them."""
    import yaml  # on the controller only (the action plugin): a host never reads the declarations

    declarations, defaults = {}, {}
    for role in sorted(os.listdir(roles_dir)):
        for part in ("defaults", "vars"):
            path = os.path.join(roles_dir, role, part, "main.yml")
            if os.path.isfile(path):
                with open(path) as handle:
                    defaults.update(yaml.safe_load(handle) or {})
        path = os.path.join(roles_dir, role, DECLARATION)
        if os.path.isfile(path):
            with open(path) as handle:
                declarations[role] = yaml.safe_load(handle) or {}
    return declarations, defaults


def _resolve(name, variables, defaults, role, seen=()):
    """A placeholder's value: the host's (variables), else the roles' default, which may name one variable itself."""
    if name in variables:
        return variables[name]
    if name not in defaults or name in seen:
        raise DeclarationError("%s's declaration names %s, which no role defines" % (role, name))
    value = defaults[name]
    if isinstance(value, str) and "{{" in value:
        whole = PLACEHOLDER.match(value)
        if not whole:
            raise DeclarationError(
                "%s's declaration names %s, whose default is an expression: name a variable with a plain default"
                % (role, name)
            )
        return _resolve(whole.group(1), variables, defaults, role, seen + (name,))
    return value


def _render(values, variables, defaults, role):
    """The declaration's list with its placeholders filled in: a list variable alone as an item adds its items."""
    rendered = []
    for value in values if isinstance(values, list) else [values]:
        value = str(value)
        whole = PLACEHOLDER.match(value)
        if whole:
            found = _resolve(whole.group(1), variables, defaults, role)
            items = found if isinstance(found, (list, tuple)) else [found]
            rendered += [_text(item, "") for item in items]
            continue
        rendered.append(
            EMBEDDED.sub(lambda match: _text(_resolve(match.group(1), variables, defaults, role), ""), value)
        )
    return rendered


def declared_inputs(declarations=None, defaults=None):
    """The variables the declarations' compared parts read, with those their defaults name in turn, sorted."""
    if declarations is None:
        declarations, defaults = load_declarations()
    defaults = defaults or {}
    names = set()
    for declaration in declarations.values():
        for key in COMPARED:
            for value in declaration.get(key) or []:
                names.update(EMBEDDED.findall(str(value)))
    pending = list(names)
    while pending:
        value = defaults.get(pending.pop())
        for name in EMBEDDED.findall(value) if isinstance(value, str) else []:
            if name not in names:
                names.add(name)
                pending.append(name)
    return sorted(names)


def _unique(values):
    return list(dict.fromkeys(values))


def watch_list(variables, declarations=None, defaults=None):
    """What the record keeps and the check compares, from the host's resolved variables and every role's declaration
    of what it manages (roles/ROLE/meta/managed.yml): the roles' lists merged.

    Returns files (paths and globs, each file's sha256 is kept; a literal path that is absent is kept as null, a
    glob keeps what it matches; a declared package adds its dpkg file lists), links (paths and globs whose resolved
    targets are kept), units (systemctl patterns whose active units are kept) and stack_root (its current link's
    target). A variable the inventory sets counts with its value; otherwise the role's default does.
    """
    if declarations is None:
        declarations, defaults = load_declarations()
    defaults = defaults or {}
    merged = {"files": [], "links": [], "units": [], "packages": [], "stack_root": []}
    for role in sorted(declarations):
        for key in merged:
            merged[key] += _render(declarations[role].get(key) or [], variables, defaults, role)
    packages = sorted(set(merged["packages"]))
    files = list(merged["files"])
    for package in packages:
        files += ["/var/lib/dpkg/info/%s.list" % package, "/var/lib/dpkg/info/%s:*.list" % package]
    roots = _unique(merged["stack_root"])
    if len(roots) > 1:
        raise DeclarationError("the declarations name several stack roots: %s" % ", ".join(roots))
    stack_root = (roots[0] if roots else DEFAULT_STACK_ROOT).rstrip("/") or "/"
    return {
        # A value with a trailing slash (vllm_stack_root: /srv/stack/) leaves no double slash in a path.
        "files": _unique(os.path.normpath(path) for path in files),
        "links": _unique(os.path.normpath(path) for path in merged["links"]),
        "units": _unique(merged["units"]),
        "stack_root": stack_root,
    }


def _driver(variables):
    """The last driver check's result among the rocm role's registered ones (after a reboot, the second)."""
    for name in ("rocm_driver_after_reboot", "rocm_driver"):
        result = variables.get(name)
        if isinstance(result, Mapping) and "reboot_pending" in result:
            return result
    return None


def summary(variables):
    """What the run's report shows of a host the fast path skips, from the rocm role's facts and results."""
    driver = _driver(variables)
    gfx = variables.get("rocm_gfx_arch")
    return canonical(
        {
            "gfx_arch": list(gfx) if isinstance(gfx, (list, tuple)) else None,
            "pytorch_rocm_arch": variables.get("rocm_pytorch_rocm_arch") or None,
            "reboot": (
                {
                    "pending": bool(driver.get("reboot_pending")),
                    "load_failed": bool(driver.get("load_failed")),
                    "reason": str(driver.get("reason") or ""),
                }
                if driver
                else None
            ),
        }
    )


def _verified_reason(path, current):
    """'stacks/KEY has no .verified' for the current link's record, else None."""
    if not path.endswith("/current/.verified"):
        return None
    return "%s has no .verified" % ("stacks/" + os.path.basename(current) if current else "the current stack")


def check(record, fingerprint, observed):
    """(converged, reasons): whether the host is as record says and wanted as fingerprint, by what observed shows.

    Pure. record: a record as read (None: there is none; a dict with "unreadable": it could not be read).
    observed: what observe() returned on the host now. Every difference is one short reason; any doubt is one too.
    """
    if record is None:
        return False, ["no record"]
    if not isinstance(record, Mapping) or record.get("unreadable"):
        reason = record.get("unreadable") if isinstance(record, Mapping) else "not a JSON object"
        return False, ["the record is unreadable (%s)" % reason]
    if record.get("format") != FORMAT or not all(key in record for key in ("fingerprint", "files", "links", "units")):
        return False, ["the record is of another format"]
    reasons = []
    if record["fingerprint"] != fingerprint:
        reasons.append("the inputs changed")
    current = observed.get("current")
    if record.get("current") != current:
        reasons.append("current moved")
    was, now = record["files"] or {}, observed.get("files") or {}
    for path in sorted(set(was) | set(now)):
        before, after = was.get(path, "missing"), now.get(path, "missing")
        if after == UNREADABLE:
            reasons.append("%s cannot be read" % path)
        elif before == after:
            continue
        elif after in (None, "missing") and _verified_reason(path, current):
            reasons.append(_verified_reason(path, current))
        elif before in (None, "missing"):
            reasons.append("%s appeared" % path)
        elif after in (None, "missing"):
            reasons.append("%s is gone" % path)
        else:
            reasons.append("%s changed" % path)
    was, now = record["links"] or {}, observed.get("links") or {}
    for path in sorted(set(was) | set(now)):
        if was.get(path, "missing") != now.get(path, "missing"):
            name = os.path.basename(path)
            reasons.append("%s moved" % (name if name == "previous" else path))
    if observed.get("units") is None:
        reasons.append("the units cannot be listed (%s)" % (observed.get("units_error") or "no systemctl"))
    elif record["units"] is None:
        reasons.append("the record has no units")
    else:
        for unit in sorted(set(record["units"]) - set(observed["units"])):
            reasons.append("%s is not active" % unit)
        for unit in sorted(set(observed["units"]) - set(record["units"])):
            reasons.append("%s became active after the record" % unit)
    return not reasons, reasons


def make_record(fingerprint, observed, host_summary=None, now=None):
    """The record of a host that ran the whole rollout: the fingerprint, what observe() showed, the summary."""
    return {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now)),
        "files": dict(observed.get("files") or {}),
        "links": dict(observed.get("links") or {}),
        "units": observed.get("units"),
        "current": observed.get("current"),
        "summary": host_summary or {},
    }


def same_record(one, other):
    """The two records say the same, whenever they were written."""
    if not isinstance(one, Mapping) or not isinstance(other, Mapping):
        return False
    return {k: v for k, v in one.items() if k != "recorded_at"} == {
        k: v for k, v in other.items() if k != "recorded_at"
    }


# Host side ---------------------------------------------------------------------------------------------------------


def file_digest(path):
    """The sha256 of path's content; DIRECTORY for a directory, None when absent, UNREADABLE when it cannot be read."""
    try:
        if os.path.isdir(path):
            return DIRECTORY
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return None
        return UNREADABLE


def link_target(path):
    """Where path resolves to (readlink -f), None when it, or what it names, does not exist."""
    target = os.path.realpath(path)
    return target if os.path.exists(target) else None


def parse_units(output):
    """The unit names of `systemctl list-units --plain --no-legend` output."""
    return sorted({line.split()[0] for line in output.splitlines() if line.strip()})


def read_stack(stack_root):
    """The current stack's .verified record without its lock's package list (the report shows the versions)."""
    try:
        with open(os.path.join(stack_root, "current", ".verified")) as handle:
            stack = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    if not isinstance(stack, dict):
        return None
    stack.pop("lock", None)
    return stack


def observe(watch, list_units):
    """What the host shows now of watch (watch_list()'s files, links, units and stack_root).

    list_units(patterns) returns (active unit names, None) or (None, why they cannot be listed).
    """
    files = {}
    for pattern in watch.get("files") or []:
        if glob.has_magic(pattern):
            for path in sorted(glob.glob(pattern)):
                files[path] = file_digest(path)
        else:
            files[pattern] = file_digest(pattern)
    links = {}
    for pattern in watch.get("links") or []:
        # A glob (an instance's model link, one per instance) keeps the links it matches.
        for path in sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]:
            links[path] = link_target(path)
    stack_root = watch.get("stack_root") or DEFAULT_STACK_ROOT
    current_link = os.path.join(stack_root, "current")
    current = link_target(current_link) if os.path.lexists(current_link) else None
    units, units_error = (None, None)
    if watch.get("units"):
        units, units_error = list_units(list(watch["units"]))
    else:
        units = []
    return {"files": files, "links": links, "units": units, "units_error": units_error, "current": current}


def read_record(path):
    """The record at path; None when there is none; {"unreadable": why} when it cannot be read or parsed."""
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        return {"unreadable": str(exc)}
    try:
        record = json.loads(content.decode("utf-8"))
    except ValueError as exc:
        return {"unreadable": "not JSON: %s" % exc}
    return record if isinstance(record, dict) else {"unreadable": "not a JSON object"}


def write_record(path, record):
    """Write record to path atomically: a 0600 temporary file beside it, synced, renamed over it, directory synced."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    descriptor, staging = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(descriptor, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)
            json.dump(record, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(staging, path)
    except Exception:
        if os.path.lexists(staging):
            os.unlink(staging)
        raise
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
