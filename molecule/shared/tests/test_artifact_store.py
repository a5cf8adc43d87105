"""The artifact store, in every scenario (verifier.additional_files_or_dirs in their molecule.yml): the build host
serves its wheels, stack locks and stack archives read-only over HTTP (instinct-stack-store.service running the
distribution's nginx, roles/vllm/tasks/store.yml), and each inference host's stack is the archive the build host
published (by its sha256), unpacked at the path where the build host assembled it; a build host that alone needs
its stack takes it in place and packs no archive. No wheel went through the
controller: benchmarks/scale.py counts the bytes that cross it (BENCHMARKS.md, "Scale"). A cut download resumes with
a range request, which the store answers with 206 (benchmarks/store_pull.py measures the store with 16 hosts pulling
a model at once).
"""

import hashlib
import json

import pytest

testinfra_hosts = ["inference_hosts"]

UNIT = "instinct-stack-store.service"
PORT = 8070
STACK_ROOT = "/opt/instinct-stack"


@pytest.fixture
def builder(host):
    """The build host: the first of build_hosts, else the first inference host (build_host's default)."""
    groups = host.ansible.get_variables()["groups"]
    name = (groups.get("build_hosts") or groups["inference_hosts"])[0]
    return host.get_host("ansible://" + name, ansible_inventory=host.backend.ansible_inventory)


@pytest.fixture
def store_url(builder):
    return "http://%s:%d" % (builder.ansible.get_variables()["ansible_host"], PORT)


def verified(host):
    with host.sudo():
        return json.loads(host.file(STACK_ROOT + "/current/.verified").content_string)


def sha256(host, path):
    with host.sudo():
        return host.check_output("sha256sum %s", path).split()[0]


def test_the_build_host_runs_the_store_as_a_sandboxed_unprivileged_service(builder):
    store = builder.service(UNIT)
    assert store.is_running and store.is_enabled
    properties = builder.check_output(
        "systemctl show -p DynamicUser -p ProtectSystem -p NoNewPrivileges -p CapabilityBoundingSet -p MainPID %s",
        UNIT,
    ).splitlines()
    settings = dict(line.split("=", 1) for line in properties)
    assert (settings["DynamicUser"], settings["ProtectSystem"], settings["NoNewPrivileges"]) == ("yes", "strict", "yes")
    assert settings["CapabilityBoundingSet"] == ""
    # The server is nginx, master and workers, as the unit's dynamic user, never as root.
    master = settings["MainPID"]
    assert builder.check_output("ps -o comm= -p %s", master) == "nginx"
    processes = builder.check_output("ps -o user=,comm= --pid %s --ppid %s", master, master).splitlines()
    assert len(processes) >= 2, processes  # the master and at least one worker
    for line in processes:
        user, command = line.split()
        assert command == "nginx" and user not in ("root", ""), processes
    with builder.sudo():
        assert builder.check_output("readlink /proc/%s/exe", master) == "/usr/sbin/nginx"


def test_the_distribution_nginx_serves_nothing(builder):
    # Installing the package would start nginx.service with its default site on port 80; the role masked it first.
    with builder.sudo():
        assert builder.check_output("systemctl is-enabled nginx.service || true") == "masked"
        assert not builder.service("nginx.service").is_running
        assert builder.check_output("ss -Hltn 'sport = :80'") == ""
        listening = builder.check_output("ss -Hltnp 'sport = :%s'", str(PORT))
    assert "nginx" in listening, listening


def test_the_hosts_stack_is_the_archive_the_store_serves(host, builder, store_url):
    stack = verified(host)
    archive = stack["archive"]
    if not archive:
        # Only a build host that alone needs its stack takes it in place with no archive (the air-gapped scenario's
        # one machine): its assembly mark has no sha256 and its store publishes nothing under the key.
        assert host.backend.get_hostname() == builder.backend.get_hostname(), stack
        with host.sudo():
            mark = json.loads(host.file(STACK_ROOT + "/current/.assembled").content_string)
        assert mark == {"sha256": "", "file": ""}
        status = host.check_output("curl -s -o /dev/null -w '%%{http_code}' %s/stacks/%s.json", store_url, stack["key"])
        assert status == "404"
        return
    url = "%s/stacks/%s" % (store_url, archive["file"])
    # What the store serves at the URL the host installed from, read through the store's own HTTP server on the
    # build host: the same bytes every host gets, hashed at this machine's speed rather than again under a TCG guest
    # (the host's install checked its download's sha256 before it unpacked anything).
    assert builder.check_output("curl -sf %s | sha256sum", url).split()[0] == archive["sha256"]
    assert archive["file"] == "%s-%s.tar.zst" % (stack["key"], archive["sha256"][:16])
    # The host's own records are never in the archive; the stack's lock is, as the build host installed it.
    members = builder.check_output("curl -sf %s | zstd -dc | tar -t", url).split()
    assert "./.verified" not in members and "./.assembled" not in members and "./stack-lock.txt" in members
    assert sha256(host, stack["lock"]["file"]) == stack["lock"]["sha256"]
    assert {wheel["component"] for wheel in stack["wheels"]} == {"pytorch", "torchvision", "triton", "vllm"}


def test_the_store_serves_the_stack_to_the_host_and_refuses_writes(host, store_url):
    stack = verified(host)
    lock = "%s/locks/%s/stack-lock.txt" % (store_url, stack["key"])
    served = host.check_output("curl -sf %s | sha256sum", lock).split()[0]
    assert served == stack["lock"]["sha256"]
    # Read-only: GET and HEAD alone; the store's configuration refuses anything that would write.
    for method in ("PUT", "POST", "DELETE"):
        status = host.check_output("curl -s -o /dev/null -w '%%{http_code}' -X %s --data x %s", method, lock)
        assert status == "403", (method, status)
    assert host.check_output("curl -sI -o /dev/null -w '%%{http_code}' %s", lock) == "200"


def test_the_store_resumes_a_cut_download_with_a_range_request(host, store_url):
    # What model_pull does after a cut: Range: bytes=N- from the size it has, answered 206 with the rest alone.
    stack = verified(host)
    lock = "%s/locks/%s/stack-lock.txt" % (store_url, stack["key"])
    with host.sudo():
        whole = host.file(stack["lock"]["file"]).content
    offset = len(whole) // 3
    # testinfra quotes every argument as a string.
    status = host.check_output("curl -s -o /dev/null -w '%%{http_code}' -r %s %s", "%d-" % offset, lock)
    assert status == "206"
    rest = host.check_output("curl -sf -r %s %s | sha256sum", "%d-" % offset, lock).split()[0]
    assert rest == hashlib.sha256(whole[offset:]).hexdigest()
    headers = host.check_output("curl -sf -D - -o /dev/null -r %s %s", "%d-%d" % (offset, offset + 9), lock)
    assert "content-range: bytes %d-%d/%d" % (offset, offset + 9, len(whole)) in headers.lower(), headers
