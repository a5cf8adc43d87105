"""The air-gapped machine converged from the instinct-stack mirror alone, and can reach nothing else."""

import json
import os
import urllib.parse

# An address outside this machine (TEST-NET-1, RFC 5737): with no route to it the request fails
# inside the machine, before any packet is sent.
OUTSIDE = "http://192.0.2.1/"


def ephemeral(name):
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], name)) as handle:
        return json.load(handle)


def mirror_url():
    return ephemeral("airgap-mirror.json")["guest_url"]


def http_code(host, url):
    return host.run("curl -s -m 10 -o /dev/null -w '%%{http_code}' %s", url).stdout


def test_mirror_is_reachable(host):
    assert http_code(host, mirror_url() + "/manifest.json") == "200"


def test_the_only_route_is_the_mirrors_address(host):
    routes = json.loads(host.check_output("ip -j -4 route show table main"))
    assert [route["dst"] for route in routes] == [urllib.parse.urlsplit(mirror_url()).hostname], routes
    assert not any("gateway" in route for route in routes)
    assert json.loads(host.check_output("ip -j -6 route show table main") or "[]") == []


def test_an_outside_address_is_unreachable(host):
    request = host.run("curl -sS -m 10 -o /dev/null %s", OUTSIDE)
    assert request.rc == 7, (request.rc, request.stderr)  # curl: could not connect
    probe = host.run("python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), timeout=5)\"")
    assert probe.rc != 0 and "Network is unreachable" in probe.stderr, probe.stderr


def test_the_upstream_fixture_mirror_is_unreachable(host):
    # The mirror the air-gapped one was built from is served on this machine's loopback, one hop away.
    upstream = ephemeral("mirror.json")
    assert upstream["host_url"].startswith("http://127.0.0.1:")
    bridge = urllib.parse.urlsplit(mirror_url()).hostname
    assert http_code(host, "http://%s:%d/rocm/rocm.gpg.key" % (bridge, upstream["port"])) == "000"


def test_every_source_is_the_mirror(host):
    mirror = mirror_url()
    sources = "".join(
        host.file("/etc/apt/sources.list.d/%s.sources" % name).content_string for name in ("rocm", "amdgpu")
    )
    uris = [line.split(": ", 1)[1] for line in sources.splitlines() if line.startswith("URIs:")]
    assert len(uris) == 2 and all(uri.startswith(mirror + "/") for uri in uris), uris
    for checkout in ("pytorch", "triton", "vllm"):
        remote = host.check_output("sudo git -C /var/lib/instinct-stack/src/%s remote get-url origin", checkout)
        assert remote.startswith(mirror + "/git/127.0.0.1/git/"), remote


def test_absolute_submodule_urls_were_rewritten_to_the_mirror(host):
    # The fixture PyTorch's .gitmodules names https://github.com/ as upstream's does; the checkout keeps that URL, its
    # content came from the mirror's git/github.com/ through the role's insteadOf rule, and the build read it.
    src = "/var/lib/instinct-stack/src/pytorch"
    url = host.check_output("sudo git -C %s config -f .gitmodules submodule.third_party/fixture-lib.url", src)
    assert url == "https://github.com/pytorch/fixture-lib.git"
    assert "fixture-lib" in host.check_output("sudo cat %s/third_party/fixture-lib/VERSION", src)
    assert http_code(host, mirror_url() + "/git/github.com/pytorch/fixture-lib.git/info/refs") == "200"
    # No rewrite was written into a gitconfig: it lived in the clone's environment only.
    assert host.run("sudo git config --global --get-regexp '^url\\.'").stdout == ""
    assert host.run("sudo git config --system --get-regexp '^url\\.'").stdout == ""


def test_stack_and_service_from_the_mirror(host):
    verified = json.loads(host.file(host.file("/opt/instinct-stack/current").linked_to + "/.verified").content_string)
    assert verified["hip"].startswith("7.0.2") and verified["platform"] == "rocm"
    assert http_code(host, "http://127.0.0.1:8000/health") == "200"


def test_build_time_downloads_came_from_the_mirror(host):
    # Triton's prebuilt LLVM and PyTorch's AOTriton: `instinct-stack mirror build` named them from the sources at
    # their pinned commits and stored them under files/; the roles fetched them from there and built offline.
    manifest = ephemeral("airgap-mirror/manifest.json")
    downloads = manifest["downloads"]
    assert any(path.endswith("/llvm-7d5de303-ubuntu-x64.tar.gz") for path in downloads.values())
    assert any(path.endswith("-rocm7.0-shared.tar.gz") for path in downloads.values())
    for path in downloads.values():
        assert http_code(host, "%s/%s" % (mirror_url(), path)) == "200"
    inputs = "/var/cache/instinct-stack/downloads"
    assert host.file(inputs + "/llvm-7d5de303-ubuntu-x64/lib/cmake/mlir/MLIRConfig.cmake").exists
    python = "/opt/instinct-stack/current/venv/bin/python"
    assert (
        host.check_output(python + " -c 'import triton._build_info as b; print(b.llvm)'") == "llvm-7d5de303-ubuntu-x64"
    )
    flash = host.check_output(python + " -c 'import torch; print(torch.backends.cuda.is_flash_attention_available())'")
    assert flash == "True"


def test_the_service_serves_the_model_the_mirror_holds(host):
    # `instinct-stack mirror build` fetched the fixture Hub's model at main (the Hub stays on this machine's loopback)
    # and recorded its commit; the roles took that commit from the mirror's manifest and pulled it from models/.
    mirrored = ephemeral("airgap-mirror/manifest.json")["models"]["instinct-fixtures/tiny-llama"]
    assert mirrored["revision"] == "main" and mirrored["commit"] == ephemeral("hub.json")["commits"]["main"]
    revision = "/var/lib/instinct-stack/models/instinct-fixtures--tiny-llama/" + mirrored["commit"]
    assert host.file("/var/lib/instinct-stack/models/served/fixture").linked_to == revision
    manifest = json.loads(host.file(revision + ".json").content_string)
    for entry in manifest["files"]:
        assert host.check_output("sha256sum %s/%s", revision, entry["path"]).split()[0] == entry["sha256"]
    # No Hub client on the guest and no request to a Hub: the service loads the directory offline.
    assert not host.file("/opt/instinct-stack/hub-venv").exists
    assert "Environment=HF_HUB_OFFLINE=1" in host.check_output("systemctl cat vllm-fixture.service")
    assert http_code(host, mirror_url() + "/models/instinct-fixtures--tiny-llama/%s.json" % mirrored["commit"]) == "200"
