"""instinct-stack rollout, through ansible-runner, against the converged guest: a rerun that changes nothing."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path


def instinct_stack(subcommand, tmp_path, *args, timeout=1200):
    """The CLI against the scenario's inventory, its artifacts in tmp_path/run."""
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    command = [os.path.join(os.path.dirname(sys.executable), "instinct-stack"), subcommand, "-i", inventory]
    command += ["--run-dir", str(tmp_path / "run"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def test_rollout_reports_the_guest(tmp_path):
    report_path = tmp_path / "report.json"
    proc = instinct_stack("rollout", tmp_path, "--report", str(report_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["rc"] == 0
    ((name, host),) = report["hosts"].items()
    assert host["gfx_arch"] == ["gfx942"] and host["pytorch_rocm_arch"] == "gfx942"
    assert host["stack"]["hip"].startswith("7.0.2") and host["stack"]["vllm"] == "0.11.0"
    assert host["changed_tasks"] == [] and host["failures"] == []
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
    assert row["stack"]["vllm"] == "0.11.0" and len(row["stack"]["key"]) >= 12
    assert row["services"] == [{"name": "vllm-fixture.service", "state": "active/running", "health": True}]
    # Read-only: the driver check ran in check mode and the run changed nothing.
    events = [path.read_text() for path in (tmp_path / "run").rglob("job_events/*.json")]
    assert events and not any('"changed": true' in event for event in events)
