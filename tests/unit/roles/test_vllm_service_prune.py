"""The vllm_service role's pruning (tasks/prune.yml), run by ansible-playbook on a temporary stack root.

Kept: the current stack, the previous one, the vllm_service_stack_keep newest other verified stacks (by their
.verified record's time), and every directory without a .verified record (a stack being installed).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PRUNE = ROOT / "roles" / "vllm_service" / "tasks" / "prune.yml"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def stacks(root, ages):
    """stacks/NAME for each name, with a .verified record AGE hours old (None: no record, still installing)."""
    now = time.time()
    for name, age in ages.items():
        stack = root / "stacks" / name
        (stack / "venv" / "bin").mkdir(parents=True)
        # A record deeper in the tree is not a stack's.
        (stack / "venv" / ".verified").write_text("{}")
        if age is not None:
            (stack / ".verified").write_text("{}")
            os.utime(stack / ".verified", (now - age * 3600, now - age * 3600))


def prune(tmp_path, current, previous, keep, switched_from=None, from_verified=True):
    root = tmp_path / "root"
    facts = {
        "vllm_service_stack": str(root / "current"),
        "vllm_service_to": str(root / "stacks" / current),
        "vllm_service_from": str(root / "stacks" / (switched_from or current)),
        "vllm_service_from_verified": from_verified,
        "vllm_service_previous_from": str(root / "stacks" / previous) if previous else "",
        "vllm_service_stack_keep": keep,
        "ansible_python_interpreter": sys.executable,
    }
    playbook = tmp_path / "prune.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Prune",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars": facts,
                    "tasks": [{"name": "Prune", "ansible.builtin.include_tasks": str(PRUNE)}],
                }
            ]
        )
    )
    env = dict(
        os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections")
    )
    proc = subprocess.run(
        [str(PLAYBOOK), "-i", "localhost,", str(playbook)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return sorted(os.listdir(root / "stacks")), json.loads(proc.stdout)["stats"]["localhost"]["changed"]


@pytest.fixture
def six(tmp_path):
    # a is the newest record, f the oldest; g is being installed.
    stacks(tmp_path / "root", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": None})
    return tmp_path


def test_keeps_the_current_and_the_newest_others(six):
    left, changed = prune(six, current="a", previous="b", keep=2)
    assert left == ["a", "b", "c", "g"]
    assert changed == 1


def test_never_removes_the_previous_stack_however_old(six):
    left, _changed = prune(six, current="a", previous="f", keep=1)
    assert left == ["a", "b", "f", "g"]


def test_never_removes_the_stack_switched_away_from(six):
    # The previous link now names the stack this run switched away from (e), whatever it named before (f).
    left, _changed = prune(six, current="a", previous="f", keep=0, switched_from="e")
    assert left == ["a", "e", "f", "g"]


def test_the_current_stack_counts_whatever_its_age(six):
    left, _changed = prune(six, current="f", previous="", keep=2)
    assert left == ["a", "b", "f", "g"]


def test_a_second_prune_changes_nothing(six):
    prune(six, current="a", previous="b", keep=2)
    left, changed = prune(six, current="a", previous="b", keep=2)
    assert left == ["a", "b", "c", "g"] and changed == 0
