"""One model across both nodes: a serving group on a real Ray cluster (issue 30).

After test_rollback both nodes serve stack A (current) and keep stack B (previous). Run from the controller as an
operator would, with the group as the only instance (`--tags models,vllm_service`; the scenario's own instance keeps
running, untouched; the later runs `--tags vllm_service`):

1. the group: node1 the head (its Ray head and `vllm serve` with the Ray backend, pipeline_parallel_size 2), node2 a
   Ray worker, each giving it one GPU (Ray's --num-gpus). The fixture vLLM joins the cluster as vLLM does, asks for
   a placement group of TP x PP = 2 one-GPU bundles (PACK, the first on the head), and places one real Ray actor per
   bundle: a chat completion through the head names the node of each pipeline stage, and node2 runs the actor of
   stage 1. A rerun changes nothing.
2. node2 told to serve stack B while node1 keeps A: refused before anything starts, naming node2 and both stacks.
3. node2 cut off from the head (a blackhole route in its network namespace) under a serving group, then a switch to
   stack B: node2 cannot reach the head's Ray port, the head names node2 as missing from its Ray cluster, and both
   nodes go back to stack A together, where the head's engine waits for node2. Ray's view (playbooks/status.yml) shows
   node2 missing. node2 reconnected, the group serves again.
4. the group switched to stack B with a stage that does not load there on node2 (FIXTURE_VLLM_LOADS_ONLY_ON in its
   Ray's environment): the head's engine fails naming node2's address, and both nodes go back to stack A together,
   serving again; the run fails.
The group's units are removed at the end, so the scenario's later tests find the hosts as before.
"""

import json
import os
import subprocess
import time

import pytest
from cluster_hosts import nodes, playbook_json

from instinct_stack.rollout import failure_message
from instinct_stack.status import hosts_from_events

REPO = "instinct-fixtures/tiny-llama"
STACKS = "/opt/instinct-stack/stacks"
PORT = 8110
UNITS = {"node1": ["vllm-big-ray.service", "vllm-big.service"], "node2": ["vllm-big-ray.service"]}
ENV_FILE = "/etc/instinct-stack/vllm/big.env"
KEY = "sudo sed -n 's/^VLLM_API_KEY=//p' %s" % ENV_FILE
GROUP = {
    "name": "big",
    "model": {"repo": REPO, "revision": "main"},
    "nodes": ["node1", "node2"],
    "pipeline_parallel_size": 2,
    "tensor_parallel_size": 1,
    "gpus": [0],
    "port": PORT,
    "api_key": "{{ instinct_molecule_api_key }}",
}
# The nspawn nodes see this machine's memory: Ray's object store would take 30 % of it on each.
EXTRA = {
    "vllm_service_instances": [GROUP],
    "vllm_service_ray_start_args": ["--object-store-memory=100000000", "--num-cpus=1"],
    "vllm_service_ray_join_timeout": 180,
    "vllm_service_health_timeout": 300,
}


def run(extra=None, tags="vllm_service"):
    """site.yml, one host per batch outside groups: (rc, [(task, host, result)], stats, the hosts of each batch of
    the serve play). After the first run (which pulls the model: models,vllm_service) the instance's link names the
    revision, so the service role alone serves it."""
    args = json.dumps({"instinct_serial": 1, **EXTRA, **(extra or {})})
    rc, output = playbook_json("site.yml", "--tags", tags, "-e", args, timeout=1200)
    tasks = [
        (task["task"]["name"], host, result)
        for play in output["plays"]
        for task in play["tasks"]
        for host, result in task["hosts"].items()
    ]
    batches = [
        sorted({host for task in play["tasks"] for host in task["hosts"]})
        for play in output["plays"]
        if play["play"]["name"].startswith("Serve vLLM")
    ]
    return rc, tasks, output["stats"], batches


def failures(tasks):
    return [(name, host, failure_message(result)) for name, host, result in tasks if result.get("failed")]


def addresses():
    return {name: host.ansible.get_variables()["ansible_host"] for name, host in nodes().items()}


def network_namespace(address):
    """The network namespace of the nspawn machine at address (tests/harness/nspawnctl.py names them by a hash)."""
    for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.splitlines():
        name = line.split()[0]
        shown = subprocess.run(["ip", "-n", name, "-4", "-o", "addr"], capture_output=True, text=True, check=False)
        if " %s/" % address in shown.stdout:
            return name
    raise AssertionError("no network namespace holds %s" % address)


def link(host, name):
    result = host.run("readlink /opt/instinct-stack/%s", name)
    return result.stdout.strip() if result.rc == 0 else None


def health(host):
    # 000 when nothing listens (curl exits 7).
    return host.run("curl -s -o /dev/null -w '%%{http_code}' http://127.0.0.1:%s/health", str(PORT)).stdout.strip()


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(3)
    raise AssertionError("%s within %d s" % (what, timeout))


def chat(host):
    body = json.dumps({"model": REPO, "messages": [{"role": "user", "content": "Which nodes run you?"}]})
    command = (
        "curl -s --fail-with-body http://127.0.0.1:%d/v1/chat/completions -H 'Content-Type: application/json' "
        "-H \"Authorization: Bearer $(%s)\" -d '%s'" % (PORT, KEY, body)
    )
    return json.loads(host.check_output(command))["choices"][0]["message"]["content"]


def journal(host, unit, since):
    return host.check_output("sudo journalctl -q -o cat -u %s --since %s", unit, "@%d" % since)


def invocations():
    return {name: [invocation_of(host, unit) for unit in UNITS[name]] for name, host in nodes().items()}


def invocation_of(host, unit):
    return host.check_output("systemctl show -p InvocationID --value %s", unit)


@pytest.fixture(scope="module")
def stacks():
    node1 = nodes()["node1"]
    current, previous = link(node1, "current"), link(node1, "previous")
    assert current and previous and current != previous, (current, previous)
    return current, previous


@pytest.fixture(scope="module")
def group(stacks):
    yield run(tags="models,vllm_service")
    # The scenario's later tests find the hosts without the group.
    for name, host in nodes().items():
        host.run("sudo systemctl disable --now " + " ".join(UNITS[name]))
        # The glob in root's shell: the ansible user cannot read /etc/instinct-stack/vllm (0700).
        host.run("sudo sh -c 'rm -f /etc/systemd/system/vllm-big*.service /etc/instinct-stack/vllm/big*'")
        host.run("sudo systemctl daemon-reload")
        # The failed runs' rollout locks, which the next run from this controller would take over (and report as a
        # change): the scenario's later tests start from a host as a successful run leaves it.
        host.run("sudo rm -f /var/lib/instinct-stack/rollout.lock")


def test_the_group_serves_through_its_head_with_a_stage_on_each_node(group):
    rc, tasks, _stats, batches = group
    assert rc == 0, failures(tasks)
    assert batches == [["node1", "node2"]], batches  # the group is one batch of the serve play
    hosts, address = nodes(), addresses()
    for name, host in hosts.items():
        for unit in UNITS[name]:
            assert host.service(unit).is_running and host.service(unit).is_enabled, (name, unit)
    assert not hosts["node2"].file("/etc/systemd/system/vllm-big.service").exists  # a worker serves no HTTP
    answer = chat(hosts["node1"])
    assert "Pipeline stages: 0 on %s, 1 on %s." % (address["node1"], address["node2"]) in answer, answer
    # Stage 1 is a real Ray actor in node2's Ray, from the stack's own Ray and vLLM.
    actors = hosts["node2"].check_output("pgrep -u vllm -af 'ray::Worker' || true")
    assert "ray::Worker" in actors, actors
    head = hosts["node1"].check_output("systemctl show -p ExecStart --value vllm-big.service")
    assert "--distributed-executor-backend ray" in head and "--pipeline-parallel-size 2" in head, head
    worker = hosts["node2"].check_output("systemctl show -p ExecStart --value vllm-big-ray.service")
    assert "--address=%s:6379" % address["node1"] in worker and "--num-gpus=1" in worker, worker
    environment = hosts["node2"].check_output("systemctl show -p Environment --value vllm-big-ray.service")
    assert "VLLM_HOST_IP=%s" % address["node2"] in environment, environment
    # The API key stays in the head's `vllm serve` environment file, never in a Ray unit's.
    for host in hosts.values():
        assert host.check_output("sudo grep -c VLLM_API_KEY /etc/instinct-stack/vllm/big-ray.env || true") == "0"


def test_a_rerun_changes_nothing_and_restarts_nothing(group):
    before = invocations()
    rc, tasks, stats, _batches = run()
    assert rc == 0, failures(tasks)
    assert all(stats[name]["changed"] == 0 for name in UNITS), stats
    assert invocations() == before


@pytest.fixture(scope="module")
def refused(group, stacks):
    _current, previous = stacks
    before = invocations()
    target = "{{ '%s' if inventory_hostname == 'node2' else '' }}" % previous
    return run({"vllm_service_target": target}), before


def test_nodes_on_different_stacks_are_refused_before_anything_starts(refused, stacks):
    (rc, tasks, _stats, _batches), before = refused
    current, previous = stacks
    assert rc != 0
    found = failures(tasks)
    assert {host for _name, host, _msg in found} == {"node1", "node2"}, found
    message = found[0][2]
    assert (
        "serving group 'big': node2 would serve stack %s, the head node1 %s"
        % (
            os.path.basename(previous),
            os.path.basename(current),
        )
        in message
    ), message
    assert "Nothing was changed" in message
    assert invocations() == before
    assert all(link(host, "current") == current for host in nodes().values())


@pytest.fixture(scope="module")
def worker_stopped(refused, stacks):
    """node2 gone from the head's network (a blackhole route in node2's network namespace; Ansible still reaches it
    from the controller) under a serving group, then a switch to stack B: its results, the head's journal and Ray's view
    (playbooks/status.yml) while node2 is gone; then node2 back."""
    _current, previous = stacks
    hosts, address = nodes(), addresses()
    since = int(float(hosts["node1"].check_output("date +%s.%N")))
    # The nodes hold no CAP_NET_ADMIN: the route goes into node2's network namespace from this machine.
    namespace = network_namespace(address["node2"])
    subprocess.run(["ip", "-n", namespace, "route", "add", "blackhole", address["node1"] + "/32"], check=True)
    try:
        switched = run(
            {"vllm_service_target": previous, "vllm_service_ray_join_timeout": 10, "vllm_service_health_timeout": 10}
        )
        _rc, status = playbook_json("playbooks/status.yml", timeout=300)
        # vLLM logs its placement-group wait every 10 s and more.
        wait_for(
            lambda: "Waiting for creating a placement group" in journal(hosts["node1"], "vllm-big.service", since),
            60,
            "the head's engine waiting for its placement group",
        )
        lost = journal(hosts["node1"], "vllm-big.service", since)
    finally:
        subprocess.run(["ip", "-n", namespace, "route", "del", "blackhole", address["node1"] + "/32"], check=True)
    return switched, lost, status


def test_a_worker_gone_fails_the_switch_and_the_group_goes_back_naming_it(worker_stopped, stacks):
    (rc, tasks, _stats, _batches), lost, _status = worker_stopped
    current, _previous = stacks
    hosts, address = nodes(), addresses()
    assert rc != 0
    # Back on stack A without node2, the head's engine waits for a placement group Ray cannot give it.
    assert "Waiting for creating a placement group" in lost, lost
    found = failures(tasks)
    assert {host for _name, host, _msg in found} == {"node1", "node2"}, found
    messages = " ".join(msg for _name, _host, msg in found)
    assert "node2 cannot reach the head node1 at %s:6379" % address["node1"] in messages, found
    assert "node2 (%s) is not in the Ray cluster at %s:6379" % (address["node2"], address["node1"]) in messages, found
    # Both nodes went back to stack A together.
    for name, host in hosts.items():
        assert link(host, "current") == current, name


def test_status_shows_rays_view_of_the_group_without_the_worker(worker_stopped):
    _switched, _lost, status = worker_stopped
    address = addresses()
    events = [{"event": "playbook_on_stats", "event_data": {"artifact_data": status.get("global_custom_stats", {})}}]
    rows = {row["host"]: row for row in hosts_from_events(events)}
    (ray,) = [service["ray"] for service in rows["node1"]["services"] if service["name"] == "vllm-big-ray.service"]
    assert ray["nodes"] == ["node1", "node2"] and ray["role"] == "head"
    alive = [node["address"] for node in ray["cluster"] if node["alive"]]
    assert address["node1"] in alive and address["node2"] not in alive, ray
    assert rows["node1"]["ok"] is False


def test_the_group_serves_again_once_the_worker_is_back(worker_stopped):
    hosts, address = nodes(), addresses()
    wait_for(lambda: health(hosts["node1"]) == "200", 300, "the group serving again after node2 came back")
    assert "1 on %s" % address["node2"] in chat(hosts["node1"])


@pytest.fixture(scope="module")
def faulty(worker_stopped, stacks):
    current, previous = stacks
    hosts = nodes()
    wait_for(lambda: health(hosts["node1"]) == "200", 300, "the group serving before the faulty switch")
    since = int(float(hosts["node1"].check_output("date +%s.%N")))
    fault = "{{ {'FIXTURE_VLLM_LOADS_ONLY_ON': '%s'} if inventory_hostname == 'node2' else {} }}" % current
    extra = {
        "vllm_service_target": previous,
        "vllm_service_environment": fault,
        "vllm_service_health_timeout": 240,
    }
    return run(extra), since


def test_a_stage_that_fails_on_the_new_stack_sends_the_whole_group_back(faulty, stacks):
    (rc, tasks, _stats, _batches), since = faulty
    current, previous = stacks
    hosts, address = nodes(), addresses()
    assert rc != 0
    final = [f for f in failures(tasks) if f[0].endswith("Fail the host, naming the stack it serves")]
    assert sorted(host for _name, host, _msg in final) == ["node1", "node2"], failures(tasks)
    head = dict((host, msg) for _name, host, msg in final)["node1"]
    assert "back on stack %s (from %s)" % (os.path.basename(current), os.path.basename(previous)) in head, head
    engine = journal(hosts["node1"], "vllm-big.service", since)
    assert "worker 1 on node %s failed to start" % address["node2"] in engine, engine
    assert "the model does not load on the stack in %s" % previous in engine, engine
    for name, host in hosts.items():
        assert link(host, "current") == current, name
        assert host.service("vllm-big-ray.service").is_running, name
    wait_for(lambda: health(hosts["node1"]) == "200", 120, "the group serving on stack A again")
