"""instinct.stack.served_stack as Ansible runs it, on a stack root laid out as the vllm roles leave it."""

import json

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import served_stack


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        served_stack.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def stack(root, key, verified=True, vllm=True):
    path = root / "stacks" / key
    (path / "venv" / "bin").mkdir(parents=True)
    if vllm:
        (path / "venv" / "bin" / "vllm").write_text("#!/bin/sh\n")
    if verified:
        (path / ".verified").write_text("{}")
    return str(path)


def test_a_switch_names_both_stacks_and_what_they_hold(tmp_path, capsys):
    old, new = stack(tmp_path, "old"), stack(tmp_path, "new", verified=False)
    (tmp_path / "current").symlink_to(old)
    (tmp_path / "previous").symlink_to("/gone")
    code, result = run_module({"link": str(tmp_path / "current"), "target": " %s\n" % new}, capsys)
    assert code == 0 and result["changed"] is False
    assert {key: result[key] for key in served_stack.describe(str(tmp_path / "current"))} == {
        "current": old,
        "current_verified": True,
        "previous": "/gone",
        "target": new,
        "target_runnable": True,
        "target_verified": False,
    }


def test_without_a_target_the_stack_in_service_stays(tmp_path, capsys):
    old = stack(tmp_path, "old", vllm=False)
    (tmp_path / "current").symlink_to(old)
    _code, result = run_module({"link": str(tmp_path / "current")}, capsys)
    assert result["target"] == old and result["target_verified"] is True and result["target_runnable"] is False


def test_a_fresh_host_has_no_stack_at_all(tmp_path, capsys):
    _code, result = run_module({"link": str(tmp_path / "current")}, capsys)
    assert result["current"] == result["previous"] == result["target"] == ""
    assert not (result["current_verified"] or result["target_runnable"] or result["target_verified"])


def test_a_file_where_the_link_should_be_is_no_stack(tmp_path, capsys):
    (tmp_path / "current").write_text("not a link")
    _code, result = run_module({"link": str(tmp_path / "current")}, capsys)
    assert result["current"] == "" and result["current_verified"] is False


def test_the_link_is_required(capsys):
    code, result = run_module({}, capsys)
    assert code == 1 and "link" in result["msg"]
