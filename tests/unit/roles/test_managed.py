"""Each role declares what it manages (roles/ROLE/meta/managed.yml), and the converged check merges the declarations
(module_utils/converged.py). A task that writes a file, a link or a unit its role's declaration does not name, in what
it compares or in what it leaves out on purpose (not_compared, with why), fails here: the fast path would not see a
host drift there."""

import fnmatch
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.instinct.stack.plugins.module_utils import converged

ROOT = Path(__file__).resolve().parents[3]
ROLES = sorted(path.name for path in (ROOT / "roles").iterdir() if (path / "tasks").is_dir())
DECLARATIONS, DEFAULTS = converged.load_declarations(str(ROOT / "roles"))
EXPRESSION = re.compile(r"\{\{(.*?)\}\}")
# What a task writes, by module: the option that names it, and how it becomes a path (or a unit).
WRITERS = {
    "ansible.builtin.template": ("files", ("dest",), "%s"),
    "ansible.builtin.copy": ("files", ("dest",), "%s"),
    "ansible.builtin.file": ("files", ("path", "dest", "name"), "%s"),
    "ansible.builtin.lineinfile": ("files", ("path", "dest"), "%s"),
    "ansible.builtin.blockinfile": ("files", ("path", "dest"), "%s"),
    "ansible.builtin.get_url": ("files", ("dest",), "%s"),
    "ansible.builtin.unarchive": ("files", ("dest",), "%s"),
    "ansible.builtin.git": ("files", ("dest",), "%s"),
    "ansible.builtin.pip": ("files", ("virtualenv",), "%s"),
    "ansible.builtin.deb822_repository": ("files", ("name",), "/etc/apt/sources.list.d/%s.sources"),
    "community.general.alternatives": ("files", ("name",), "/var/lib/dpkg/alternatives/%s"),
    "ansible.builtin.systemd_service": ("units", ("name",), "%s"),
}


def tasks(node):
    for item in node if isinstance(node, list) else []:
        if isinstance(item, dict):
            yield item
            for key in ("block", "rescue", "always"):
                yield from tasks(item.get(key))


def written(role):
    """(kind, target, task name) of every task of role that writes a file or starts a unit."""
    found = []
    for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
        for task in tasks(yaml.safe_load(path.read_text())):
            for module, (kind, options, form) in WRITERS.items():
                args = task.get(module)
                if not isinstance(args, dict):
                    continue
                target = next((args[option] for option in options if args.get(option)), None)
                if target is not None:
                    found.append((kind, form % target, "%s: %s" % (path.name, task.get("name"))))
                if module == "community.general.alternatives" and args.get("link"):
                    found.append(("links", args["link"], "%s: %s" % (path.name, task.get("name"))))
    return found


def normalized(text):
    """The text with each expression's whitespace made plain, to compare a task's target with a declared one."""
    return EXPRESSION.sub(lambda match: "{{ %s }}" % " ".join(match.group(1).split()), str(text))


def as_glob(text, role):
    """The text with each plain variable as its default and any other expression as *."""

    def value(match):
        name = match.group(1).strip()
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            try:
                found = converged._resolve(name, {}, DEFAULTS, role)
            except converged.DeclarationError:
                return "*"
            return "*" if isinstance(found, (list, dict)) else str(found)
        return "*"

    return EXPRESSION.sub(value, str(text))


def declared(role, kind):
    entries = list(DECLARATIONS.get(role, {}).get(kind) or [])
    if kind == "files":
        entries += DECLARATIONS.get(role, {}).get("links") or []
    return entries + [entry["path"] for entry in DECLARATIONS.get(role, {}).get("not_compared") or []]


def covered(target, entries, role):
    if normalized(target) in {normalized(entry) for entry in entries}:
        return True
    glob = as_glob(target, role)
    if glob.strip("*/") == "":  # nothing but expressions: only the same expression, declared, covers it
        return False
    # The declared entry falls within what the task may write, or the task's target within a declared glob.
    return any(
        fnmatch.fnmatchcase(as_glob(entry, role), glob) or fnmatch.fnmatchcase(glob, as_glob(entry, role))
        for entry in entries
    )


@pytest.mark.parametrize("role", ROLES)
def test_every_file_a_role_writes_is_in_its_declaration(role):
    missing = [
        "%s %s (%s)" % (kind, target, task)
        for kind, target, task in written(role)
        if not covered(target, declared(role, "units" if kind == "units" else "files"), role)
    ]
    assert missing == [], "add these to roles/%s/meta/managed.yml, compared or not_compared with why" % role


@pytest.mark.parametrize("role", [role for role in ROLES if role != "common"])
def test_every_role_declares_and_says_why_it_leaves_something_out(role):
    declaration = DECLARATIONS[role]
    assert set(declaration) <= {*converged.COMPARED, "not_compared"}, set(declaration)
    for entry in declaration.get("not_compared") or []:
        assert set(entry) == {"path", "why"} and len(entry["why"]) > 20, entry


def test_a_file_no_declaration_names_is_found():
    # The check itself can fail: a task writing where no declaration looks.
    entries = declared("ldconfig", "files")
    assert not covered("/etc/ld.so.conf.d/30-other.conf", entries, "ldconfig")
    assert covered("/etc/ld.so.conf.d/20-instinct-rocm.conf", entries, "ldconfig")
    assert not covered("{{ item }}", entries, "ldconfig")
