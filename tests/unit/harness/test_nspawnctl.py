"""The pure parts of the molecule machine helper (tests/harness/nspawnctl.py): addresses, names, network files."""

import os

import pytest

from tests.harness import nspawnctl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def machine(name="node1", address="10.232.0.11/24", airgapped=False, bridge="im-cluster"):
    bridge = nspawnctl.Bridge(bridge, nspawnctl.gateway_of(address))
    return nspawnctl.Machine(name, "/work", "/image", address, bridge, "ssh-ed25519 AAAA", airgapped)


def test_the_bridge_takes_the_networks_first_address():
    assert nspawnctl.gateway_of("10.232.0.11/24") == "10.232.0.1/24"
    assert nspawnctl.gateway_of("10.231.0.26/16") == "10.231.0.1/16"


def test_bridge_names_longer_than_the_kernel_allows_are_refused():
    with pytest.raises(ValueError, match="15 characters"):
        nspawnctl.Bridge("im-a-very-long-scenario", "10.0.0.1/24")


def test_interface_and_namespace_names_fit_and_differ_per_bridge():
    one, other = machine(), machine(bridge="im-airgapped")
    assert len(one.veth) <= 15 and one.veth != other.veth and one.netns != other.netns
    assert one.veth == machine().veth  # stop, in another process, finds what start made


def test_a_connected_machine_reaches_its_network_without_a_default_route():
    config = machine().network_config()
    assert "Address=10.232.0.11/24" in config
    assert "Gateway=" not in config and "[Route]" not in config
    assert "LinkLocalAddressing=no" in config


def test_an_airgapped_machine_reaches_only_the_bridge_address():
    config = machine("instinct-airgapped", "10.233.0.11/24", airgapped=True, bridge="im-airgapped").network_config()
    assert "Address=10.233.0.11/32" in config
    assert "[Route]\nDestination=10.233.0.1/32\nScope=link" in config
    assert "Gateway=" not in config and "LinkLocalAddressing=no" in config


def test_the_cli_refuses_to_run_unprivileged(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as stop:
        nspawnctl.main(["down", "--workdir", "/tmp/x", "--bridge", "im-x"])  # noqa: S108
    assert stop.value.code == 2
    assert "run as root" in capsys.readouterr().err
