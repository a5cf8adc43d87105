"""instinct-stack rollout, through ansible-runner, against the converged guest: a rerun that changes nothing."""

import json
import os
import subprocess
import sys


def test_rollout_reports_the_guest(tmp_path):
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    report_path = tmp_path / "report.json"
    command = [
        os.path.join(os.path.dirname(sys.executable), "instinct-stack"),
        "rollout",
        "-i",
        inventory,
        "--report",
        str(report_path),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
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
    assert "changed=0" in proc.stdout and name in proc.stdout
    assert "molecule-canary-key" not in proc.stdout + proc.stderr + report_path.read_text()
