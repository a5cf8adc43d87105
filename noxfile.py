"""Compatibility matrix: ansible-test sanity and the plugins' unit tests on every ansible-core release that
meta/runtime.yml claims and this machine's Python can run, each in its own virtualenv.

    nox --envdir build/nox -s compat          # every such release (scripts/test.sh's sanity stage)
    nox --envdir build/nox -s "compat(core='2.19')"

A release this Python cannot run (ansible-core 2.20 needs Python 3.12) is listed as skipped, not tested.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import nox
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent
# The controller Pythons of each ansible-core release (its python_requires and supported range).
CONTROLLER_PYTHONS = {"2.18": ("3.11", "3.13"), "2.19": ("3.11", "3.13"), "2.20": ("3.12", "3.14")}
PYTHON = "%d.%d" % sys.version_info[:2]
COLLECTION = "ansible_collections/instinct/stack"

with open(ROOT / "meta" / "runtime.yml") as handle:
    CLAIMED = SpecifierSet(yaml.safe_load(handle)["requires_ansible"])
CORES = [core for core in CONTROLLER_PYTHONS if Version(core + ".0") in CLAIMED]

nox.options.sessions = ["compat"]
nox.options.error_on_missing_interpreters = True


def pinned_core():
    """The ansible-core version requirements-dev.txt pins (the one .venv, the unit stage and molecule run)."""
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        if line.startswith("ansible-core=="):
            return line.split("==", 1)[1].split()[0]
    return None


# What the plugins' tests drive besides ansible-core: huggingface_hub, the client instinct.stack.model_fetch runs,
# and safetensors with numpy, which write the fixture model (tests/harness/fixture_model.py).
PLUGIN_TEST_LIBRARIES = ("huggingface-hub", "safetensors", "numpy")


def pinned(names):
    """The requirements-dev.txt pins of names: the versions .venv and the unit stage run."""
    wanted = {name.lower() for name in names}
    return [
        line.strip()
        for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
        if line.split("==", 1)[0].strip().lower() in wanted
    ]


def collection_tree(session):
    """The tracked files at ansible_collections/instinct/stack, where ansible-test needs them, as a git repository."""
    top = Path(session.create_tmp()) / "tree"
    shutil.rmtree(top, ignore_errors=True)
    dest = top / COLLECTION
    listed = subprocess.run(
        [shutil.which("git") or "git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if name.startswith("collections/") or not (source.is_file() or source.is_symlink()):
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / name, follow_symlinks=False)
    session.run("git", "init", "-q", str(dest), external=True, silent=True)
    session.run("git", "-C", str(dest), "add", "-A", external=True, silent=True)
    return dest


@nox.session
@nox.parametrize("core", CORES)
def compat(session, core):
    low, high = (Version(bound) for bound in CONTROLLER_PYTHONS[core])
    if not low <= Version(PYTHON) <= high:
        session.skip(
            "ansible-core %s runs on Python %s to %s, not %s" % ((core,) + CONTROLLER_PYTHONS[core] + (PYTHON,))
        )
    session.install(
        "ansible-core==%s.*" % core, "pytest", "pyyaml", "setuptools", "wheel", *pinned(PLUGIN_TEST_LIBRARIES)
    )
    tree = collection_tree(session)
    with session.chdir(tree):
        session.run("ansible-test", "sanity", "--python", PYTHON, "--color", "no")
    # The collection's plugins as each release loads them; the CLI's tests run once, on the pinned release. The unit
    # stage (scripts/test.sh) already runs these on the pinned release itself, so a session that resolved to it
    # does not run them a second time.
    installed = (
        session.run("python", "-c", "import ansible.release; print(ansible.release.__version__)", silent=True) or ""
    ).strip()
    if installed == pinned_core():
        session.log("ansible-core %s is the pinned release: the unit stage runs the plugins' tests on it" % installed)
        return
    env = {"PYTHONPATH": str(tree.parents[2]), "PYTHONDONTWRITEBYTECODE": "1"}
    session.run("pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "unit" / "plugins"), env=env)
