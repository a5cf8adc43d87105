"""instinct.stack.vllm_health as Ansible runs it: systemctl and journalctl replaced, /health a real local server."""

import functools
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from ansible.module_utils.basic import AnsibleModule
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.module_utils import vllm_health as utils
from ansible_collections.instinct.stack.plugins.modules import vllm_health

SECRET = "sk-module-canary-91c2"  # noqa: S105 - a test value, searched for
SHOW = {
    "LoadState": "loaded",
    "ActiveState": "active",
    "SubState": "running",
    "Result": "success",
    "NRestarts": "0",
    "ExecMainCode": "0",
    "ExecMainStatus": "0",
    "InactiveExitTimestampMonotonic": "1000000",
}


class Host:
    """What systemctl and journalctl answer, and the commands the module ran."""

    def __init__(self, monkeypatch, statuses=(None,), show=None, journal=(), show_rc=0):
        self.commands = []
        self.show = dict(SHOW, **(show or {}))
        self.journal = list(journal)
        self.show_rc = show_rc
        self.statuses = list(statuses)
        monkeypatch.setattr(AnsibleModule, "get_bin_path", lambda module, name, required=False: "/usr/bin/" + name)
        monkeypatch.setattr(AnsibleModule, "run_command", lambda module, args, **kwargs: self.run_command(args))
        monkeypatch.setattr(vllm_health, "probe_health", self.probe)

    def probe(self, url, timeout):
        self.commands.append(["GET", url])
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def run_command(self, args):
        self.commands.append(args)
        if args[0].endswith("systemctl"):
            if self.show_rc:
                return self.show_rc, "", "Failed to connect to bus"
            return 0, "".join("%s=%s\n" % item for item in self.show.items()), ""
        lines = [
            json.dumps({"MESSAGE": message, "__REALTIME_TIMESTAMP": "1700000000000000"}) for message in self.journal
        ]
        return 0, "\n".join(lines) + "\n", ""


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        vllm_health.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_a_service_that_answers_returns_at_once(monkeypatch, capsys):
    host = Host(monkeypatch, statuses=(200,))
    code, result = run_module({"unit": "vllm-llama", "host": "0.0.0.0", "port": 8001}, capsys)  # noqa: S104
    assert code == 0 and result["healthy"] is True and result["status"] == 200 and result["changed"] is False
    assert result["unit"] is None and "journal" not in result
    assert host.commands == [["GET", "http://127.0.0.1:8001/health"]]


def test_a_loading_service_returns_its_state_and_journal_since_it_started(monkeypatch, capsys, tmp_path):
    env = tmp_path / "llama.env"
    env.write_text("# managed\nVLLM_API_KEY=%s\nHF_HUB_OFFLINE=1\n" % SECRET)
    journal = ["INFO Starting", "Loading shards:  5% |\rLoading shards: 45% | 9/20 key=" + SECRET]
    host = Host(monkeypatch, journal=journal)
    code, result = run_module({"unit": "vllm-llama.service", "timeout": 0, "lines": 5, "env_file": str(env)}, capsys)
    assert code == 0 and result["healthy"] is False and result["gave_up"] == ""
    assert result["unit"]["active_state"] == "active" and "started_monotonic" not in result["unit"]
    assert result["journal"][-1].endswith("Loading shards: 45% | 9/20 key=********")
    assert result["since"].startswith("@")
    assert SECRET not in json.dumps(result)
    systemctl, journalctl = host.commands[1], host.commands[2]
    assert systemctl[:3] == ["/usr/bin/systemctl", "show", "vllm-llama.service"]
    assert systemctl[3] == "--property=" + ",".join(utils.PROPERTIES)
    assert journalctl[:4] == ["/usr/bin/journalctl", "--no-pager", "--unit", "vllm-llama.service"]
    assert journalctl[-4:] == ["--lines", "5", "--since", result["since"]]


def test_a_crash_looping_unit_shows_its_last_lines_not_only_those_since_the_last_restart(monkeypatch, capsys):
    # Each restart moves the unit's start; the error that ended the run before it is older than that.
    host = Host(monkeypatch, show={"NRestarts": "3"}, journal=["RuntimeError: Engine core initialization failed"])
    code, result = run_module({"unit": "vllm-llama.service", "timeout": 0, "lines": 5}, capsys)
    assert code == 0 and result["since"] is None and result["unit"]["restarts"] == 3
    assert host.commands[2][-2:] == ["--lines", "5"]
    assert result["journal"][-1].endswith("Engine core initialization failed")


def test_a_failed_unit_is_reported_without_waiting(monkeypatch, capsys):
    Host(monkeypatch, show={"ActiveState": "failed", "Result": "exit-code", "ExecMainCode": "1", "ExecMainStatus": "1"})
    code, result = run_module({"unit": "vllm-llama.service", "timeout": 600, "progress": 600}, capsys)
    assert code == 0 and result["healthy"] is False and result["waited"] == 0
    assert result["gave_up"].startswith("the unit failed (Result=exit-code; its main process exited with status 1)")


def test_one_run_waits_at_most_the_progress_interval(monkeypatch, capsys):
    class Clock:
        now = 0.0

        def __call__(self):
            return self.now

        def sleep(self, seconds):
            self.now += seconds

    clock = Clock()
    monkeypatch.setattr(vllm_health, "wait", functools.partial(utils.wait, clock=clock, sleep=clock.sleep))
    host = Host(monkeypatch)
    code, result = run_module({"unit": "u", "timeout": 2700, "progress": 30, "delay": 10}, capsys)
    assert code == 0 and result["waited"] == 30
    assert [command for command in host.commands if command[0] == "GET"] == [
        ["GET", "http://127.0.0.1:8000/health"]
    ] * 4


def test_systemctl_failing_fails_the_module(monkeypatch, capsys):
    Host(monkeypatch, show_rc=1)
    code, result = run_module({"unit": "vllm-llama.service", "timeout": 0}, capsys)
    assert code == 1 and "systemctl show vllm-llama.service failed: Failed to connect to bus" in result["msg"]


@pytest.mark.parametrize("option, value", [("delay", 0), ("progress", 0), ("timeout", -1), ("lines", 0)])
def test_out_of_range_options_fail(monkeypatch, capsys, option, value):
    Host(monkeypatch)
    code, result = run_module({"unit": "u", option: value}, capsys)
    assert code == 1 and result["msg"].startswith(option + " must be at least")


@pytest.fixture
def server():
    state = {"status": 503}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(state["status"] if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], state
    httpd.shutdown()
    httpd.server_close()


def test_probe_health_reads_the_status_and_none_when_nothing_listens(server):
    port, state = server
    assert vllm_health.probe_health("http://127.0.0.1:%d/health" % port, 2) == 503
    state["status"] = 200
    assert vllm_health.probe_health("http://127.0.0.1:%d/health" % port, 2) == 200
    assert vllm_health.probe_health("http://127.0.0.1:%d/other" % port, 2) == 404
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert vllm_health.probe_health("http://127.0.0.1:%d/health" % closed, 2) is None


def test_probe_health_ignores_proxies(server, monkeypatch):
    port, state = server
    state["status"] = 200
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert vllm_health.probe_health("http://127.0.0.1:%d/health" % port, 2) == 200
