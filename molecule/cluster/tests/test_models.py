"""Model weights as pinned artifacts, on the converged cluster (tests/harness/fixture_hub.py serves the model on the
bridge; molecule/shared/create-nspawn.yml).

The converge fetched instinct-fixtures/tiny-llama at main once, on node1 (the store host), with huggingface_hub
against the fixture Hub, every file checked against the Hub's hashes, into node1's artifact store; both nodes pulled
it from that store and serve it offline through their instance's link. Then, run from the controller as an operator
would, one host per batch:

1. a revision change to the branch no-architectures (a config.json vLLM refuses): both nodes pull it before the
   serve play, node1 switches its link, its service fails at start, node1 goes back to main and fails; node2 keeps
   serving main, untouched;
2. in one run, that revision's weights corrupted in the store and node1's copy gone: node1's pull refuses the file
   and names it; node2's models directory on a 1 MiB file system: its pull is refused before it downloads, naming
   the space; both keep serving main.
"""

import json
import os
import shlex

import pytest
from cluster_hosts import UNIT, invocation, nodes, playbook_json

from instinct_stack.rollout import failure_message
from tests.harness import fixture_model

REPO = "instinct-fixtures/tiny-llama"
MODELS = "/var/lib/instinct-stack/models"
STORE = "/var/lib/instinct-stack/store/models"
LINK = MODELS + "/served/fixture"
ENV_FILE = "/etc/instinct-stack/vllm/fixture.env"
# The key, read on the host from the environment file as root (sudo logs this command, which holds no key).
KEY = "sudo sed -n 's/^VLLM_API_KEY=//p' %s" % ENV_FILE


def hub():
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "hub.json")) as handle:
        return json.load(handle)


MAIN = hub()["commits"]["main"]
BROKEN = hub()["commits"]["no-architectures"]


def revision_dir(commit, root=MODELS):
    return "%s/instinct-fixtures--tiny-llama/%s" % (root, commit)


def instance(revision):
    """The scenario's instance (molecule.yml) with another revision; its API key from the scenario's vault."""
    return {
        "vllm_service_instances": [
            {
                "name": "fixture",
                "model": {"repo": REPO, "revision": revision},
                "port": 8000,
                "gpu_memory_utilization": 0.9,
                "api_key": "{{ instinct_molecule_api_key }}",
            }
        ]
    }


def run(tags, extra, *args):
    """site.yml with those tags, one host per batch: (rc, [(task, host, result)])."""
    rc, output = playbook_json(
        "site.yml", "--tags", tags, "-e", json.dumps({"instinct_serial": 1, **extra}), *args, timeout=900
    )
    tasks = [
        (task["task"]["name"], host, result)
        for play in output["plays"]
        for task in play["tasks"]
        for host, result in task["hosts"].items()
    ]
    return rc, tasks


def failures(tasks):
    # A looped task's own message is "One or more items failed": the failed item's message is the one to read.
    return [(name, host, failure_message(result)) for name, host, result in tasks if result.get("failed")]


def link(host):
    result = host.run("readlink %s", LINK)
    return result.stdout.strip() if result.rc == 0 else None


def health(host):
    return host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health")


def test_both_nodes_serve_the_revision_the_store_host_fetched_offline():
    hosts = nodes()
    # Fetched once, on the store host: only node1 has the Hub client and the store's copy with its manifest.
    assert hosts["node1"].file("/opt/instinct-stack/hub-venv/bin/python").exists
    assert not hosts["node2"].file("/opt/instinct-stack/hub-venv").exists
    store = json.loads(hosts["node1"].check_output("cat %s.json", revision_dir(MAIN, STORE)))
    assert store["repo"] == REPO and store["revision"] == MAIN
    # The default selection: safetensors, json and the tokenizer, never the duplicate .bin or the README.
    assert sorted(entry["path"] for entry in store["files"]) == fixture_model.DEFAULT_SELECTION
    for name, host in hosts.items():
        assert link(host) == revision_dir(MAIN), name
        manifest = json.loads(host.check_output("cat %s.json", revision_dir(MAIN)))
        assert manifest["files"] == store["files"], name
        # Every file on the host is the one the manifest names (what the pull checked), owned by root, readable.
        for entry in manifest["files"]:
            path = "%s/%s" % (revision_dir(MAIN), entry["path"])
            assert host.check_output("sha256sum %s", path).split()[0] == entry["sha256"], (name, path)
        assert host.file(revision_dir(MAIN) + "/model.safetensors").mode == 0o644
        unit = host.check_output("systemctl cat %s", UNIT)
        assert "Environment=HF_HUB_OFFLINE=1" in unit and " serve %s " % LINK in unit.replace('"', ""), name
        # An OpenAI chat completion through the service: served as the repository's name, from the revision.
        body = json.dumps({"model": REPO, "messages": [{"role": "user", "content": "which revision?"}]})
        header = "<(%s | sed 's/^/Authorization: Bearer /')" % KEY
        curl = "curl -s -H @%s -H 'Content-Type: application/json' -d %s http://127.0.0.1:8000/v1/chat/completions"
        answer = host.run("bash -c %s", curl % (header, shlex.quote(body)))
        content = json.loads(answer.stdout)["choices"][0]["message"]["content"]
        assert REPO in content and revision_dir(MAIN) in content and "which revision?" in content, content


@pytest.fixture(scope="module")
def before():
    return {name: {"link": link(host), "invocation": invocation(host)} for name, host in nodes().items()}


@pytest.fixture(scope="module")
def broken_change(before):
    assert before["node1"]["link"] == revision_dir(MAIN)
    # Fail at the first restart of the crash loop rather than after the default two.
    return run("models,vllm_service", {**instance("no-architectures"), "vllm_service_health_restarts": 0})


def test_a_revision_that_fails_health_goes_back_and_stops_the_rollout(broken_change, before):
    rc, tasks = broken_change
    assert rc != 0
    assert {host for _name, host, _msg in failures(tasks)} == {"node1"}, failures(tasks)
    final = "Fail the host, naming the stack it serves"
    (message,) = [msg for name, _host, msg in failures(tasks) if name.endswith(final)]
    assert "No model architectures are specified" in message, message  # vLLM's own message, from the journal
    assert "back on model %s at revision %s" % (REPO, MAIN) in message, message
    hosts = nodes()
    # Pulled by both before the serve play's batches, so node2's batch would only have had to load it.
    for name, host in hosts.items():
        assert host.file(revision_dir(BROKEN) + ".json").exists, name
        assert link(host) == revision_dir(MAIN), name
        assert host.service(UNIT).is_running and health(host) == "200", name
    # node1 switched and came back (restarted twice); node2's batch never came.
    assert hosts["node1"].check_output("readlink %s.previous", LINK) == revision_dir(MAIN)
    assert invocation(hosts["node1"]) != before["node1"]["invocation"]
    assert invocation(hosts["node2"]) == before["node2"]["invocation"]


@pytest.fixture(scope="module")
def refused(broken_change):
    """One run, two refusals: node1 pulls that revision again from its own store, whose weights are corrupted; node2's
    models directory is a 1 MiB file system (the extra variable is templated per host)."""
    node1, node2 = nodes()["node1"], nodes()["node2"]
    weights = revision_dir(BROKEN, STORE) + "/model.safetensors"
    # Flips the first byte: the same size, another sha256.
    flip = (
        "python3 -c \"import sys; f = open(sys.argv[1], 'r+b'); b = f.read(1); f.seek(0); "
        'f.write(bytes([b[0] ^ 255]))" %s'
    )
    node1.check_output("sudo rm -rf %s %s.json", revision_dir(BROKEN), revision_dir(BROKEN))
    node1.check_output("sudo " + flip, weights)
    node2.check_output("sudo mkdir -p /mnt/small && sudo mount -t tmpfs -o size=1m tmpfs /mnt/small")
    small = "{{ '/mnt/small' if inventory_hostname == 'node2' else '%s' }}" % MODELS
    try:
        yield run("models", {**instance("no-architectures"), "models_root": small})
    finally:
        node1.check_output("sudo " + flip, weights)
        node2.check_output("sudo umount /mnt/small && sudo rmdir /mnt/small")


def test_a_file_that_differs_from_the_stores_manifest_is_refused(refused, before):
    rc, tasks = refused
    assert rc != 0
    (message,) = [msg for name, host, msg in failures(tasks) if host == "node1" and "Pull each model" in name]
    assert "model.safetensors did not match the store's manifest (sha256 or size) and was removed" in message, message
    node1 = nodes()["node1"]
    assert not node1.file(revision_dir(BROKEN)).exists and not node1.file(revision_dir(BROKEN) + ".json").exists
    assert link(node1) == revision_dir(MAIN) and health(node1) == "200"


def test_a_host_short_of_disk_is_refused_before_it_downloads(refused, before):
    rc, tasks = refused
    (message,) = [msg for name, host, msg in failures(tasks) if host == "node2" and "Pull each model" in name]
    assert "%s@%s" % (REPO, BROKEN) in message and "on this host needs" in message, message
    assert "in /mnt/small" in message and "free space there" in message, message
    node2 = nodes()["node2"]
    assert node2.check_output("find /mnt/small -type f") == ""
    assert link(node2) == revision_dir(MAIN) and health(node2) == "200"
    assert invocation(node2) == before["node2"]["invocation"]
