"""scripts/demo_target.py, scripts/run.sh's default target: what runs without root and nspawn."""

import importlib.util
import json
import os
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("demo_target", os.path.join(ROOT, "scripts", "demo_target.py"))
demo = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(demo)


@pytest.mark.parametrize(
    ("argv", "mode"),
    [
        ([], "run"),
        (["--keep"], "keep"),
        (["--teardown"], "teardown"),
        (["detect", "-i", "inventories/demo"], None),
        (["rollout", "-i", "inventories/cluster", "--keep"], None),
        (["--keep", "--teardown"], None),
        (["--help"], None),
        (["--version"], None),
    ],
)
def test_only_the_demos_own_arguments_run_the_demo(argv, mode):
    assert demo.demo_mode(argv) == mode


def test_other_arguments_go_to_instinct_stack_unchanged(tmp_path):
    # The same interpreter's instinct-stack, with the arguments as typed; run as scripts/run.sh runs it.
    run = subprocess.run(
        [sys.executable, "-m", "scripts.demo_target", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("instinct-stack ")


class FakeHost:
    name = "instinct-demo"
    address = "10.236.0.11"


def write(tmp_path, key="k3y-" + "x" * 20):
    directory = demo.write_inventory(
        str(tmp_path / "inventory"), FakeHost(), "/work/id", "http://10.236.0.1:8080", key, "http://10.236.0.1:8090"
    )
    return directory, key


def test_the_api_key_is_only_in_a_0600_file(tmp_path):
    directory, key = write(tmp_path)
    holding = []
    for top, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(top, name)
            with open(path) as handle:
                if key in handle.read():
                    holding.append(path)
    assert holding == [os.path.join(directory, "group_vars", "all", "vllm_service.json")]
    assert stat.S_IMODE(os.stat(holding[0]).st_mode) == 0o600


def test_a_rerun_replaces_the_key_file_still_private(tmp_path):
    write(tmp_path, "first-key")
    directory, key = write(tmp_path, "second-key")
    path = os.path.join(directory, "group_vars", "all", "vllm_service.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as handle:
        assert "first-key" not in handle.read()


def test_ansible_reads_the_host_the_mirror_and_the_service_from_the_inventory(tmp_path):
    directory, key = write(tmp_path)
    listing = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", directory, "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    inventory = json.loads(listing.stdout)
    assert inventory["inference_hosts"]["hosts"] == ["instinct-demo"]
    assert inventory["build_hosts"]["hosts"] == ["instinct-demo"]
    host_vars = inventory["_meta"]["hostvars"]["instinct-demo"]
    assert host_vars["ansible_host"] == "10.236.0.11"
    assert host_vars["rocm_repo_base_url"] == "http://10.236.0.1:8080"
    assert host_vars["build_git_rewrites"] == {"https://github.com/": "http://10.236.0.1:8080/git/github.com/"}
    assert host_vars["build_pip_args"][-2:] == ["--trusted-host", "10.236.0.1"]
    # The store host fetches the model from the fixture Hub on the bridge.
    assert host_vars["models_hub_endpoint"] == "http://10.236.0.1:8090"
    (service,) = host_vars["vllm_service_instances"]
    # The service listens where this machine sends the request, with the run's key, and serves the Hub model.
    model = {"repo": "instinct-fixtures/tiny-llama", "revision": "main"}
    assert service == {"name": "demo", "model": model, "port": 8000, "host": "10.236.0.11", "api_key": key}


def test_the_demo_network_is_its_own():
    # No molecule scenario (10.232-10.234) nor benchmarks/scale.py (10.231/16) uses it.
    import glob

    for path in glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml")) + [
        os.path.join(ROOT, "benchmarks", "scale.py")
    ]:
        with open(path) as handle:
            text = handle.read()
        assert "10.236." not in text and demo.BRIDGE_NAME not in text, path
    assert demo.HOST_INTERFACE.startswith(demo.BRIDGE_ADDRESS.rsplit(".", 1)[0] + ".")


def test_the_request_carries_the_key_only_in_its_authorization_header():
    request = demo.chat_request("http://10.236.0.11:8000", "s3cret", "fixture-model", "hello")
    assert request.full_url == "http://10.236.0.11:8000/v1/chat/completions"
    assert request.get_method() == "POST"
    assert request.get_header("Authorization") == "Bearer s3cret"
    body = json.loads(request.data)
    assert body["model"] == "fixture-model"
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "s3cret" not in request.full_url and b"s3cret" not in request.data


ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "fixture-model",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "This answer comes from the fixture vLLM. You said: hi"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 9, "total_tokens": 10},
}


def test_the_answer_is_printed_and_said_to_come_from_the_fixture_vllm():
    lines = demo.format_answer(ANSWER, "http://10.236.0.11:8000", "hi")
    text = "\n".join(lines)
    assert lines[0] == "POST http://10.236.0.11:8000/v1/chat/completions (model fixture-model, Bearer API key): hi"
    assert "    This answer comes from the fixture vLLM. You said: hi" in lines
    assert "finish_reason stop, 10 tokens" in lines[1]
    assert "No AMD GPU is here: the answer comes from the fixture vLLM" in text


def test_a_response_that_is_no_chat_completion_is_an_error():
    with pytest.raises(demo.DemoError, match="not a chat completion"):
        demo.format_answer({"error": "Unauthorized"}, "http://h:8000", "hi")


REPORT = {
    "ok": True,
    "rc": 0,
    "hosts": {
        "instinct-demo": {
            "changed": 80,
            "gfx_arch": ["gfx942"],
            "failures": [],
            "reboot": {"pending": False, "reason": ""},
            "stack": {
                "arch": "gfx942",
                "torch": "2.9.0a0+git1",
                "hip": "7.0.2",
                "triton": "3.5.0",
                "torchvision": "0.24.0",
                "vllm": "0.11.0",
                "platform": "rocm",
            },
            "models": {"demo": "instinct-fixtures/tiny-llama@" + "c0ffee" * 6 + "c0ff"},
        }
    },
}


def test_the_report_summary_names_the_stack_per_host():
    lines = demo.format_summary(REPORT, "/w/report.json")
    assert lines[0] == "rollout ok (ansible-playbook rc 0), report /w/report.json"
    assert lines[1] == (
        "  instinct-demo: 80 changed tasks; gfx gfx942; vllm-demo serves instinct-fixtures/tiny-llama@"
        + "c0ffee" * 6
        + "c0ff; stack gfx942: torch 2.9.0a0+git1 (HIP 7.0.2), triton 3.5.0, torchvision 0.24.0, vllm 0.11.0, "
        "platform rocm; no reboot pending"
    )


def test_a_pending_reboot_is_explained_on_the_container_host():
    pending = json.loads(json.dumps(REPORT))
    pending["hosts"]["instinct-demo"]["reboot"] = {"pending": True, "reason": "amdgpu-dkms is installed: reboot"}
    lines = demo.format_summary(pending, "r.json")
    assert lines[1].endswith("; reboot pending: amdgpu-dkms is installed: reboot")
    assert "container on this machine's kernel" in lines[2]


def test_a_failed_host_shows_its_failures():
    failed = {
        "ok": False,
        "rc": 2,
        "hosts": {"instinct-demo": {"changed": 3, "gfx_arch": None, "failures": [{"task": "t", "msg": "boom"}]}},
    }
    assert demo.format_summary(failed, "r.json") == [
        "rollout FAILED (ansible-playbook rc 2), report r.json",
        "  instinct-demo: 3 changed tasks; gfx -; no reboot pending",
        "    FAILED t: boom",
    ]


def test_phases_time_every_phase_and_mark_the_failed_one():
    phases = demo.Phases()
    with phases("image", "x") as note:
        note["detail"] = "cached"
    with pytest.raises(RuntimeError), phases("boot", "y"):
        raise RuntimeError("no")
    rows = phases.table().splitlines()
    assert rows[1].split()[0] == "image" and rows[1].endswith("ok, cached")
    assert rows[2].split()[0] == "boot" and rows[2].endswith("FAILED")
    assert rows[-1].split()[0] == "total"


def test_an_interrupted_phase_is_marked_so():
    phases = demo.Phases()
    with pytest.raises(KeyboardInterrupt), phases("rollout", "x"):
        raise KeyboardInterrupt
    assert phases.table().splitlines()[1].endswith("interrupted")


def test_an_interrupted_rollout_is_stopped_with_sigterm_for_ansible_runner_to_cancel(tmp_path):
    import signal
    import time

    marker = tmp_path / "stopped-by"
    child = (
        "import signal, sys, time\n"
        "def stop(number, frame):\n"
        "    open(%r, 'w').write(signal.Signals(number).name)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "open(%r, 'w').write('ready')\n"
        "time.sleep(30)\n"
    ) % (str(marker), str(marker))

    def interrupt(number, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            demo.run_cancellable([sys.executable, "-c", child], stop_wait_s=10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert marker.read_text() == "SIGTERM"
    assert time.monotonic() - started < 10


def test_orphans_of_the_rollout_are_adopted_and_ended():
    # In a process of its own, not to make pytest a subreaper.
    probe = (
        "import importlib.util, os, subprocess, sys\n"
        "spec = importlib.util.spec_from_file_location('demo', %r)\n"
        "demo = importlib.util.module_from_spec(spec); spec.loader.exec_module(demo)\n"
        "def orphan():\n"
        "    argv = ['sh', '-c', 'sleep 60 >/dev/null 2>&1 & echo $!']\n"
        "    return int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)\n"
        "demo.subreaper(True)\n"
        "adopted = orphan()\n"
        "demo.subreaper(False)\n"
        "left_to_init = orphan()\n"
        "assert demo.own_children() == [adopted], demo.own_children()\n"
        "assert demo.end_adopted(wait_s=5) == set()\n"
        "assert not os.path.exists('/proc/%%d' %% adopted)\n"
        "os.kill(left_to_init, 15)\n"
        "print('ok')\n"
    ) % os.path.join(ROOT, "scripts", "demo_target.py")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60)
    assert run.stdout.strip() == "ok", run.stderr
