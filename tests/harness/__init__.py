"""The test harness, one package: the systemd-nspawn machines (nspawnctl) and qemu guests (vmctl) of the molecule
scenarios, the fixture mirror (build_mirror), the hosts outside molecule that benchmarks/scale.py and
scripts/demo_target.py boot (fixture_hosts), ansible-playbook run from the controller (playbook_runner), and the
fixture Hub (fixture_hub) with its small model written with safetensors (fixture_model).

Imported as tests.harness with the checkout's root on Python's path, as pytest puts it there (pytest.ini's
pythonpath, for the unit tests and the molecule verifiers alike) and as `python -m` from the root does; its tools run as
modules, `python -m tests.harness.nspawnctl ...`, with the checkout's root as the working directory or on PYTHONPATH
(argv and env below; the molecule playbooks' molecule_python, molecule/shared/vars/nspawn.yml). Run them with the
project's .venv python: build_mirror imports the instinct-stack package.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def argv(tool, *args):
    """The command line that runs tests.harness.TOOL (nspawnctl, vmctl, build_mirror) with this interpreter."""
    return [sys.executable, "-m", "%s.%s" % (__name__, tool), *args]


def env(base=None):
    """base (default: this process's environment) with the checkout's root first on PYTHONPATH: a child Python finds
    tests.harness from any working directory."""
    base = dict(os.environ if base is None else base)
    path = [ROOT] + [entry for entry in base.get("PYTHONPATH", "").split(os.pathsep) if entry and entry != ROOT]
    base["PYTHONPATH"] = os.pathsep.join(path)
    return base
