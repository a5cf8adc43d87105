"""instinct.stack.build_status as Ansible runs it, polling a job's results file and the build's log."""

import json

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.module_utils.build_progress import step_header
from ansible_collections.instinct.stack.plugins.modules import build_status


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        build_status.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_a_running_build_reports_its_progress(tmp_path, capsys):
    results = tmp_path / "job"
    results.write_text(json.dumps({"started": 1, "finished": 0}))
    log = tmp_path / "build.log"
    log.write_text(step_header("bdist_wheel", ["python", "setup.py"]) + "[10/40] Building CXX object a.o\n")
    code, result = run_module({"results_file": str(results), "log": str(log)}, capsys)
    assert code == 0 and result["finished"] is False and result["changed"] is False
    assert result["build_progress"]["done"] == 10 and result["build_progress"]["percent"] == 25


def test_a_finished_build_returns_the_jobs_result(tmp_path, capsys):
    results = tmp_path / "job"
    results.write_text(json.dumps({"changed": True, "key": "abc", "wheels": ["/w/torch.whl"]}))
    code, result = run_module({"results_file": str(results)}, capsys)
    assert code == 0 and result["finished"] is True and result["changed"] is True and result["key"] == "abc"
    assert "build_progress" not in result


def test_a_failed_build_fails_with_its_message(tmp_path, capsys):
    results = tmp_path / "job"
    results.write_text(json.dumps({"failed": True, "msg": "pytorch: step bdist_wheel failed", "log": "/b/build.log"}))
    code, result = run_module({"results_file": str(results)}, capsys)
    assert code == 1 and result["failed"] is True and result["msg"] == "pytorch: step bdist_wheel failed"
    assert result["log"] == "/b/build.log"


def test_a_missing_job_fails(tmp_path, capsys):
    code, result = run_module({"results_file": str(tmp_path / "nope")}, capsys)
    assert code == 1 and "could not find" in result["msg"]
