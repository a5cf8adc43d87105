"""The rollout lock in real ansible-playbook runs, on local-connection hosts whose lock files live under tmp_path.

A holding run (the collection's lock tasks, then it waits for a file) against gpu1; meanwhile playbooks/rollback.yml
against gpu1 and gpu2 is refused on gpu1 with the holder's identity (the pid of the holding ansible-playbook itself:
the worker's parent), gives back gpu2's lock and stops, also in check mode. Then a rollback that fails on both hosts
(they have no previous stack) keeps their locks, and the next run takes them over with a warning naming the pid.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
LOCK_TASKS = ROOT / "playbooks" / "tasks" / "rollout_lock.yml"
HOSTS = ("gpu1", "gpu2")


@pytest.fixture
def site(tmp_path):
    inventory = tmp_path / "hosts.yml"
    hosts = {
        name: {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "vllm_stack_root": str(tmp_path / name / "stacks"),
            "instinct_rollout_lock_path": str(tmp_path / name / "rollout.lock"),
        }
        for name in HOSTS
    }
    inventory.write_text(yaml.safe_dump({"inference_hosts": {"hosts": hosts}}))
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_NOCOLOR="1")

    class Site:
        path = tmp_path

        @staticmethod
        def lock(name):
            path = tmp_path / name / "rollout.lock"
            return json.loads(path.read_text()) if path.exists() else None

        @staticmethod
        def command(playbook, *args):
            return [str(PLAYBOOK), "-i", str(inventory), str(playbook), *args]

        @staticmethod
        def run(playbook, *args):
            proc = subprocess.run(
                Site.command(playbook, *args),
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=env,
                timeout=180,
                check=False,  # the tests read the exit code
            )
            return proc.returncode, proc.stdout + proc.stderr

        @staticmethod
        def start(playbook, *args):
            return subprocess.Popen(
                Site.command(playbook, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                cwd=tmp_path, env=env,
            )  # fmt: skip

    return Site


def flat(text):
    """The output without whitespace: the default callback wraps long warnings (at hyphens, too)."""
    return "".join(text.split())


def holding_playbook(site):
    playbook = site.path / "hold.yml"
    released = site.path / "release-the-holder"
    give_back = {"path": "{{ instinct_rollout_lock_path }}", "state": "absent"}
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Take the rollout lock",
                    "hosts": "inference_hosts",
                    "gather_facts": False,
                    "tasks": [{"name": "Take it", "ansible.builtin.import_tasks": str(LOCK_TASKS)}],
                },
                {
                    "name": "Hold it",
                    "hosts": "inference_hosts",
                    "gather_facts": False,
                    "tasks": [{"name": "Wait", "ansible.builtin.wait_for": {"path": str(released), "timeout": 150}}],
                },
                {
                    "name": "Give it back",
                    "hosts": "inference_hosts",
                    "gather_facts": False,
                    "tasks": [{"name": "Give back the rollout lock", "instinct.stack.rollout_lock": give_back}],
                },
            ]
        )
    )
    return playbook, released


def test_a_second_run_is_refused_while_the_first_holds_a_host(site):
    playbook, released = holding_playbook(site)
    holder = site.start(playbook, "--limit", "gpu1")
    try:
        deadline = time.monotonic() + 120
        while site.lock("gpu1") is None and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        lock = site.lock("gpu1")
        assert lock, holder.poll()
        # The worker that ran the task was forked from the holding ansible-playbook: its pid is in the lock.
        assert lock["pid"] == holder.pid and lock["playbook"] == "hold.yml"

        for check in ([], ["--check"]):
            code, output = site.run(ROOT / "playbooks" / "rollback.yml", *check)
            assert code == 2, output
            refused = "gpu1 is being rolled out by %s@%s (ansible-playbook pid %d, playbook hold.yml, since %s)" % (
                lock["user"], lock["controller"], holder.pid, lock["started"])  # fmt: skip
            assert flat(refused + ", which still runs on this controller. Wait for it to finish.") in flat(output)
            assert flat("Another rollout holds gpu1 (see the message above)") in flat(output)
            assert "Roll each host back" not in output  # stopped before the rollback play
            assert site.lock("gpu1") == lock and site.lock("gpu2") is None  # gpu2's was given back
    finally:
        released.touch()
        output = holder.communicate(timeout=120)[0]
    assert holder.returncode == 0, output
    assert site.lock("gpu1") is None


def test_a_failed_host_keeps_its_lock_and_the_next_run_takes_it_over(site):
    rollback = ROOT / "playbooks" / "rollback.yml"
    code, output = site.run(rollback)
    # gpu1, the first batch, has no previous stack and fails; max_fail_percentage (0) stops the rollback there, so
    # neither host reaches the last play: gpu1 failed, gpu2 was never rolled back.
    assert code == 2 and "fatal: [gpu1]: FAILED!" in output and "gpu1 has no previous stack" in output, output
    assert "PLAY [Give back the rollout lock]" not in output
    first = {name: site.lock(name) for name in HOSTS}
    assert first["gpu1"]["run_id"] == first["gpu2"]["run_id"] and first["gpu1"]["playbook"] == "rollback.yml"
    assert not os.path.exists("/proc/%d" % first["gpu1"]["pid"])  # that ansible-playbook has ended

    code, output = site.run(rollback)
    assert code == 2, output
    for name in HOSTS:
        warning = "%s: took over the rollout lock of %s@%s (ansible-playbook pid %d, playbook rollback.yml" % (
            name, first[name]["user"], first[name]["controller"], first[name]["pid"])  # fmt: skip
        assert flat(warning) in flat(output)
        assert site.lock(name)["run_id"] != first[name]["run_id"]
    assert flat("ansible-playbook pid %d no longer runs on" % first["gpu1"]["pid"]) in flat(output)


def lock_module_tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from lock_module_tasks(item)
    elif isinstance(node, dict):
        if "instinct.stack.rollout_lock" in node:
            yield node["instinct.stack.rollout_lock"]
        for value in node.values():
            yield from lock_module_tasks(value)


def test_every_lock_task_takes_one_path_variable_with_the_modules_default():
    from ansible_collections.instinct.stack.plugins.module_utils.rollout_lock import DEFAULT_PATH
    from ansible_collections.instinct.stack.plugins.modules import rollout_lock as module

    assert yaml.safe_load(module.DOCUMENTATION)["options"]["path"]["default"] == DEFAULT_PATH
    tasks = [
        task
        for name in ("playbooks/site.yml", "playbooks/rollback.yml", "playbooks/tasks/rollout_lock.yml")
        for task in lock_module_tasks(yaml.safe_load((ROOT / name).read_text()))
    ]
    assert len(tasks) == 4  # take, give back on refusal (the shared file); give back (site.yml, rollback.yml)
    for task in tasks:
        # The module's default is the one home of the path: the playbooks omit the option unless it is set.
        assert task["path"] == "{{ instinct_rollout_lock_path | default(omit) }}"
