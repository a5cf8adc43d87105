"""ansible-playbook run from the controller against a molecule scenario's inventory, as an operator would, with the
JSON callback's output parsed and never shown whole: the scenarios' API key must not reach their logs. The cluster and
airgapped scenarios' operator-style tests share it."""

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from instinct_stack.rollout import failure_message

ROOT = Path(__file__).resolve().parents[2]
CANARY = "molecule-canary-key"


def start_playbook(path, *args):
    """Start ROOT/path against the scenario's inventory in a session of its own (so a test can kill it with every
    worker and ssh it started); its output goes to temporary files that finish() reads."""
    # JSON only: the scenario's profile_tasks callback would write its timings into it.
    env = dict(
        os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.json"
    )
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    # What the playbooks hand instinct-stack's report (ansible.builtin.set_stats) in the output's global_custom_stats.
    env["ANSIBLE_SHOW_CUSTOM_STATS"] = "true"
    command = [
        os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
        "-i",
        os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
        str(ROOT / path),
        *args,
    ]
    stdout, stderr = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # noqa: SIM115 - output() reads them
    proc = subprocess.Popen(  # noqa: S603
        command, stdout=stdout, stderr=stderr, text=True, cwd=ROOT, env=env, start_new_session=True
    )
    proc.outputs = (stdout, stderr)
    return proc


def output(proc):
    stdout, stderr = proc.outputs
    stdout.seek(0)
    stderr.seek(0)
    return stdout.read(), stderr.read()


def kill(proc):
    """SIGKILL to the run's whole session: ansible-playbook, its forks and their ssh, as a killed CI job or a lost
    terminal would. What it started on the hosts (an async build) keeps running there."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    out, err = output(proc)
    assert CANARY not in out + err


def finish(proc, timeout=1200):
    """Wait for the run; return (return code, the JSON callback's output)."""
    proc.wait(timeout)
    out, err = output(proc)
    assert CANARY not in out + err
    assert out.startswith("{"), (proc.returncode, err[-2000:])
    return proc.returncode, json.loads(out)


def playbook_json(path, *args, timeout=1200):
    """Run ROOT/path against the scenario's inventory to its end: (return code, the JSON callback's output)."""
    return finish(start_playbook(path, *args), timeout)


def changed(result, host):
    return result["stats"][host]["changed"]


def failures(result, host):
    """(task name, message) of every failed or unreachable task of host in the run."""
    found = []
    for play in result["plays"]:
        for task in play["tasks"]:
            outcome = task["hosts"].get(host, {})
            if outcome.get("failed") or outcome.get("unreachable"):
                found.append((task["task"]["name"], failure_message(outcome)))
    return found
