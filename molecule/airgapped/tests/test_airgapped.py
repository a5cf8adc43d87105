"""The air-gapped guest converged from the instinct-stack mirror alone, and can reach nothing else."""

import json
import os

MIRROR = "http://10.0.2.100"


def upstream_port():
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "mirror.json")) as handle:
        return json.load(handle)["port"]


def http_code(host, url):
    return host.run("curl -s -m 10 -o /dev/null -w '%%{http_code}' %s", url).stdout


def test_mirror_is_reachable(host):
    assert http_code(host, MIRROR + "/manifest.json") == "200"


def test_nothing_else_is_reachable(host):
    # The fixture mirror the air-gapped one was built from runs on the host, one hop away.
    assert http_code(host, "http://10.0.2.2:%d/rocm/rocm.gpg.key" % upstream_port()) == "000"
    assert host.run("curl -s -m 10 http://10.0.2.2:%d/" % upstream_port()).rc != 0


def test_every_source_is_the_mirror(host):
    sources = host.file("/etc/apt/sources.list.d/rocm.sources").content_string
    uris = [line.split(": ", 1)[1] for line in sources.splitlines() if line.startswith("URIs:")]
    assert uris and all(uri.startswith(MIRROR + "/") for uri in uris)
    for checkout in ("pytorch", "triton", "vllm"):
        remote = host.check_output("sudo git -C /var/lib/instinct-stack/src/%s remote get-url origin", checkout)
        assert remote.startswith(MIRROR + "/git/127.0.0.1/git/"), remote


def test_stack_and_service_from_the_mirror(host):
    verified = json.loads(host.file(host.file("/opt/instinct-stack/current").linked_to + "/.verified").content_string)
    assert verified["hip"].startswith("7.0.2")
    assert http_code(host, "http://127.0.0.1:8000/health") == "200"
