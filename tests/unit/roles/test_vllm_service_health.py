"""The vllm_service role's /health wait (tasks/health.yml) and its settings' checks (tasks/validate.yml), run by
ansible-playbook on localhost.

systemctl and journalctl are scripts on PATH that print what the test wrote; /health is a local HTTP server. The wait
runs inside a block whose rescue keeps ansible_failed_result.msg, as the role's main.yml hands it to recover.yml.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "roles" / "vllm_service" / "tasks"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
SHOW = {
    "LoadState": "loaded",
    "ActiveState": "active",
    "SubState": "running",
    "Result": "success",
    "NRestarts": "0",
    "ExecMainCode": "0",
    "ExecMainStatus": "0",
}
JOURNAL = (
    "INFO Starting vLLM API server on http://127.0.0.1:8000",
    "Loading safetensors checkpoint shards:   0% Completed | 0/4\rLoading safetensors checkpoint shards:  50% "
    "Completed | 2/4",
)


@pytest.fixture
def host(tmp_path):
    """Fake systemctl and journalctl reading tmp_path/state; run(vars, tasks) runs a playbook with them on PATH."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    (bin_dir / "systemctl").write_text('#!/bin/sh\ncat "$FAKE_STATE/show"\n')
    (bin_dir / "journalctl").write_text(
        '#!/bin/sh\necho "$@" >> "$FAKE_STATE/journal.args"\ncat "$FAKE_STATE/journal"\n'
    )
    for tool in ("systemctl", "journalctl"):
        (bin_dir / tool).chmod(0o755)

    class Host:
        @staticmethod
        def unit(lines=JOURNAL, **show):
            started = int((time.monotonic() - 90) * 1e6)  # started 1.5 minutes ago
            properties = dict(SHOW, InactiveExitTimestampMonotonic=str(started), **show)
            (state / "show").write_text("".join("%s=%s\n" % item for item in properties.items()))
            now = int(time.time() * 1e6)
            (state / "journal").write_text(
                "".join(json.dumps({"MESSAGE": line, "__REALTIME_TIMESTAMP": str(now)}) + "\n" for line in lines)
            )

        @staticmethod
        def run(variables, tasks):
            playbook = tmp_path / "play.yml"
            variables = dict(variables, ansible_python_interpreter=sys.executable)
            play = {"name": "Test", "hosts": "localhost", "connection": "local", "gather_facts": False}
            playbook.write_text(yaml.safe_dump([dict(play, vars=variables, tasks=tasks)]))
            env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
            env.update(
                ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
                ANSIBLE_NOCOLOR="1",
                FAKE_STATE=str(state),
                PATH=str(bin_dir) + os.pathsep + env.get("PATH", ""),
            )
            started = time.monotonic()
            proc = subprocess.run(
                [str(PLAYBOOK), "-i", "localhost,", str(playbook)],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=env,
                timeout=120,
                check=False,  # the tests read the exit code
            )
            return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started

        journal_args = state / "journal.args"
        failure = tmp_path / "failure.txt"

    return Host


@pytest.fixture
def health():
    """/health on a free local port: 503 until it was asked ready_at times."""
    status = {"asked": 0, "ready_at": None}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            status["asked"] += 1
            ready = status["ready_at"] is not None and status["asked"] >= status["ready_at"]
            self.send_response(200 if ready else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    class Health:
        port = httpd.server_address[1]

        @staticmethod
        def ready_at(asked):
            status["ready_at"] = asked

        @staticmethod
        def asked():
            return status["asked"]

    yield Health
    httpd.shutdown()
    httpd.server_close()


def wait_tasks(host, instance, **settings):
    """health.yml for instance in a block whose rescue writes the failure's message, as main.yml's rescue reads it."""
    variables = dict(
        vllm_service_instance=instance,
        vllm_service_health_timeout=2700,
        vllm_service_health_progress=1,
        vllm_service_health_restarts=2,
        **settings,
    )
    tasks = [
        {
            "name": "Wait as main.yml does",
            "block": [{"name": "Wait", "ansible.builtin.include_tasks": str(TASKS / "health.yml")}],
            "rescue": [
                {
                    "name": "Keep what failed, as recover.yml does",
                    "ansible.builtin.copy": {"content": "{{ ansible_failed_result.msg }}", "dest": str(host.failure)},
                },
                {"name": "Fail as recover.yml does", "ansible.builtin.fail": {"msg": "rescued"}},
            ],
        }
    ]
    return variables, tasks


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_wait_shows_the_journal_while_the_model_loads(host, health):
    host.unit()
    health.ready_at(3)  # one request per run of the module (progress 1 s, delay 5 s): two progress lines
    rc, output, _seconds = host.run(*wait_tasks(host, {"name": "fixture", "host": "0.0.0.0", "port": health.port}))  # noqa: S104
    assert rc == 0, output
    assert "[localhost] vllm-fixture: waiting for /health, 0:0" in output, output
    assert "of 45:00; active (running) for 1:3" in output, output
    assert "last log: Loading safetensors checkpoint shards: 50% Completed | 2/4" in output, output
    # The journal is read from the unit's start on.
    args = host.journal_args.read_text().splitlines()[0].split()
    assert args[:3] == ["--no-pager", "--unit", "vllm-fixture.service"] and args[-2] == "--since"
    assert abs(int(args[-1].lstrip("@")) - (time.time() - 90)) < 30
    assert not host.failure.exists() and health.asked() == 3
    assert output.count("[localhost] vllm-fixture: waiting for /health") == 2, output


def test_a_failed_unit_fails_at_once_with_its_journal(host):
    host.unit(
        lines=JOURNAL + ("RuntimeError: Engine core initialization failed. See root cause above.",),
        ActiveState="failed",
        SubState="failed",
        Result="exit-code",
        ExecMainCode="1",
        ExecMainStatus="1",
    )
    rc, output, seconds = host.run(*wait_tasks(host, {"name": "fixture", "host": "127.0.0.1", "port": closed_port()}))
    assert rc != 0 and seconds < 60, output
    msg = host.failure.read_text()
    assert msg.startswith("vllm-fixture did not answer /health within 2700 s: the wait stopped after 0:0"), msg
    assert "the unit failed (Result=exit-code; its main process exited with status 1)" in msg, msg
    assert msg.endswith("RuntimeError: Engine core initialization failed. See root cause above."), msg
    assert "Its journal since it started:" in msg


def test_a_crash_loop_fails_at_once(host):
    host.unit(
        lines=JOURNAL + ("RuntimeError: Engine core initialization failed. See root cause above.",),
        ActiveState="activating",
        SubState="auto-restart",
        NRestarts="3",
        ExecMainCode="1",
        ExecMainStatus="1",
    )
    rc, output, seconds = host.run(*wait_tasks(host, {"name": "fixture", "host": "127.0.0.1", "port": closed_port()}))
    assert rc != 0 and seconds < 60, output
    msg = host.failure.read_text()
    assert "systemd restarted it 3 times since it was started" in msg
    # The error that ended the run before the last restart, not only the restart's own lines.
    assert "Its journal's last lines:" in msg and msg.endswith(
        "Engine core initialization failed. See root cause above."
    ), msg


def test_the_instances_health_timeout_overrides_the_roles(host):
    host.unit()
    instance = {"name": "fixture", "host": "127.0.0.1", "port": closed_port(), "health_timeout": 2}
    rc, output, _seconds = host.run(*wait_tasks(host, instance))
    assert rc != 0, output
    msg = host.failure.read_text()
    assert msg.startswith("vllm-fixture did not answer /health within 2 s (active (running) for 1:3"), msg
    assert msg.endswith("Loading safetensors checkpoint shards: 50% Completed | 2/4"), msg


def validate(host, tmp_path, instances, **settings):
    stack = tmp_path / "stacks" / "a"
    (stack / "venv" / "bin").mkdir(parents=True, exist_ok=True)
    (stack / "venv" / "bin" / "vllm").write_text("")
    variables = dict(
        vllm_service_instances=instances,
        vllm_service_gpu_count=1,
        vllm_service_hip_devices="0",
        vllm_service_gpu_archs=["gfx942"],
        vllm_service_stack=str(tmp_path / "current"),
        vllm_service_to=str(stack),
        vllm_service_from=str(stack),
        # What facts.yml's instinct.stack.served_stack reads for that stack, in service and to serve.
        vllm_service_stacks={
            "current": str(stack),
            "current_verified": False,
            "previous": "",
            "target": str(stack),
            "target_runnable": True,
            "target_verified": False,
        },
        vllm_service_health_timeout=2700,
        vllm_service_health_progress=60,
        vllm_service_health_restarts=2,
        vllm_service_model_root=str(tmp_path / "models"),
        vllm_service_model_directories=None,
    )
    variables.update(settings)
    return host.run(variables, [{"name": "Validate", "ansible.builtin.include_tasks": str(TASKS / "validate.yml")}])


def test_validate_accepts_a_positive_health_timeout_or_none(host, tmp_path):
    values = [900, "900", None]
    instances = [{"name": "m%d" % n, "model": "m", "port": 8000 + n, "health_timeout": v} for n, v in enumerate(values)]
    rc, output, _seconds = validate(host, tmp_path, instances + [{"name": "plain", "model": "m", "port": 9000}])
    assert rc == 0, output


def test_validate_refuses_a_bad_health_timeout_naming_the_instance(host, tmp_path):
    values = [0, -5, "soon", 1.5]
    instances = [{"name": "m%d" % n, "model": "m", "port": 8000 + n, "health_timeout": v} for n, v in enumerate(values)]
    rc, output, _seconds = validate(host, tmp_path, instances + [{"name": "fine", "model": "m", "port": 9000}])
    assert rc != 0
    flat = " ".join(output.split())
    for n, value in enumerate(values):
        expected = (
            'vLLM instance "m%d": health_timeout must be a positive integer (seconds to wait for /health), got %s'
        )
        assert expected % (n, json.dumps(value)) in flat, output
    assert 'vLLM instance "fine"' not in flat


@pytest.mark.parametrize(
    "settings",
    [
        {"vllm_service_health_timeout": 0},
        {"vllm_service_health_progress": "often"},
        {"vllm_service_health_restarts": -2},
    ],
)
def test_validate_refuses_bad_wait_settings(host, tmp_path, settings):
    rc, output, _seconds = validate(host, tmp_path, [{"name": "llama", "model": "m"}], **settings)
    assert rc != 0
    assert "must be positive integers (seconds), vllm_service_health_restarts" in " ".join(output.split()), output


def recover_fail_task():
    """recover.yml's last task, which says what the host serves after a failure."""
    tasks = yaml.safe_load((TASKS / "recover.yml").read_text())
    (task,) = [task for task in tasks if task["name"] == "Fail the host, naming the stack it serves"]
    return task


def test_a_failed_wait_on_the_stack_served_before_says_why(host):
    variables = {
        "vllm_service_failure": "vllm-fixture did not answer /health within 120 s.",
        "vllm_service_back": True,
        "vllm_service_stack_back": True,
        "vllm_service_models_back": [],
        "vllm_service_from": "/opt/instinct-stack/stacks/A",
        "vllm_service_to": "/opt/instinct-stack/stacks/B",
        "vllm_service_back_health": {
            "failed": True,
            "results": [
                {"item": {"name": "ok"}, "failed": False, "msg": "fine"},
                {"item": {"name": "fixture"}, "failed": True, "msg": "vllm-fixture.service failed: exit code 1."},
            ],
        },
    }
    code, out, _seconds = host.run(variables, [recover_fail_task()])
    assert code == 2, out
    assert "switched back to stack A (from B), but its services did not answer /health there either:" in out, out
    assert "vllm-fixture.service failed: exit code 1." in out and "fine" not in out, out
