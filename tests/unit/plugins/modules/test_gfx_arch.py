"""The module as Ansible runs it: argument handling, check mode, failures."""

import json
import os
import stat
import subprocess
import sys

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import gfx_arch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        gfx_arch.main()
    result = json.loads(capsys.readouterr().out)
    return exit_info.value.code, result


@pytest.fixture
def fake_rocminfo(tmp_path, rocminfo_text):
    def make(name, rc=0):
        script = tmp_path / "rocminfo"
        fixture = tmp_path / ("%s.txt" % name)
        fixture.write_text(rocminfo_text(name))
        script.write_text("#!/bin/sh\ncat '%s'\nexit %d\n" % (fixture, rc))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        return str(script)

    return make


def test_kfd_source_in_check_mode(fixture_path, capsys):
    code, result = run_module(
        {"source": "kfd", "sysfs_root": fixture_path("kfd", "mi300x-8gpu"), "_ansible_check_mode": True}, capsys
    )
    assert code == 0
    assert result["changed"] is False
    assert result["pytorch_rocm_arch"] == "gfx942"
    assert len(result["gpus"]) == 8


def test_rocminfo_path(fake_rocminfo, tmp_path, capsys):
    code, result = run_module(
        {"source": "rocminfo", "rocminfo_path": fake_rocminfo("mixed-mi100-mi210"), "sysfs_root": str(tmp_path)}, capsys
    )
    assert code == 0
    assert result["gfx_arch"] == ["gfx908", "gfx90a"]
    assert result["source_used"] == "rocminfo"


def test_rocminfo_path_not_executable(tmp_path, capsys):
    code, result = run_module({"source": "rocminfo", "rocminfo_path": str(tmp_path / "missing")}, capsys)
    assert code == 1
    assert "is not an executable file" in result["msg"]


def test_unknown_arch_fails_naming_it(capsys, pci_sysfs):
    code, result = run_module({"sysfs_root": pci_sysfs("rx7900xtx-unsupported"), "source": "pci"}, capsys)
    assert code == 1
    assert "1002:744c" in result["msg"]


def test_no_gpu_fails_unless_allowed(fixture_path, capsys):
    root = fixture_path("kfd", "cpu-only")
    code, result = run_module({"sysfs_root": root, "source": "kfd"}, capsys)
    assert code == 1 and "no AMD GPU detected" in result["msg"]
    code, result = run_module({"sysfs_root": root, "source": "kfd", "require_gpu": False}, capsys)
    assert code == 0 and result["gpus"] == []


def test_missing_rocminfo_path_counts_as_not_installed_in_auto(tmp_path, fixture_path, capsys):
    code, result = run_module(
        {
            "rocminfo_path": str(tmp_path / "missing"),
            "sysfs_root": fixture_path("kfd", "cpu-only"),
            "require_gpu": False,
        },
        capsys,
    )
    assert code == 0
    assert "rocminfo: rocminfo not found" in result["sources_tried"]


def test_mixed_host_reports_excluded_gpus_and_hip_devices(fixture_path, capsys):
    code, result = run_module({"source": "kfd", "sysfs_root": fixture_path("kfd", "mi300x-radeon-display")}, capsys)
    assert code == 0
    assert result["pytorch_rocm_arch"] == "gfx942"
    assert result["hip_visible_devices"] == "1,2"
    assert [(e["node"], e["gfx"], e["pci_device_id"]) for e in result["excluded"]] == [(1, "gfx1100", "0x7448")]
    assert "allow_radeon=true" in result["excluded"][0]["reason"]


def test_allow_radeon_option(fake_rocminfo, tmp_path, capsys):
    args = {"source": "rocminfo", "rocminfo_path": fake_rocminfo("mi300x-radeon-display"), "sysfs_root": str(tmp_path)}
    code, result = run_module(dict(args, allow_radeon=True), capsys)
    assert code == 0
    assert result["gfx_arch"] == ["gfx1100", "gfx942"] and result["excluded"] == []
    assert result["hip_visible_devices"] == "0,1,2"
    code, result = run_module(args, capsys)
    assert code == 0 and result["gfx_arch"] == ["gfx942"]


def test_only_unsupported_gpus_fail_unless_no_gpu_is_required(fixture_path, capsys):
    root = fixture_path("kfd", "rx7900xtx-unsupported")
    code, result = run_module({"sysfs_root": root, "source": "kfd"}, capsys)
    assert code == 1
    assert "no AMD GPU on this host is a compute target" in result["msg"] and "gfx1100" in result["msg"]
    code, result = run_module({"sysfs_root": root, "source": "kfd", "require_gpu": False}, capsys)
    assert code == 0 and result["gpus"] == [] and [e["gfx"] for e in result["excluded"]] == ["gfx1100"]


def test_unknown_instinct_accelerator_fails(pci_sysfs, capsys):
    code, result = run_module({"sysfs_root": pci_sysfs("mi350p-unknown-accelerator"), "source": "pci"}, capsys)
    assert code == 1
    assert "1002:75a8" in result["msg"] and "processing accelerator" in result["msg"]


def test_bad_source_is_rejected(capsys):
    code, result = run_module({"source": "nvidia-smi"}, capsys)
    assert code == 1
    assert "value of source must be one of" in result["msg"]


def ansible_adhoc(module_args):
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
    )
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    proc = subprocess.run(
        [ansible, "localhost", "-m", "instinct.stack.gfx_arch", "-a", module_args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    start = proc.stdout.find("localhost | ")
    assert start >= 0, proc.stdout + proc.stderr
    status, body = proc.stdout[start:].split(" => ", 1)
    return proc.returncode, status.split(" | ")[1], json.loads(body)


def test_adhoc_rocminfo_from_the_repo_root(fake_rocminfo, tmp_path):
    rc, status, result = ansible_adhoc("source=rocminfo rocminfo_path=%s" % fake_rocminfo("mi300x-8gpu"))
    assert (rc, status) == (0, "SUCCESS"), result
    assert result["pytorch_rocm_arch"] == "gfx942"


def test_adhoc_kfd_tree(fixture_path):
    rc, status, result = ansible_adhoc("source=kfd sysfs_root=%s" % fixture_path("kfd", "mixed-mi100-mi210"))
    assert (rc, status) == (0, "SUCCESS"), result
    assert result["pytorch_rocm_arch"] == "gfx908;gfx90a"


def test_adhoc_failure_is_reported(fixture_path):
    rc, status, result = ansible_adhoc("source=kfd sysfs_root=%s" % fixture_path("kfd", "rx7900xtx-unsupported"))
    assert (rc, status) == (2, "FAILED!")
    assert "gfx1100" in result["msg"]


def test_adhoc_allow_radeon_on_a_mixed_host(fixture_path):
    rc, status, result = ansible_adhoc(
        "source=kfd allow_radeon=true sysfs_root=%s" % fixture_path("kfd", "mi300x-radeon-display")
    )
    assert (rc, status) == (0, "SUCCESS"), result
    assert result["pytorch_rocm_arch"] == "gfx1100;gfx942"
    assert result["hip_visible_devices"] == "0,1,2"
