"""benchmarks/task_floor.py: the playbooks and inventories it writes, and one small measurement end to end."""

import yaml

from benchmarks import task_floor


def test_each_kind_writes_a_playbook_of_that_many_tasks(tmp_path):
    for kind in task_floor.KINDS:
        path = tmp_path / (kind + ".yml")
        task_floor.write_playbook(str(path), task_floor.kind_tasks(kind, 3))
        (play,) = yaml.safe_load(path.read_text())
        assert play["gather_facts"] is False
        assert [task["name"] for task in play["tasks"]] == ["Task 0", "Task 1", "Task 2"]
        assert all(set(task) - {"name"} == set(task_floor.KINDS[kind]) for task in play["tasks"])


def test_the_inventory_names_local_hosts(tmp_path):
    path = tmp_path / "hosts.ini"
    task_floor.write_inventory(str(path), 3)
    lines = path.read_text().splitlines()
    assert lines[0] == "[floor]"
    assert [line.split()[0] for line in lines[1:]] == ["floor-1", "floor-2", "floor-3"]
    assert all("ansible_connection=local" in line for line in lines[1:])


def test_a_measurement_runs_ansible_playbook_and_reports_a_cost_per_task_and_host(tmp_path):
    row = task_floor.measure(str(tmp_path), "skipped", 10, 4, 5, 1)
    assert row["kind"] == "skipped"
    # Four hosts cost more than one: ansible-core forks a worker per host and task.
    assert row["cpu_n"] > row["cpu_1"] > 0
    assert row["ms_per_task_host"] > 0


def test_polling_costs_more_at_a_shorter_interval(tmp_path):
    frequent = task_floor.poll_cost(str(tmp_path), 0.0005, 3, 1)
    rare = task_floor.poll_cost(str(tmp_path), 0.05, 3, 1)
    assert frequent > rare
