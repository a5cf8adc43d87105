"""The rollout report and live progress, from ansible-runner events."""

import base64
import io
import json

from instinct_stack.rollout import REPORT_STATS, Progress, build_report, failure_message


def event(kind, host, task, res=None, role=None, action="ansible.builtin.command", **extra):
    data = {"host": host, "task": task, "role": role, "task_action": action, "res": res or {}}
    data.update(extra)
    return {"event": kind, "event_data": data}


EVENTS = [
    {
        "event": "playbook_on_task_start",
        "event_data": {"task": "Detect the gfx architecture of every GPU", "role": "rocm"},
    },
    event(
        "runner_on_ok",
        "gpu1",
        "Detect the gfx architecture of every GPU",
        role="rocm",
        action="instinct.stack.gfx_arch",
        res={"changed": False, "gfx_arch": ["gfx942"], "pytorch_rocm_arch": "gfx942"},
    ),
    event("runner_on_ok", "gpu1", "Install the ROCm packages", role="rocm", res={"changed": True}),
    event("runner_on_ok", "gpu1", "A task of any name", role="vllm", action="ansible.builtin.set_stats"),
    event(
        "runner_on_failed",
        "gpu2",
        "Wait for /health of llama",
        role="vllm_service",
        res={"msg": "timed out"},
        ignore_errors=True,
    ),
    event(
        "runner_on_failed",
        "gpu2",
        "Fail with the journal of a service that did not come up",
        role="vllm_service",
        res={"msg": "vllm-llama did not answer /health"},
    ),
    event("runner_on_unreachable", "gpu3", "Gathering Facts", res={"msg": "ssh: connect timed out"}),
]
# What the vllm role hands the report (ansible.builtin.set_stats), as ansible-runner's last event carries it.
STACK = {"torch": "2.9.0a0+rocm7.0.2", "hip": "7.0.2-56", "vllm": "0.11.0"}
STATS = {"event": "playbook_on_stats", "event_data": {"artifact_data": {REPORT_STATS: {"gpu1": {"stack": STACK}}}}}


def test_report_per_host():
    report = build_report(EVENTS + [STATS], rc=2)
    assert report["ok"] is False and report["rc"] == 2
    gpu1 = report["hosts"]["gpu1"]
    assert gpu1["gfx_arch"] == ["gfx942"] and gpu1["pytorch_rocm_arch"] == "gfx942"
    assert gpu1["stack"] == STACK
    # Without the handed stats (a run that stopped before the vllm role), no stack, whatever the tasks' names.
    assert build_report(EVENTS, rc=2)["hosts"]["gpu1"]["stack"] is None
    assert gpu1["changed_tasks"] == ["rocm : Install the ROCm packages"] and gpu1["changed"] == 1
    assert gpu1["failures"] == []
    gpu2 = report["hosts"]["gpu2"]
    assert gpu2["failures"] == [
        {
            "task": "vllm_service : Fail with the journal of a service that did not come up",
            "msg": "vllm-llama did not answer /health",
        }
    ]
    assert report["hosts"]["gpu3"]["unreachable"] is True


def test_clean_run_is_ok():
    report = build_report(EVENTS[:4], rc=0)
    assert report["ok"] is True


def test_progress_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(stream)
    for item in EVENTS:
        progress.handle(item)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 6  # one per host result
    assert lines[0].startswith("gpu1") and "ok=1" in lines[0] and "rocm : Detect the gfx architecture" in lines[0]
    assert "changed=1" in lines[1]
    # The failure with ignore_errors counts as ignored, as PLAY RECAP counts it, not as failed.
    assert lines[3].startswith("gpu2") and "failed=0" in lines[3]
    assert progress.hosts["gpu2"].counts["ignored"] == 1
    assert lines[4].startswith("gpu2") and "failed=1" in lines[4]
    assert lines[5].startswith("gpu3") and "unreachable=1" in lines[5]


def test_exit_codes():
    from instinct_stack.rollout import exit_code

    assert exit_code(build_report(EVENTS[:4], rc=0)) == 0
    assert exit_code(build_report(EVENTS, rc=2)) == 1
    # ansible-playbook stopped before any host (an inventory that does not parse, a vault it cannot open).
    assert exit_code(build_report([], rc=1)) == 2
    # Nothing matched: rc 0 and no host at all is still not a success.
    assert exit_code(build_report([], rc=0)) == 2


def test_report_shows_the_last_driver_check_per_host():
    def driver(pending, reason):
        return event(
            "runner_on_ok",
            "gpu1",
            "Compare the installed amdgpu module with the loaded one",
            role="rocm",
            action="instinct.stack.amdgpu_driver",
            res={"changed": False, "reboot_pending": pending, "load_failed": False, "reason": reason},
        )

    report = build_report([driver(True, "reboot to load it"), driver(False, "loaded")], rc=0)
    assert report["hosts"]["gpu1"]["reboot"] == {"pending": False, "load_failed": False, "reason": "loaded"}
    pending = build_report([driver(True, "reboot to load it")], rc=0)["hosts"]["gpu1"]["reboot"]
    assert pending["pending"] is True and pending["reason"] == "reboot to load it"
    assert build_report(EVENTS[:2], rc=0)["hosts"]["gpu1"]["reboot"] is None


def test_a_converged_host_is_reported_from_its_check():
    """A host site.yml's fast path left alone ran no role: the check carries its record's summary and its stack."""
    summary = {
        "gfx_arch": ["gfx942"],
        "pytorch_rocm_arch": "gfx942",
        "reboot": {"pending": True, "load_failed": False, "reason": "amdgpu-dkms 6.14 is installed: reboot"},
    }
    stack = {"key": "0123456789abcdef", "torch": "2.9.0a0+rocm7.0.2", "hip": "7.0.2-56", "vllm": "0.11.0"}
    events = [
        event("runner_on_ok", "gpu1", "Take the rollout lock", action="instinct.stack.rollout_lock"),
        event(
            "runner_on_ok",
            "gpu1",
            "Check whether the host is as the last whole rollout left it",
            action="instinct.stack.converged",
            res={"changed": False, "converged": True, "reasons": [], "summary": summary, "stack": stack},
        ),
        event(
            "runner_on_ok",
            "gpu2",
            "Check whether the host is as the last whole rollout left it",
            action="instinct.stack.converged",
            res={"changed": False, "converged": False, "reasons": ["no record"]},
        ),
        # The record after a whole rollout says converged too, without a summary: not a skipped host.
        event(
            "runner_on_ok",
            "gpu2",
            "Record the hosts that ran the whole rollout, for the next run's check",
            action="instinct.stack.converged",
            res={"changed": True, "converged": True, "reasons": ["no record"]},
        ),
    ]
    report = build_report(events, rc=0)
    gpu1, gpu2 = report["hosts"]["gpu1"], report["hosts"]["gpu2"]
    assert gpu1["converged"] is True and gpu1["changed"] == 0
    assert gpu1["gfx_arch"] == ["gfx942"] and gpu1["pytorch_rocm_arch"] == "gfx942"
    assert gpu1["reboot"] == summary["reboot"] and gpu1["stack"] == stack
    assert gpu2["converged"] is False and gpu2["gfx_arch"] is None and gpu2["stack"] is None
    from instinct_stack.rollout import summary_table

    stream = io.StringIO()
    summary_table(report, stream)
    row = [line for line in stream.getvalue().splitlines() if "gpu1" in line][0]
    assert "gfx942" in row and "2.9.0a0+rocm7.0.2 / 0.11.0" in row and "converged: nothing to do" in stream.getvalue()
    assert "reboot pending: amdgpu-dkms 6.14 is installed: reboot" in stream.getvalue()


def test_status_rows_from_events():
    from instinct_stack.status import STATUS_PARTS, STATUS_STATS, format_status, hosts_from_events

    record = base64.b64encode(json.dumps({"key": "abc123def4567890", "torch": "2.9.0", "vllm": "0.11.0"}).encode())
    handed = {
        "gpu1": {
            "driver": {"reboot_pending": True, "reason": "r"},
            "rocm": {"content": base64.b64encode(b"7.0.2-56\n").decode()},
            "gfx": {"gfx_arch": ["gfx942"]},
            "stack": {"content": record.decode()},
            "units": {"rc": 0},
            "services": {"results": [{"item": "vllm-llama.service", "stdout": "ActiveState=active\nSubState=running"}]},
            "health": {"results": [{"item": {"item": "vllm-llama.service"}, "status": 200}]},
            # find -printf '%f %l': the instance's link and the previous one (left out).
            "models": {
                "stdout": "llama /var/lib/instinct-stack/models/meta-llama--Llama-3.1-8B/%s\n"
                "llama.previous /var/lib/instinct-stack/models/meta-llama--Llama-3.1-8B/%s" % ("0e9e" * 10, "1" * 40)
            },
            "ray": {"results": []},
        }
    }
    assert set(handed["gpu1"]) == set(STATUS_PARTS)
    events = [
        event("runner_on_ok", "gpu1", "Any name", action="ansible.builtin.set_stats"),
        event("runner_on_failed", "gpu2", "Read the ROCm release", res={"msg": "sudo: a password is required"}),
        event("runner_on_unreachable", "gpu3", "Compare", res={"msg": "ssh: timed out"}),
        {"event": "playbook_on_stats", "event_data": {"artifact_data": {STATUS_STATS: handed}}},
    ]
    rows = {row["host"]: row for row in hosts_from_events(events)}
    gpu1 = rows["gpu1"]
    assert gpu1["ok"] is True and gpu1["rocm"] == "7.0.2-56" and gpu1["driver"]["reboot_pending"] is True
    assert gpu1["stack"] == {"key": "abc123def4567890", "torch": "2.9.0", "vllm": "0.11.0"}
    assert gpu1["services"] == [
        {
            "name": "vllm-llama.service",
            "state": "active/running",
            "health": True,
            "model": "meta-llama/Llama-3.1-8B@" + "0e9e" * 10,
        }
    ]
    assert rows["gpu2"]["ok"] is False and "sudo: a password is required" in rows["gpu2"]["error"]
    assert rows["gpu3"]["error"] == "unreachable: ssh: timed out"
    table = format_status(list(rows.values()))
    assert "reboot pending" in table and "abc123def456 " in table
    assert "vllm-llama active/running health=ok model=meta-llama/Llama-3.1-8B@0e9e0e9e0e9e" in table


def test_status_shows_a_serving_group_its_nodes_and_rays_view():
    from instinct_stack.status import STATUS_STATS, format_status, hosts_from_events

    def show(description):
        return "ActiveState=active\nSubState=running\nDescription=%s" % description

    cluster = [
        {"node_id": "a", "address": "10.0.0.11", "alive": True, "gpus": 8},
        {"node_id": "b", "address": "10.0.0.12", "alive": False, "gpus": 8},
    ]
    handed = {
        "gpu1": {
            "units": {"rc": 0},
            "services": {
                "results": [
                    {"item": "vllm-big-ray.service", "stdout": show("Ray head of serving group big (gpu1, gpu2)")},
                    {"item": "vllm-big.service", "stdout": show("vLLM OpenAI-compatible server big (m)")},
                ]
            },
            "health": {"results": [{"item": {"item": "vllm-big.service"}, "status": 200}]},
            "ray": {"results": [{"item": {"item": "vllm-big-ray.service"}, "nodes": cluster, "missing": []}]},
        },
        "gpu2": {
            "units": {"rc": 0},
            "services": {
                "results": [
                    {"item": "vllm-big-ray.service", "stdout": show("Ray worker of serving group big (gpu1, gpu2)")}
                ]
            },
            "health": {"results": [{"item": {"item": "vllm-big-ray.service"}, "skipped": True}]},
            "ray": {"results": [{"item": {"item": "vllm-big-ray.service"}, "skipped": True}]},
        },
    }
    events = [{"event": "playbook_on_stats", "event_data": {"artifact_data": {STATUS_STATS: handed}}}]
    rows = {row["host"]: row for row in hosts_from_events(events)}
    head_ray = rows["gpu1"]["services"][0]["ray"]
    assert head_ray["role"] == "head" and head_ray["nodes"] == ["gpu1", "gpu2"] and head_ray["dead"] == ["10.0.0.12"]
    # The head serves, but Ray sees a node of its group dead: the host is not ok.
    assert rows["gpu1"]["ok"] is False
    # A worker has no /health of its own: its Ray unit running is what it answers for.
    assert rows["gpu2"]["ok"] is True and rows["gpu2"]["services"][0]["ray"] == {
        "role": "worker",
        "nodes": ["gpu1", "gpu2"],
    }
    table = format_status(list(rows.values()))
    assert "vllm-big-ray active/running head of gpu1+gpu2 ray=10.0.0.11(up,8GPU)+10.0.0.12(DEAD,8GPU)" in table
    assert "vllm-big-ray active/running worker of gpu1+gpu2" in table


def test_the_report_names_the_model_revision_each_instance_serves():
    from instinct_stack.rollout import summary_table

    handed = {"gpu1": {"models": {"llama": "meta-llama/Llama-3.1-8B@" + "0e9e" * 10}}}
    events = [*EVENTS, {"event": "playbook_on_stats", "event_data": {"artifact_data": {REPORT_STATS: handed}}}]
    report = build_report(events, rc=0)
    assert report["hosts"]["gpu1"]["models"] == handed["gpu1"]["models"]
    stream = io.StringIO()
    summary_table(report, stream)
    assert "llama serves meta-llama/Llama-3.1-8B@" + "0e9e" * 10 in stream.getvalue()


def test_a_failed_loop_reports_its_failed_items_messages():
    # The build farm waits for a wave of torch builds in a loop: Ansible's message for the task only says that items
    # failed; the report gives each failed build's own message (what to fix).
    full = "The filesystem of /var/lib/instinct-stack/build is full (0 MiB free): point build_staging_dir ..."
    res = {
        "msg": "One or more items failed",
        "results": [{"failed": False, "msg": "built"}, {"failed": True, "msg": full}, "not a result"],
    }
    events = [event("runner_on_failed", "build1", "Wait for the torch build for gfx942", role="pytorch", res=res)]
    (failure,) = build_report(events, rc=2)["hosts"]["build1"]["failures"]
    assert failure["msg"] == full
    assert failure_message({"msg": "plain"}) == "plain"
    assert failure_message({"results": [{"failed": True}]}, default="failed") == "failed"


def test_the_playbooks_hand_the_report_its_stack_as_data():
    # The vllm role (site.yml) and rollback.yml hand each host's stack to the report by set_stats under REPORT_STATS;
    # a playbook that stopped doing so would leave the report's stack column empty, whatever its tasks are named.
    import pathlib

    import yaml

    root = pathlib.Path(__file__).resolve().parents[3]

    def tasks(node):
        for item in node if isinstance(node, list) else []:
            if isinstance(item, dict):
                yield item
                for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks"):
                    yield from tasks(item.get(key))

    for path in ("roles/vllm/tasks/stack.yml", "playbooks/rollback.yml"):
        handed = [
            task["ansible.builtin.set_stats"]
            for task in tasks(yaml.safe_load((root / path).read_text()))
            if "ansible.builtin.set_stats" in task
        ]
        assert len(handed) == 1, path
        (stats,) = handed
        assert list(stats["data"]) == [REPORT_STATS] and "{inventory_hostname: {'stack':" in stats["data"][REPORT_STATS]
        assert stats["per_host"] is False and stats["aggregate"] is True, path
