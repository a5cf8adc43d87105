"""Where the instinct.stack collection is, and the environment ansible-runner needs to use it."""

import datetime
import importlib
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import ansible_runner

if TYPE_CHECKING:
    from ansible.config.manager import ConfigManager

COLLECTION_ENV = "INSTINCT_STACK_ROOT"
RUN_DIR_ENV = "INSTINCT_STACK_RUN_DIR"
NAMESPACE, NAME = "instinct", "stack"


class BadInput(Exception):
    """The user's input cannot run: exit code 2, with a message that says what to fix."""


def _is_collection(path: str | Path) -> bool:
    # A checkout has galaxy.yml; an installed collection (ansible-galaxy collection install) has MANIFEST.json.
    path = Path(path)
    return (path / "playbooks").is_dir() and ((path / "galaxy.yml").is_file() or (path / "MANIFEST.json").is_file())


def user_config_file() -> str | None:
    """The ansible.cfg ansible-playbook would read from the user's working directory, or None."""
    from ansible.config.manager import find_ini_config_file

    found = find_ini_config_file()
    return os.path.abspath(found) if found else None


def _config(config_file: str | None) -> "ConfigManager":
    """Ansible's reading of the user's configuration file (or of its defaults and environment without one)."""
    from ansible.config.manager import ConfigManager

    return ConfigManager(conf_file=config_file) if config_file else ConfigManager()


def configured_collections_paths(config_file: str | None = None) -> list[str]:
    """The collections paths of the user's configuration ($ANSIBLE_COLLECTIONS_PATH, their ansible.cfg, defaults)."""
    paths = _config(config_file).get_config_value("COLLECTIONS_PATHS") or []
    return [os.path.expanduser(str(path)) for path in paths]


def _search_paths(config_file: str | None) -> list[str]:
    """Directories that may hold ansible_collections/instinct/stack, in the order ansible-playbook searches them."""
    return configured_collections_paths(config_file) + [entry for entry in sys.path if entry]


def find_collection(config_file: str | None = None) -> tuple[Path, Path]:
    """(root, collections_path): the collection's directory and the directory that holds its ansible_collections.

    $INSTINCT_STACK_ROOT wins; then the checkout this package was installed from in editable mode (its
    collections/ansible_collections/instinct/stack links to the checkout); then a collection installed where
    ansible-playbook finds it (ansible-galaxy collection install into a collections path, or pip into
    site-packages).
    """
    explicit = os.environ.get(COLLECTION_ENV)
    if explicit:
        if not _is_collection(explicit):
            raise BadInput(
                "%s=%s holds no instinct.stack collection (no playbooks/ beside a galaxy.yml or MANIFEST.json)"
                % (COLLECTION_ENV, explicit)
            )
        return _with_collections_path(Path(explicit).resolve())
    checkout = Path(__file__).resolve().parents[2]
    if _is_collection(checkout) and (checkout / "collections" / "ansible_collections").is_dir():
        return checkout, checkout / "collections"
    searched = _search_paths(config_file)
    for base in searched:
        candidate = Path(base) / "ansible_collections" / NAMESPACE / NAME
        if _is_collection(candidate):
            return candidate.resolve(), Path(base).resolve()
    raise BadInput(
        "cannot find the instinct.stack collection: install it (ansible-galaxy collection install instinct.stack, "
        "or the release tarball) into a collections path, or set %s to its directory; searched %s"
        % (COLLECTION_ENV, ", ".join(searched[:6]) + (" ..." if len(searched) > 6 else ""))
    )


def _with_collections_path(root: Path) -> tuple[Path, Path]:
    parts = root.parts
    if len(parts) > 3 and parts[-3:-2] == ("ansible_collections",) and parts[-2:] == (NAMESPACE, NAME):
        return root, Path(*parts[:-3])
    if (root / "collections" / "ansible_collections" / NAMESPACE / NAME).exists():
        return root, root / "collections"
    raise BadInput(
        "%s=%s is not inside ansible_collections/%s/%s and has no collections/ link: ansible-playbook could not "
        "resolve instinct.stack from it" % (COLLECTION_ENV, root, NAMESPACE, NAME)
    )


def runner_envvars(
    collections_path: str | Path, config_file: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment for ansible-playbook under ansible-runner: the user's own configuration, plus only what the
    collection needs (its collections path ahead of the user's, and an inventory that does not parse as an error).
    """
    # ansible-playbook is found beside this interpreter, so an unactivated virtualenv works too.
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    collections = [str(collections_path)] + [
        entry for entry in configured_collections_paths(config_file) if os.path.abspath(entry) != str(collections_path)
    ]
    env = {
        "PATH": path,
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(collections),
        # An inventory source that does not parse would otherwise leave only the implicit localhost: a silent
        # success against nothing, or against the controller.
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
        "ANSIBLE_FORCE_COLOR": "0",
    }
    if config_file:
        env["ANSIBLE_CONFIG"] = config_file
    env.update(extra or {})
    return env


def default_ara_dir() -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "instinct-stack", "ara")


def ara_envvars(config_file: str | None = None, base_dir: str | None = None) -> dict[str, str]:
    """Environment that records the run with ARA's callback into a local SQLite database (ARA's offline client).

    The callback is added to the user's enabled callbacks and callback paths, not put in their place.
    """
    try:
        from ara.setup import callback_plugins
    except ImportError as exc:
        raise BadInput(
            "--record needs ARA: pip install 'instinct-stack[record]' (or 'ara[server]') beside this CLI"
        ) from exc
    base_dir = base_dir or default_ara_dir()
    os.makedirs(base_dir, mode=0o700, exist_ok=True)  # the records hold task results: the owner's alone
    manager = _config(config_file)
    enabled = [name for name in manager.get_config_value("CALLBACKS_ENABLED") or [] if name != "ara_default"]
    paths = [path for path in manager.get_config_value("DEFAULT_CALLBACK_PLUGIN_PATH") or [] if path]
    return {
        "ANSIBLE_CALLBACK_PLUGINS": os.pathsep.join([callback_plugins] + paths),
        "ANSIBLE_CALLBACKS_ENABLED": ",".join(enabled + ["ara_default"]),
        "ARA_API_CLIENT": "offline",
        "ARA_BASE_DIR": base_dir,
    }


def collection_module(name: str) -> ModuleType:
    """Import plugins/module_utils/NAME of the collection, the one place its logic lives.

    Through ansible-core's collection loader, as ansible-playbook imports a collection's code: the first call installs
    it with the collection's collections path ahead of the configured ones (once per process, as ansible's own
    commands do; a loader already in place, ansible-test's for one, is kept).
    """
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader([str(find_collection()[1])])
    return importlib.import_module("ansible_collections.%s.%s.plugins.module_utils.%s" % (NAMESPACE, NAME, name))


def default_runs_dir() -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.environ.get(RUN_DIR_ENV) or os.path.join(state, "instinct-stack", "runs")


def new_run_dir(command: str, runs_dir: str | None = None) -> str:
    """A fresh directory for one run's ansible-runner artifacts, readable by its owner only."""
    runs_dir = runs_dir or default_runs_dir()
    os.makedirs(runs_dir, mode=0o700, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(100):
        path = os.path.join(runs_dir, "%s-%s%s" % (stamp, command, "-%d" % attempt if attempt else ""))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise BadInput("cannot create a run directory in %s" % runs_dir)


def check_inventory(inventory: Iterable[str]) -> None:
    """Refuse an inventory path that does not exist before anything runs (ansible would warn and go on)."""
    for source in inventory:
        if "," in source and not os.path.exists(source):
            continue  # a host list such as "gpu1,gpu2,"
        if not os.path.exists(source):
            raise BadInput("inventory %s does not exist (give -i a file, a directory or 'host1,host2,')" % source)


def run_playbook(
    playbook: str,
    inventory: str | Iterable[str],
    limit: str | None = None,
    extravars: Mapping[str, Any] | None = None,
    cmdline_args: Iterable[str] | None = None,
    event_handler: Callable[[dict[str, Any]], bool] | None = None,
    run_dir: str | None = None,
    passwords: Mapping[str, str] | None = None,
    envvars: Mapping[str, str] | None = None,
    record: str | None = None,
) -> tuple[list[dict[str, Any]], int, str, str]:
    """Run one of the collection's playbooks (a path relative to its root) through ansible-runner.

    Runs in the user's working directory, so relative paths and their ansible.cfg mean what they mean to
    ansible-playbook there. Keeps the runner's artifacts (job events, stdout) in run_dir (a new one under
    default_runs_dir() when None). With record (an ARA base directory), ARA records the run there.
    Returns (events, rc, stdout, run_dir).
    """
    config_file = user_config_file()
    if record:
        envvars = dict(envvars or {}, **ara_envvars(config_file, record))
    root, collections_path = find_collection(config_file)
    inventory = [inventory] if isinstance(inventory, str) else list(inventory)
    check_inventory(inventory)
    if run_dir:
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
        run_dir = os.path.abspath(run_dir)
    else:
        run_dir = new_run_dir(Path(playbook).stem)
    cmdline = list(cmdline_args or [])
    for source in inventory[1:]:
        cmdline += ["-i", os.path.abspath(source) if os.path.exists(source) else source]
    first = inventory[0]
    runner = ansible_runner.run(
        private_data_dir=run_dir,
        project_dir=os.getcwd(),
        playbook=str(root / playbook),
        inventory=os.path.abspath(first) if os.path.exists(first) else first,
        limit=limit,
        cmdline=shlex.join(cmdline) if cmdline else None,
        extravars=extravars or {},
        envvars=runner_envvars(collections_path, config_file, envvars),
        passwords=passwords or {},
        # Keep the prompts' answers (and the environment) in memory: by default ansible-runner writes them to
        # RUN_DIR/env/passwords, which outlives the run.
        suppress_env_files=True,
        quiet=True,
        event_handler=event_handler,
    )
    return list(runner.events), runner.rc, runner.stdout.read(), run_dir
