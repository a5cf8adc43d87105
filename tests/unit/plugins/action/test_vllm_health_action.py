"""instinct.stack.vllm_health's action plugin: runs of the module, progress lines between them, and the outcome.

The module's runs on the host are replaced by a script of results; a fake clock stands for the time they take.
"""

from unittest.mock import MagicMock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.instinct.stack.plugins.action import vllm_health as action

UNIT = {
    "load_state": "loaded",
    "active_state": "active",
    "sub_state": "running",
    "result": "success",
    "restarts": 0,
    "main_exit": "",
    "up_seconds": 120,
}


def loading(line="Loading weights 45%", **unit):
    return {
        "changed": False,
        "healthy": False,
        "status": None,
        "gave_up": "",
        "unit": dict(UNIT, **unit),
        "journal": ["2024-01-01 10:00:00 INFO start", "2024-01-01 10:01:00 " + line],
        "since": "@1704103200",
        "url": "http://127.0.0.1:8000/health",
    }


HEALTHY = {"changed": False, "healthy": True, "status": 200, "gave_up": "", "unit": None, "waited": 3}


class Harness:
    def __init__(self, outcomes, args=None, seconds_per_run=60):
        task = MagicMock(async_val=0, check_mode=False, action="instinct.stack.vllm_health")
        task.args = dict({"unit": "vllm-llama.service", "timeout": 300, "progress": 60}, **(args or {}))
        connection = MagicMock()
        connection._shell.tmpdir = None
        self.plugin = action.ActionModule(
            task, connection, MagicMock(), DataLoader(), Templar(loader=DataLoader()), None
        )
        self.plugin._remove_tmp_path = lambda *args, **kwargs: None
        self.plugin._execute_module = self.execute_module
        self.now = 0.0
        self.plugin.clock = lambda: self.now
        self.outcomes = list(outcomes)
        self.seconds_per_run = seconds_per_run
        self.calls = []
        self.lines = []

    def execute_module(self, module_name, module_args, task_vars):
        self.calls.append((module_name, dict(module_args)))
        self.now += self.seconds_per_run
        return dict(self.outcomes.pop(0))

    def run(self, monkeypatch):
        monkeypatch.setattr(action.display, "display", lambda msg, *args, **kwargs: self.lines.append(msg))
        return self.plugin.run(task_vars={"inventory_hostname": "gpu1"})


def test_the_wait_shows_progress_until_the_service_answers(monkeypatch):
    harness = Harness([loading("Loading weights 10%"), loading("Loading weights 90%"), HEALTHY])
    result = harness.run(monkeypatch)
    assert not result.get("failed") and result["healthy"] is True and result["changed"] is False
    assert result["waited"] == 180 and result["status"] == 200
    line = "[gpu1] vllm-llama: waiting for /health, %s of 5:00; active (running) for 2:00; last log: Loading weights %s"
    assert harness.lines == [line % ("1:00", "10%"), line % ("2:00", "90%")]
    # Each run of the module gets what is left of the timeout and the module's own args.
    assert [args["timeout"] for _name, args in harness.calls] == [300, 240, 180]
    assert all(name == "instinct.stack.vllm_health" for name, _args in harness.calls)
    assert harness.calls[0][1] == {"unit": "vllm-llama.service", "timeout": 300, "progress": 60, "delay": 5}


def test_a_unit_that_gave_up_fails_at_once_with_the_journal(monkeypatch):
    failed = dict(
        loading("RuntimeError: Engine core initialization failed."), gave_up="the unit failed (Result=exit-code)"
    )
    harness = Harness([loading(), failed], args={"timeout": 2700}, seconds_per_run=7)
    result = harness.run(monkeypatch)
    assert result["failed"] is True and len(harness.calls) == 2 and result["waited"] == 14
    assert result["msg"].startswith(
        "vllm-llama did not answer /health within 2700 s: the wait stopped after 0:14 because the unit failed"
    )
    assert result["msg"].endswith("Its journal since it started:\n2024-01-01 10:00:00 INFO start\n"
                                  "2024-01-01 10:01:00 RuntimeError: Engine core initialization failed.")  # fmt: skip
    assert "journal" not in result and result["gave_up"] and result["unit"]["active_state"] == "active"
    assert len(harness.lines) == 1


def test_the_timeout_fails_with_the_message_recover_reports(monkeypatch):
    harness = Harness([loading()] * 3, args={"timeout": 20, "progress": 10}, seconds_per_run=10)
    result = harness.run(monkeypatch)
    assert result["failed"] is True and len(harness.calls) == 2
    assert result["msg"].startswith("vllm-llama did not answer /health within 20 s (active (running) for 2:00).")
    assert [args["timeout"] for _name, args in harness.calls] == [20, 10]


def test_a_module_failure_is_the_tasks_failure(monkeypatch):
    harness = Harness([{"failed": True, "msg": "systemctl show vllm-llama.service failed: no bus"}])
    result = harness.run(monkeypatch)
    assert result["failed"] is True and result["msg"] == "systemctl show vllm-llama.service failed: no bus"
    assert harness.lines == []


@pytest.mark.parametrize(
    "args, message",
    [
        ({"timeout": "soon"}, "timeout must be an integer, got 'soon'"),
        ({"progress": True}, "progress must be an integer"),
        ({"delay": 0}, "progress and delay at least 1"),
        ({"timeout": -5}, "timeout must be at least 0"),
    ],
)
def test_bad_settings_fail_before_any_run(monkeypatch, args, message):
    harness = Harness([], args=args)
    result = harness.run(monkeypatch)
    assert result["failed"] is True and message in result["msg"] and harness.calls == []


def test_templated_strings_are_accepted(monkeypatch):
    harness = Harness([HEALTHY], args={"timeout": "2700", "progress": "60", "port": "8001"})
    assert harness.run(monkeypatch)["healthy"] is True
    assert harness.calls[0][1]["timeout"] == 2700 and harness.calls[0][1]["progress"] == 60
