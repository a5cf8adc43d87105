"""instinct.stack.rollout_lock's module as Ansible runs it on the host: take, give back, another holder, check mode."""

import json

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.module_utils.rollout_lock import make_run_id
from ansible_collections.instinct.stack.plugins.modules import rollout_lock


def holder(pid):
    return {
        "run_id": make_run_id("deploy1", "m1", "b1", pid, 1000),
        "controller": "deploy1",
        "machine_id": "m1",
        "boot_id": "b1",
        "user": "ops",
        "pid": pid,
        "pid_start": 1000,
        "started": "2026-05-09T07:35:25Z",
        "playbook": "site.yml",
    }


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        rollout_lock.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "var" / "lib" / "instinct-stack" / "rollout.lock"


def test_take_and_give_back(path, capsys):
    mine = holder(4242)
    code, taken = run_module({"path": str(path), "holder": mine}, capsys)
    assert code == 0 and taken["changed"] and taken["acquired"] and taken["holder"] == mine
    assert taken["lock_file"] == str(path) and taken["run_id"] == mine["run_id"]
    assert json.loads(path.read_text()) == mine
    code, again = run_module({"path": str(path), "holder": mine}, capsys)
    assert code == 0 and not again["changed"] and again["acquired"]
    code, given = run_module({"path": str(path), "holder": mine, "state": "absent"}, capsys)
    assert code == 0 and given["changed"] and given["released"] and given["previous"] == mine
    assert not path.exists()


def test_another_holder_is_reported_and_kept_unless_swapped(path, capsys):
    theirs, mine = holder(4242), holder(5151)
    run_module({"path": str(path), "holder": theirs}, capsys)
    code, refused = run_module({"path": str(path), "holder": mine}, capsys)
    assert code == 0 and not refused["acquired"] and not refused["changed"] and refused["holder"] == theirs
    code, left = run_module({"path": str(path), "holder": mine, "state": "absent"}, capsys)
    assert not left["released"] and left["holder"] == theirs and json.loads(path.read_text()) == theirs
    code, swapped = run_module({"path": str(path), "holder": mine, "replace_run_id": theirs["run_id"]}, capsys)
    assert swapped["acquired"] and swapped["changed"] and swapped["previous"] == theirs
    assert json.loads(path.read_text()) == mine


def test_check_mode_writes_nothing(path, capsys):
    theirs, mine = holder(4242), holder(5151)
    code, result = run_module({"path": str(path), "holder": mine, "_ansible_check_mode": True}, capsys)
    assert code == 0 and result["changed"] and result["acquired"]
    assert not path.parent.exists()
    run_module({"path": str(path), "holder": theirs}, capsys)
    args = {"path": str(path), "holder": mine, "replace_run_id": theirs["run_id"], "_ansible_check_mode": True}
    code, result = run_module(args, capsys)
    assert result["changed"] and result["previous"] == theirs
    assert json.loads(path.read_text()) == theirs


@pytest.mark.parametrize("args", [{"holder": {"pid": 1}}, {}], ids=["no run_id", "no holder"])
def test_a_holder_without_run_id_is_refused(path, capsys, args):
    code, result = run_module(dict(args, path=str(path)), capsys)
    assert code == 1 and result["failed"] and "through its action plugin" in result["msg"]
    assert not path.parent.exists()


def test_an_unusable_path_fails_with_the_reason(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, result = run_module({"path": str(blocker / "rollout.lock"), "holder": holder(1)}, capsys)
    assert code == 1 and result["msg"].startswith("rollout lock %s: " % (blocker / "rollout.lock"))
