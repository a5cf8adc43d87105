"""benchmarks/task_cost.py: each kind's playbook parses and runs, and the figures come out per task run."""

import subprocess
import sys

import pytest
import yaml

from benchmarks import task_cost


@pytest.mark.parametrize("kind", sorted(task_cost.KINDS))
def test_each_kind_is_a_playbook_of_that_many_tasks_of_its_module(kind):
    (play,) = yaml.safe_load(task_cost.playbook(kind, 3, become=True))
    assert play["become"] is True and play["gather_facts"] is False
    assert len(play["tasks"]) == 3
    modules = {next(key for key in task if key.startswith("ansible.builtin.")) for task in play["tasks"]}
    assert len(modules) == 1
    assert all(task.get("when") is False for task in play["tasks"]) == (kind == "skipped")


def test_no_kind_is_a_playbook_that_does_nothing():
    (play,) = yaml.safe_load(task_cost.playbook(None, 3, become=False))
    assert play["tasks"] == [{"name": "Nothing", "ansible.builtin.meta": "noop"}]


def test_a_local_run_reports_a_figure_per_kind(capsys):
    assert task_cost.main(["--hosts", "2", "--tasks", "2", "--kinds", "skipped", "template"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("no task: controller CPU")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert set(rows) == {"skipped", "template"}
    assert all(float(cpu) > 0 for _wall, cpu, _per_run in rows.values())


def test_the_module_runs_as_a_script():
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.task_cost", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--ssh" in output
