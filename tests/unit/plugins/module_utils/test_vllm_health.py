"""The /health wait's logic: the unit's state, when systemd gave up, the journal's lines, secrets, the messages."""

import json
import time

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import vllm_health as vh

SECRET = "sk-health-canary-7f3a"  # noqa: S105 - a test value, searched for

SHOW_RUNNING = """LoadState=loaded
ActiveState=active
SubState=running
Result=success
NRestarts=0
ExecMainCode=0
ExecMainStatus=0
InactiveExitTimestampMonotonic=100000000
"""


def state(text=SHOW_RUNNING, now=400.0, **overrides):
    properties = vh.parse_show(text)
    properties.update({key: str(value) for key, value in overrides.items()})
    return vh.unit_state(properties, now_monotonic=now)


@pytest.mark.parametrize(
    "host, url",
    [
        ("127.0.0.1", "http://127.0.0.1:8000/health"),
        ("0.0.0.0", "http://127.0.0.1:8000/health"),  # noqa: S104
        ("", "http://127.0.0.1:8000/health"),
        ("::", "http://[::1]:8000/health"),
        ("::1", "http://[::1]:8000/health"),
        ("10.0.0.5", "http://10.0.0.5:8000/health"),
        ("gpu1.example", "http://gpu1.example:8000/health"),
    ],
)
def test_the_url_asks_a_service_bound_everywhere_on_loopback(host, url):
    assert vh.health_url(host, "8000") == url


def test_a_running_unit_is_described_and_not_given_up():
    unit = state()
    assert unit["active_state"] == "active" and unit["sub_state"] == "running" and unit["restarts"] == 0
    assert unit["up_seconds"] == 300 and unit["started_monotonic"] == 100.0 and unit["main_exit"] == ""
    assert vh.gave_up(unit, 2) == ""
    assert vh.describe_unit(unit) == "active (running) for 5:00"


def test_a_unit_that_never_started_has_no_start():
    unit = state(InactiveExitTimestampMonotonic=0, ActiveState="inactive", SubState="dead")
    assert unit["up_seconds"] is None and unit["started_monotonic"] is None
    assert vh.journal_since(unit["started_monotonic"]) is None


@pytest.mark.parametrize(
    "overrides, reason",
    [
        (
            {"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "ExecMainCode": 1,
             "ExecMainStatus": 1},
            "the unit failed (Result=exit-code; its main process exited with status 1) and systemd does not restart it",
        ),
        (
            {"ActiveState": "inactive", "SubState": "dead", "Result": "success", "ExecMainCode": 1,
             "ExecMainStatus": 0},
            "the unit stopped (inactive, Result=success; its main process exited with status 0)",
        ),
        (
            {"ActiveState": "failed", "Result": "signal", "ExecMainCode": 2, "ExecMainStatus": 9},
            "the unit failed (Result=signal; its main process was killed by signal 9)",
        ),
        ({"LoadState": "not-found", "ActiveState": "inactive"}, "the unit is not loaded (LoadState=not-found)"),
        ({"ActiveState": "maintenance"}, "the unit is maintenance"),
        (
            {"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": 3, "ExecMainCode": 1,
             "ExecMainStatus": 1},
            "systemd restarted it 3 times since it was started; its main process last exited with status 1",
        ),
    ],
)  # fmt: skip
def test_systemd_gave_up(overrides, reason):
    assert reason in vh.gave_up(state(**overrides), 2)


@pytest.mark.parametrize("active", ["activating", "active", "reloading", "deactivating"])
def test_a_unit_that_systemd_still_runs_or_restarts_is_waited_for(active):
    assert vh.gave_up(state(ActiveState=active, SubState="auto-restart", NRestarts=2), 2) == ""


def test_restarts_minus_one_accepts_any_crash_loop():
    looping = state(ActiveState="activating", SubState="auto-restart", NRestarts=50)
    assert vh.gave_up(looping, -1) == "" and vh.gave_up(looping, 49) != ""
    assert vh.describe_unit(looping) == "activating (auto-restart) for 5:00, 50 restarts"


def test_clean_message_keeps_a_progress_bars_last_state_and_drops_escapes():
    progress = "Loading shards:   0% |\rLoading shards:  45% Completed | 9/20 [01:02<01:10]\r"
    assert vh.clean_message(progress) == "Loading shards: 45% Completed | 9/20 [01:02<01:10]"
    assert vh.clean_message("\x1b[1;32mINFO\x1b[0m   ready") == "INFO ready"
    assert vh.clean_message(list(b"caf\xc3\xa9 \xff")) == "caf\u00e9 \ufffd"
    assert vh.clean_message(None) == ""
    long = vh.clean_message("x" * 1000)
    assert len(long) == vh.MESSAGE_MAX and long.endswith("...")


def test_parse_journal_formats_each_entry_and_skips_the_rest():
    usec = 1700000000 * 1000000
    text = "\n".join(
        [
            json.dumps({"MESSAGE": "INFO Starting vLLM", "__REALTIME_TIMESTAMP": str(usec)}),
            "not json",
            json.dumps({"MESSAGE": "", "__REALTIME_TIMESTAMP": str(usec)}),
            json.dumps(["a", "list"]),
            json.dumps({"MESSAGE": "no time"}),
        ]
    )
    assert vh.parse_journal(text, localtime=time.gmtime) == ["2023-11-14 22:13:20 INFO Starting vLLM", "no time"]


def test_env_secrets_are_the_secret_variables_values_only():
    text = "\n".join(
        [
            "# {{ ansible_managed }}",
            "VLLM_API_KEY=" + SECRET,
            'HF_TOKEN="hf_quoted_token"',
            "export MY_PASSWORD='pw-1234'",
            "HF_HUB_OFFLINE=1",
            "ROCM_PATH=/opt/rocm",
            "SHORT_KEY=abc",
        ]
    )
    assert vh.env_secrets(text) == {SECRET, "hf_quoted_token", "pw-1234"}


def test_redact_masks_every_secret_the_longest_first():
    lines = vh.redact(["key %s and %s-suffix" % (SECRET, SECRET), "clean"], {SECRET[:8], SECRET})
    assert lines == ["key ******** and ********-suffix", "clean"]
    assert SECRET not in "".join(lines)


def test_journal_since_maps_the_monotonic_start_to_the_wall_clock():
    assert vh.journal_since(100.0, now_wall=1700000400.0, now_monotonic=400.0) == "@1700000100"


class Clock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_returns_when_the_service_answers():
    clock = Clock()
    statuses = iter([None, 503, 200])
    result = vh.wait(lambda: next(statuses), state, timeout=60, delay=5, clock=clock, sleep=clock.sleep)
    assert result == {"healthy": True, "status": 200, "gave_up": "", "unit": None, "waited": 10}


def test_wait_stops_at_once_when_systemd_gave_up():
    clock = Clock()
    units = iter([state(), state(ActiveState="failed", Result="exit-code")])
    result = vh.wait(lambda: None, lambda: next(units), timeout=2700, delay=5, clock=clock, sleep=clock.sleep)
    assert result["healthy"] is False and "the unit failed" in result["gave_up"] and result["waited"] == 5


def test_wait_polls_while_a_poll_fits_in_the_timeout():
    clock = Clock()
    calls = []
    result = vh.wait(lambda: calls.append(1), state, timeout=20, delay=5, clock=clock, sleep=clock.sleep)
    assert len(calls) == 5 and clock.sleeps == [5, 5, 5, 5]
    assert result["healthy"] is False and result["gave_up"] == "" and result["waited"] == 20
    once = Clock()
    vh.wait(lambda: None, state, timeout=0, delay=5, clock=once, sleep=once.sleep)
    assert once.sleeps == []


def test_progress_line_names_the_host_the_wait_the_unit_and_the_last_log_line():
    line = vh.progress_line(
        "gpu1",
        "vllm-llama",
        300,
        2700,
        {"unit": state(), "journal": ["2024-01-01 10:00:00 INFO a", "2024-01-01 10:00:05 Loading weights 45%"]},
    )
    assert line == (
        "[gpu1] vllm-llama: waiting for /health, 5:00 of 45:00; active (running) for 5:00; last log: "
        "Loading weights 45%"
    )
    assert "nothing in its journal" in vh.progress_line("gpu1", "vllm-llama", 60, 2700, {"unit": state()})
    assert "1:00:00 of 1:15:00" in vh.progress_line("gpu1", "s", 3600, 4500, {})


def test_the_failure_keeps_the_message_recover_reports_and_quotes_the_journal():
    journal = ["2024-01-01 10:00:0%d line %d" % (n, n) for n in range(3)]
    timed_out = vh.failure_message("vllm-llama", 20, 21.5, {"unit": state(), "journal": journal, "since": "@1"})
    assert timed_out.startswith("vllm-llama did not answer /health within 20 s (active (running) for 5:00).")
    assert timed_out.endswith("Its journal since it started:\n" + "\n".join(journal))
    failed = vh.failure_message(
        "vllm-llama", 2700, 14, {"gave_up": "the unit failed (Result=exit-code)", "journal": [], "since": None}
    )
    assert failed == (
        "vllm-llama did not answer /health within 2700 s: the wait stopped after 0:14 because the unit failed "
        "(Result=exit-code). Its journal's last lines:\n(empty)"
    )
