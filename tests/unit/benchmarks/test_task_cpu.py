"""benchmarks/callback_plugins/task_cpu.py and benchmarks/task_cpu.py: each task's controller CPU, by host."""

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import task_cpu

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = """
- name: Two plays' worth of tasks
  hosts: all
  gather_facts: false
  tasks:
    - name: Set a fact
      ansible.builtin.set_fact:
        fact: 1
    - name: Skip on one host
      ansible.builtin.set_fact:
        other: 1
      when: inventory_hostname == 'h1'
    - name: Loop on both
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: [1, 2]
"""


def test_the_callback_writes_each_tasks_cpu_and_its_results_per_host(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.ini").write_text(
        "".join(
            "%s ansible_connection=local ansible_python_interpreter=%s\n" % (h, sys.executable) for h in ("h1", "h2")
        )
    )
    out = tmp_path / "cpu.json"
    env = dict(
        os.environ,
        ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "benchmarks" / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="task_cpu",
        INSTINCT_TASK_CPU_FILE=str(out),
    )
    subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "hosts.ini", "play.yml"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    entries = json.loads(out.read_text())
    assert [entry["task"] for entry in entries] == ["Set a fact", "Skip on one host", "Loop on both"]
    assert all(entry["cpu"] > 0 for entry in entries)
    assert entries[1]["hosts"] == {"h1": {"ok": 1}, "h2": {"skipped": 1}}
    assert entries[2]["hosts"]["h1"] == {"item": 2, "ok": 1}
    assert entries[0]["action"] == "ansible.builtin.set_fact"


def test_the_summary_splits_a_task_over_its_hosts_and_sums_by_role():
    entries = [
        {
            "play": "p",
            "role": "rocm",
            "task": "a",
            "action": "apt",
            "cpu": 1.0,
            "hosts": {"h1": {"ok": 1}, "h2": {"ok": 1}},
        },
        {"play": "p", "role": "", "task": "b", "action": "lock", "cpu": 0.3, "hosts": {"h2": {"changed": 1}}},
        {"play": "p", "role": "rocm", "task": "c", "action": "x", "cpu": 0.2, "hosts": {"h1": {"skipped": 1}}},
    ]
    assert [share for share, _entry in task_cpu.host_shares(entries, "h2")] == [0.5, 0.3]
    text = task_cpu.summary(entries, "h2")
    assert text.splitlines()[0] == "h2: 2 task runs, controller CPU share 0.80 s"
    assert "  rocm              1    0.50" in text
    assert "  (plays)           1    0.30" in text
