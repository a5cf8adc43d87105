"""Fixtures shared by the unit tests: the captured-output fixture tree."""

import json
import os

import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


@pytest.fixture
def fixture_path():
    def path(*parts):
        full = os.path.join(FIXTURES, *parts)
        assert os.path.exists(full), full
        return full

    return path


@pytest.fixture
def rocminfo_text(fixture_path):
    def read(name):
        with open(fixture_path("rocminfo", name + ".txt")) as handle:
            return handle.read()

    return read


@pytest.fixture
def pci_sysfs(fixture_path, tmp_path):
    """Lay out a PCI sysfs tree (bus/pci/devices/ADDRESS/{vendor,device,class}) from tests/fixtures/pci/NAME.json.

    The device directories are named by PCI address, which contains colons, so they are kept as JSON
    (colons are not portable file names) and written out per test.
    """

    def make(name):
        with open(fixture_path("pci", name + ".json")) as handle:
            devices = json.load(handle)
        root = tmp_path / ("sysfs-" + name)
        for address, files in devices.items():
            device_dir = root / "bus" / "pci" / "devices" / address
            device_dir.mkdir(parents=True)
            for filename, value in files.items():
                (device_dir / filename).write_text(value + "\n")
        return str(root)

    return make


@pytest.fixture
def fixture_hub_server(tmp_path, monkeypatch):
    """The fixture Hub (tests/harness/fixture_hub.py) on a loopback port, with an empty repository root, and the
    client's environment cleared of this machine's HF_* settings (no token of its user is read)."""
    from tests.harness import fixture_hub

    for name in list(os.environ):
        if name.startswith("HF_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    root = tmp_path / "hub"
    root.mkdir()
    server = fixture_hub.FixtureHub(str(root)).start()
    yield server
    server.shutdown()
