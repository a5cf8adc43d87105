"""instinct.stack.amdgpu_driver as Ansible runs it: the record it keeps, check mode."""

import json

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import amdgpu_driver

PACKAGE = "1:6.14.14.30100200-2212064.22.04"


@pytest.fixture
def fake_host(tmp_path, monkeypatch):
    """A host root with the package's DKMS source and a boot id, and dpkg-query/modinfo answering as on it."""
    conf = tmp_path / "usr" / "src" / "amdgpu-6.14.14" / "dkms.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text('PACKAGE_NAME="amdgpu"\nPACKAGE_VERSION="6.14.14"\n')
    boot_id = tmp_path / "proc" / "sys" / "kernel" / "random" / "boot_id"
    boot_id.parent.mkdir(parents=True)
    boot_id.write_text("boot-1\n")
    answers = {"dpkg-query": (0, PACKAGE, ""), "modinfo": (1, "", "modinfo: ERROR: Module amdgpu not found.\n")}
    monkeypatch.setattr(amdgpu_driver.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(amdgpu_driver.AnsibleModule, "run_command", lambda self, argv, **kwargs: answers[argv[0]])
    return tmp_path


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        amdgpu_driver.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_records_the_pending_reboot_once(fake_host, capsys):
    state = fake_host / "var" / "state.json"
    args = {"root": str(fake_host), "state_path": str(state)}
    code, first = run_module(args, capsys)
    assert code == 0 and first["changed"] is True and first["reboot_pending"] is True
    assert json.loads(state.read_text())["boot_id"] == "boot-1"
    code, again = run_module(args, capsys)
    assert again["changed"] is False and again["reboot_pending"] is True


def test_check_mode_writes_nothing(fake_host, capsys):
    state = fake_host / "var" / "state.json"
    code, result = run_module({"root": str(fake_host), "state_path": str(state), "_ansible_check_mode": True}, capsys)
    assert result["changed"] is True and result["reboot_pending"] is True
    assert not state.exists()
