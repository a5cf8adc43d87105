"""Where the instinct.stack collection is, and the environment ansible-runner needs to use it."""

import importlib
import os
import sys
import tempfile
from pathlib import Path

import ansible_runner

COLLECTION_ENV = "INSTINCT_STACK_ROOT"


def collection_root():
    """The checkout or installed tree that holds galaxy.yml for instinct.stack.

    $INSTINCT_STACK_ROOT wins; otherwise the checkout this package was installed from (editable install).
    """
    candidates = [os.environ.get(COLLECTION_ENV), Path(__file__).resolve().parents[2]]
    for candidate in candidates:
        if candidate and (Path(candidate) / "galaxy.yml").is_file() and (Path(candidate) / "playbooks").is_dir():
            return Path(candidate).resolve()
    raise SystemExit(
        "cannot find the instinct.stack collection: set %s to the directory holding its galaxy.yml" % COLLECTION_ENV
    )


def runner_envvars(root):
    """Environment for ansible-playbook under ansible-runner: the collection's own ansible.cfg and collection path."""
    # ansible-playbook is found beside this interpreter, so an unactivated virtualenv works too.
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    return {
        "PATH": path,
        "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(root / "collections"),
        "ANSIBLE_FORCE_COLOR": "0",
    }


def collection_module(name):
    """Import plugins/module_utils/NAME of the collection, the one place its logic lives."""
    path = str(collection_root() / "collections")
    if path not in sys.path:
        sys.path.append(path)
    return importlib.import_module("ansible_collections.instinct.stack.plugins.module_utils." + name)


def run_playbook(playbook, inventory, limit=None, extravars=None, cmdline=None, event_handler=None, root=None):
    """Run one of the collection's playbooks (a path relative to its root) through ansible-runner.

    Returns (events, rc, stdout) once it has finished.
    """
    root = root or collection_root()
    with tempfile.TemporaryDirectory(prefix="instinct-stack-") as private_data_dir:
        runner = ansible_runner.run(
            private_data_dir=private_data_dir,
            project_dir=str(root),
            playbook=str(root / playbook),
            inventory=str(Path(inventory).resolve()),
            limit=limit,
            cmdline=cmdline,
            extravars=extravars or {},
            envvars=runner_envvars(root),
            quiet=True,
            event_handler=event_handler,
        )
        return list(runner.events), runner.rc, runner.stdout.read()
