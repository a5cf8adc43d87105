"""vllm-fixture.service: hardened, loopback only, restarted exactly once by a change. Its API key is checked in
molecule/shared/tests/test_api_key.py, which every scenario runs."""

import json

# The qemu guest; the build host beside it (an nspawn machine) is checked in test_stack.py.
testinfra_hosts = ["inference_hosts"]

UNIT = "vllm-fixture.service"


def test_unit_enabled_and_active(host):
    service = host.service(UNIT)
    assert service.is_enabled and service.is_running


def test_runs_as_unprivileged_user_in_gpu_groups_from_the_stack(host):
    main_pid = host.check_output("systemctl show -p MainPID --value %s", UNIT)
    status = host.file("/proc/%s/status" % main_pid).content_string
    uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
    assert uid == str(host.user("vllm").uid) and host.user("vllm").uid != 0
    assert {"video", "render"} <= set(host.user("vllm").groups)
    cmdline = host.file("/proc/%s/cmdline" % main_pid).content_string.replace("\0", " ")
    assert "/opt/instinct-stack/current/venv/" in cmdline and " serve fixture-model " in cmdline


def test_vllm_detected_the_rocm_platform(host):
    with host.sudo():
        journal = host.check_output("journalctl --no-pager -u %s", UNIT)
    assert "Automatically detected platform rocm." in journal
    assert "Failed to infer device type" not in journal


def test_listens_only_on_loopback(host):
    assert host.socket("tcp://127.0.0.1:8000").is_listening
    assert not host.socket("tcp://0.0.0.0:8000").is_listening


def test_health(host):
    assert host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == "200"


def test_hardening(host):
    show = dict(
        line.split("=", 1)
        for line in host.check_output(
            "systemctl show -p NoNewPrivileges -p ProtectSystem -p PrivateTmp -p DevicePolicy -p Restart -p User %s",
            UNIT,
        ).splitlines()
    )
    assert show == {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "DevicePolicy": "closed",
        "Restart": "on-failure",
        "User": "vllm",
    }
    assert "DeviceAllow=/dev/kfd rw" in host.file("/etc/systemd/system/" + UNIT).content_string


def test_config_change_restarted_exactly_once(host):
    effect = json.loads(host.file("/var/tmp/instinct-side-effect.json").content_string)  # noqa: S108 - on the guest
    assert effect["before"] != effect["after"]
    assert effect["starts"] == 1
    assert '"--gpu-memory-utilization" "0.8"' in effect["exec_start"]
    # The service runs the changed unit: the one on disk, and the one systemd loaded.
    unit = host.file("/etc/systemd/system/" + UNIT).content_string
    assert '"--gpu-memory-utilization" "0.8"' in unit and '"0.9"' not in unit
    assert "0.8" in host.check_output("systemctl show -p ExecStart --value %s", UNIT)
