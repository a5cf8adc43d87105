"""The reboot decision from the installed and the loaded amdgpu module, not from a marker file."""

import json

from ansible_collections.instinct.stack.plugins.module_utils import amdgpu_driver

PACKAGE = "1:6.14.14.30100200-2212064.22.04"
BOOT = "3f1c2b7e-0000-4000-8000-000000000001"
NEXT_BOOT = "3f1c2b7e-0000-4000-8000-000000000002"


def host(tmp_path, loaded=None, sources=("6.14.14",), secure_boot=None, boot=BOOT):
    """A host tree: /usr/src/amdgpu-*/dkms.conf as the package ships it, sysfs, the boot id."""
    for version in sources:
        conf = tmp_path / "usr" / "src" / ("amdgpu-" + version) / "dkms.conf"
        conf.parent.mkdir(parents=True)
        conf.write_text('PACKAGE_NAME="amdgpu"\nPACKAGE_VERSION="%s"\n' % version)
    if loaded:
        version = tmp_path / "sys" / "module" / "amdgpu" / "version"
        version.parent.mkdir(parents=True)
        version.write_text(loaded + "\n")
    if secure_boot is not None:
        variable = tmp_path / "sys" / amdgpu_driver.SECURE_BOOT_VARIABLE
        variable.parent.mkdir(parents=True)
        variable.write_bytes(b"\x06\x00\x00\x00" + (b"\x01" if secure_boot else b"\x00"))
    boot_id = tmp_path / "proc" / "sys" / "kernel" / "random" / "boot_id"
    boot_id.parent.mkdir(parents=True, exist_ok=True)
    boot_id.write_text(boot + "\n")
    return str(tmp_path)


def test_a_fresh_install_needs_a_reboot_without_any_marker(tmp_path):
    result, state = amdgpu_driver.inspect(PACKAGE, None, host(tmp_path))
    assert result["reboot_pending"] is True and result["load_failed"] is False
    assert result["installed_module"] == "6.14.14" and result["loaded_module"] is None
    assert "reboot to load it" in result["reason"]
    assert state == {"package_version": PACKAGE, "boot_id": BOOT, "installed_module": "6.14.14"}


def test_the_pending_reboot_stays_recorded_until_the_host_reboots(tmp_path):
    root = host(tmp_path)
    first = {"package_version": PACKAGE, "boot_id": BOOT, "installed_module": "6.14.14"}
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps(first))
    result, state = amdgpu_driver.inspect(PACKAGE, None, root, amdgpu_driver.read_state(str(state_path)))
    assert result["reboot_pending"] is True and state == first  # a rerun writes nothing


def test_the_installed_module_loaded_needs_nothing_and_drops_the_record(tmp_path):
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps({"package_version": PACKAGE, "boot_id": BOOT}))
    result, state = amdgpu_driver.inspect(PACKAGE, "6.14.14", host(tmp_path, loaded="6.14.14", boot=NEXT_BOOT))
    assert result["reboot_pending"] is False and result["load_failed"] is False and state is None


def test_an_older_loaded_module_needs_a_reboot(tmp_path):
    result, _state = amdgpu_driver.inspect(PACKAGE, "6.14.14", host(tmp_path, loaded="6.12.12"))
    assert result["reboot_pending"] is True and "amdgpu 6.12.12" in result["reason"]


def test_no_module_after_a_reboot_is_a_load_failure_naming_secure_boot(tmp_path):
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps({"package_version": PACKAGE, "boot_id": BOOT}))
    result, state = amdgpu_driver.inspect(
        PACKAGE, None, host(tmp_path, secure_boot=True, boot=NEXT_BOOT), amdgpu_driver.read_state(str(state_path))
    )
    assert result["reboot_pending"] is False and result["load_failed"] is True
    assert "rebooted" in result["reason"] and "Secure Boot is enabled" in result["reason"]
    assert result["secure_boot"] is True and state["boot_id"] == BOOT


def test_secure_boot_off_is_not_blamed(tmp_path):
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps({"package_version": PACKAGE, "boot_id": BOOT}))
    result, _state = amdgpu_driver.inspect(
        PACKAGE, None, host(tmp_path, secure_boot=False, boot=NEXT_BOOT), amdgpu_driver.read_state(str(state_path))
    )
    assert result["load_failed"] is True and "Secure Boot" not in result["reason"]
    assert result["secure_boot"] is False


def test_an_upgrade_after_a_reboot_is_pending_again(tmp_path):
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps({"package_version": "1:6.12.12-1", "boot_id": BOOT}))
    result, state = amdgpu_driver.inspect(
        PACKAGE, None, host(tmp_path, boot=NEXT_BOOT), amdgpu_driver.read_state(str(state_path))
    )
    assert result["reboot_pending"] is True and state["package_version"] == PACKAGE and state["boot_id"] == NEXT_BOOT


def test_without_amdgpu_dkms_nothing_is_pending(tmp_path):
    result, state = amdgpu_driver.inspect(None, None, host(tmp_path, sources=()))
    assert result["reboot_pending"] is False and state is None


def test_old_source_trees_are_named_and_the_newest_counts(tmp_path):
    result, _state = amdgpu_driver.inspect(PACKAGE, None, host(tmp_path, sources=("6.8.5", "6.14.14", "6.10.5")))
    assert result["installed_module"] == "6.14.14"
    assert result["leftover_sources"] == ["6.8.5", "6.10.5"]


def test_a_damaged_record_counts_as_none(tmp_path):
    state_path = tmp_path / "state.json"
    state_path.write_text("{not json")
    result, state = amdgpu_driver.inspect(PACKAGE, None, host(tmp_path), amdgpu_driver.read_state(str(state_path)))
    assert result["reboot_pending"] is True and state["boot_id"] == BOOT
