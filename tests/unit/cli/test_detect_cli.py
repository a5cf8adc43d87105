"""instinct-stack detect, end to end through ansible-runner against the demo inventory."""

import json
import os

from instinct_stack.cli import main
from instinct_stack.detect import format_table, hosts_from_events

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_detect_json_on_the_demo_inventory(capsys):
    assert main(["detect", "-i", os.path.join(REPO, "inventories", "demo"), "--json"]) == 0
    rows = {row["host"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"captured-mi300x", "this-machine"}
    mi300x = rows["captured-mi300x"]
    assert mi300x["ok"] and mi300x["source_used"] == "kfd"
    assert mi300x["pytorch_rocm_arch"] == "gfx942"
    assert len(mi300x["gpus"]) == 8
    assert rows["this-machine"]["ok"]


def test_detect_failure_exits_non_zero_with_the_message(capsys, fixture_path):
    code = main(
        [
            "detect",
            "-i",
            os.path.join(REPO, "inventories", "demo"),
            "--limit",
            "captured-mi300x",
            "--source",
            "kfd",
            "--sysfs-root",
            fixture_path("kfd", "rx7900xtx-unsupported"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "captured-mi300x" in out and "FAILED" in out and "gfx1100" in out


def test_limit_matching_nothing_is_an_error(capsys):
    assert main(["detect", "-i", os.path.join(REPO, "inventories", "demo"), "--limit", "no-such-host"]) == 2
    assert "no host ran gfx_arch" in capsys.readouterr().err


def event(kind, host, res, action="instinct.stack.gfx_arch"):
    return {"event": kind, "event_data": {"host": host, "task_action": action, "res": res}}


def test_hosts_from_events_and_table():
    events = [
        event(
            "runner_on_ok",
            "b",
            {
                "gpus": [{"gfx": "gfx90a", "marketing_name": "AMD Instinct MI210"}] * 2,
                "gfx_arch": ["gfx90a"],
                "pytorch_rocm_arch": "gfx90a",
                "source_used": "pci",
            },
        ),
        event("runner_on_failed", "a", {"msg": "no AMD GPU detected"}),
        event("runner_on_ok", "b", {"msg": "report"}, action="ansible.builtin.debug"),
        {"event": "runner_on_unreachable", "event_data": {"host": "c", "res": {"msg": "ssh: timed out"}}},
    ]
    rows = hosts_from_events(events)
    assert [(row["host"], row["ok"]) for row in rows] == [("a", False), ("b", True), ("c", False)]
    table = format_table(rows).splitlines()
    assert table[0].split() == ["HOST", "GPUS", "GFX", "SOURCE"]
    assert table[1].startswith("a ") and "FAILED: no AMD GPU detected" in table[1]
    assert "2 (AMD Instinct MI210)" in table[2] and "gfx90a" in table[2] and table[2].endswith("pci")
    assert "unreachable: ssh: timed out" in table[3]


def test_status_reads_what_status_yml_hands_over_on_the_demo_inventory(capsys):
    # End to end through ansible-runner: playbooks/status.yml hands each host's results over as the run's stats
    # (instinct_status), and nothing else; a playbook that stopped handing them over leaves no row here.
    main(["status", "-i", os.path.join(REPO, "inventories", "demo"), "--json"])
    rows = {row["host"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"captured-mi300x", "this-machine"}
    mi300x = rows["captured-mi300x"]
    assert mi300x["error"] is None and mi300x["gfx_arch"] == ["gfx942"]
    assert mi300x["driver"] == {"reboot_pending": False, "load_failed": False, "reason": "amdgpu-dkms is not installed"}
    assert mi300x["rocm"] is None and mi300x["stack"] is None
