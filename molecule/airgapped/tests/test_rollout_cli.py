"""instinct-stack rollout, through ansible-runner, against the converged guest: a rerun that changes nothing; a -vvv
rerun that opens the API key's vault with --vault-password-file and shows the key nowhere; a run without the vault
password that stops before the service is touched."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

# The scenario's API key (molecule/shared/vault/api-key.yml.vault holds it), searched for; and the vault's test
# password, which molecule's provisioner.env also gives every run as ANSIBLE_VAULT_PASSWORD_FILE.
SECRET = "molecule-canary-key-5f3a9c"  # noqa: S105 - the test value the scenario's vault file holds
VAULT_PASSWORD_FILE = Path(__file__).resolve().parents[2] / "shared" / "vault" / "password"


def ephemeral_json(name):
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], name)) as handle:
        return json.load(handle)


def instinct_stack(subcommand, tmp_path, *args, timeout=1200, env=None):
    """The CLI against the scenario's inventory, its artifacts in tmp_path/run."""
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    command = [os.path.join(os.path.dirname(sys.executable), "instinct-stack"), subcommand, "-i", inventory]
    command += ["--run-dir", str(tmp_path / "run"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env)


def without_vault_password():
    """The verifier's environment without the vault password molecule gives it."""
    env = dict(os.environ)
    assert env.pop("ANSIBLE_VAULT_PASSWORD_FILE", None)
    return env


def run_directory_text(tmp_path):
    """Every file ansible-runner left in the run directory (job events, stdout, the command), as text."""
    return "".join(path.read_text(errors="replace") for path in (tmp_path / "run").rglob("*") if path.is_file())


def test_rollout_reports_the_guest(tmp_path):
    report_path = tmp_path / "report.json"
    proc = instinct_stack("rollout", tmp_path, "--report", str(report_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["rc"] == 0
    ((name, host),) = report["hosts"].items()
    assert host["gfx_arch"] == ["gfx942"] and host["pytorch_rocm_arch"] == "gfx942"
    assert host["stack"]["hip"].startswith("7.0.2") and host["stack"]["vllm"] == "0.11.1"
    assert host["changed_tasks"] == [] and host["failures"] == []
    # The converge recorded the host; this whole rerun finds it converged in one check and runs no role.
    assert host["converged"] is True
    assert "converged: nothing to do" in proc.stdout
    # amdgpu-dkms is installed and no amdgpu module of its own is loaded: the report says a reboot is pending.
    assert host["reboot"]["pending"] is True and "amdgpu-dkms" in host["reboot"]["reason"]
    assert "reboot pending: " in proc.stdout
    # The summary table's row: the host, its state and the tasks it changed.
    assert re.search(r"%s\s*│\s*ok\s*│\s*0\s*│\s*gfx942" % re.escape(name), proc.stdout), proc.stdout
    # ansible-runner's artifacts stay in the run directory, without the API key.
    artifacts = [path for path in (tmp_path / "run").rglob("*") if path.is_file()]
    assert any(path.parent.name == "job_events" for path in artifacts)
    assert "run directory: %s" % (tmp_path / "run") in proc.stderr
    everything = proc.stdout + proc.stderr + report_path.read_text()
    everything += "".join(Path(path).read_text(errors="replace") for path in artifacts)
    assert "molecule-canary-key" not in everything


def test_status_reads_the_converged_guest(tmp_path):
    proc = instinct_stack("status", tmp_path, "--json", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ((row),) = json.loads(proc.stdout)
    assert row["ok"] is True and row["error"] is None and row["systemd_error"] is None
    assert row["rocm"].startswith("7.0.2") and row["gfx_arch"] == ["gfx942"]
    assert row["driver"]["reboot_pending"] is True  # amdgpu-dkms installed, no amdgpu module of its own loaded
    assert row["stack"]["vllm"] == "0.11.1" and len(row["stack"]["key"]) >= 12
    # The instance serves the mirror's model at the commit the mirror resolved main to.
    commit = ephemeral_json("airgap-mirror/manifest.json")["models"]["instinct-fixtures/tiny-llama"]["commit"]
    model = "instinct-fixtures/tiny-llama@" + commit
    assert row["services"] == [
        {"name": "vllm-fixture.service", "state": "active/running", "health": True, "model": model}
    ]
    # Read-only: the driver check ran in check mode and the run changed nothing.
    events = [path.read_text() for path in (tmp_path / "run").rglob("job_events/*.json")]
    assert events and not any('"changed": true' in event for event in events)


def test_a_rollout_without_the_vault_password_stops_before_the_service(tmp_path):
    # The key is vaulted: without the password the service role cannot read its instances and stops at once.
    proc = instinct_stack("rollout", tmp_path, "--tags", "vllm_service", "--json", env=without_vault_password())
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    ((_name, host),) = report["hosts"].items()
    assert any("no vault secrets" in failure["msg"] for failure in host["failures"]), host["failures"]
    assert not [task for task in host["changed_tasks"] if task.startswith("vllm_service")], host["changed_tasks"]
    assert "molecule-canary-key" not in proc.stdout + proc.stderr + run_directory_text(tmp_path)


def test_a_verbose_rollout_opens_the_vault_and_shows_the_key_nowhere(tmp_path):
    # -vvv, and the vault password from --vault-password-file alone (not molecule's environment variable).
    proc = instinct_stack(
        "rollout",
        tmp_path,
        "-vvv",
        "--vault-password-file",
        str(VAULT_PASSWORD_FILE),
        # The roles run (not the converged fast path), so the task that writes the key runs at -vvv.
        "-e",
        "instinct_converged_check=false",
        "--json",
        env=without_vault_password(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["rc"] == 0
    artifacts = run_directory_text(tmp_path)
    assert "ESTABLISH SSH CONNECTION FOR USER" in artifacts  # ansible-playbook ran at -vvv
    assert "--vault-password-file" in artifacts  # the runner's record of the command: the option reached it
    # The task that writes the key ran, and its result was hidden.
    assert "Write each service's environment file (API key included)" in artifacts
    for leak in (SECRET, "molecule-canary-key"):
        assert leak not in proc.stdout, "the --json report holds the API key"
        assert leak not in proc.stderr, "the CLI's messages hold the API key"
        assert leak not in artifacts, "ansible-runner's artifacts hold the API key"
