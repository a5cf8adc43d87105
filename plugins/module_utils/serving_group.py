# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A serving group: one vLLM instance whose model spans several hosts, tensor parallel inside each host and pipeline
parallel across them, on a Ray cluster of those hosts (issue 30).

vLLM (0.11.1, the pinned release) runs more than one node only on Ray: `vllm serve` on the head with
`--distributed-executor-backend ray` joins the running cluster (ray.init("auto")) and asks for a placement group of
TP x PP bundles of one GPU each (vllm/v1/executor/ray_utils.py). Its docs ask for "an identical execution environment
on every node, including the model path and Python packages" (docs/serving/parallelism_scaling.md): here, the same
stack key and the same model revision on every node, which is what this module checks before a group starts, naming
the node and what differs, where vLLM would wait PG_WAIT_TIMEOUT (1800 s) and then fail.

A group is the instance's `nodes` (inventory host names, the first one the head) with `pipeline_parallel_size` equal
to their number: one pipeline stage per node, each node `tensor_parallel_size` GPUs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os

# Ray's default GCS port (ray start --head --port), and the one examples/online_serving/run_cluster.sh uses.
RAY_PORT = 6379


class InvalidGroup(ValueError):
    pass


def group_nodes(instance):
    """The group's nodes, the head first; [] for an instance on one host."""
    nodes = instance.get("nodes") or []
    if isinstance(nodes, str) or not all(isinstance(node, str) and node for node in nodes):
        raise InvalidGroup("vLLM instance %r: nodes must be a list of inventory host names" % instance.get("name"))
    if len(set(nodes)) != len(nodes):
        raise InvalidGroup("vLLM instance %r: nodes names a host twice: %s" % (instance.get("name"), ", ".join(nodes)))
    return list(nodes)


def check_shape(instance):
    """The group's shape against its parallel sizes: a group of N nodes runs N pipeline stages."""
    nodes = group_nodes(instance)
    pipeline = int(instance.get("pipeline_parallel_size") or 1)
    if not nodes:
        if pipeline > 1:
            raise InvalidGroup(
                "vLLM instance %r: pipeline_parallel_size %d needs nodes, one inventory host per pipeline stage"
                % (instance.get("name"), pipeline)
            )
        return
    if len(nodes) < 2:
        raise InvalidGroup(
            "vLLM instance %r: a serving group needs two nodes or more (got %s); serve one host without nodes"
            % (instance.get("name"), ", ".join(nodes))
        )
    if pipeline != len(nodes):
        raise InvalidGroup(
            "vLLM instance %r: pipeline_parallel_size is %d but nodes names %d hosts: a group runs one pipeline stage "
            "per node, so set pipeline_parallel_size to %d or name %d nodes"
            % (instance.get("name"), pipeline, len(nodes), len(nodes), pipeline)
        )


def _differs(name, nodes, facts, key, what, fix):
    """A problem when the nodes do not all have the head's value of key, naming each node that differs."""
    head = nodes[0]
    wanted = facts[head].get(key)
    others = [node for node in nodes[1:] if facts[node].get(key) != wanted]
    if not others:
        return []
    return [
        "serving group %r: %s %s %s, the head %s %s: %s"
        % (name, node, what, facts[node].get(key) or "none", head, wanted or "none", fix)
        for node in others
    ]


def check_group(instance, facts):
    """Every problem that would keep the group from starting, each naming the node and what differs; [] when none.

    facts: {node: {"stack": the stack key it would serve, "model": the model revision key, "gpus": its GPU count,
    "address": the address the others reach it at}}, for the nodes the run knows; a node missing from it is not in
    the run. Whether each worker reaches the head's Ray port is checked once the head's Ray is up (the vllm_service
    role's tasks/group_ray.yml), not here.
    """
    name = instance.get("name")
    check_shape(instance)
    nodes = group_nodes(instance)
    missing = [node for node in nodes if node not in facts]
    if missing:
        return [
            "serving group %r: %s is not in this run (the inventory, --limit or a host that failed): a group starts "
            "with all its nodes" % (name, ", ".join(missing))
        ]
    problems = []
    problems += _differs(
        name, nodes, facts, "stack", "would serve stack", "roll out one stack to every node of a group"
    )
    problems += _differs(
        name, nodes, facts, "model", "has model revision", "pull the same revision to every node of a group"
    )
    tensor = int(instance.get("tensor_parallel_size") or 1)
    for node in nodes:
        gpus = int(facts[node].get("gpus") or 0)
        if gpus < tensor:
            problems.append(
                "serving group %r: %s has %d GPU(s) and tensor_parallel_size %d needs %d on every node"
                % (name, node, gpus, tensor, tensor)
            )
    by_address = {}
    for node in nodes:
        by_address.setdefault(facts[node].get("address"), []).append(node)
    for address, sharing in sorted(by_address.items(), key=lambda pair: str(pair[0])):
        if not address:
            problems.append("serving group %r: %s has no address: set vllm_service_node_address" % (name, sharing[0]))
            continue
        try:
            ipaddress.ip_address(str(address))
        except ValueError:
            problems.append(
                "serving group %r: %s has the address %r, not an IP address: Ray and vLLM (VLLM_HOST_IP) need the "
                "node's IP address on the network between the nodes; set vllm_service_node_address"
                % (name, " and ".join(sharing), address)
            )
            continue
        if len(sharing) > 1:
            problems.append(
                'serving group %r: %s share the address %s: every node needs its own (vLLM: "Every node should '
                'have a unique IP address")' % (name, " and ".join(sharing), address)
            )
    return problems


def ray_start_args(node, nodes, addresses, gpus, port=RAY_PORT):
    """`ray start` arguments for node: the head starts the cluster, the others join it. In the foreground (--block)
    for a Type=simple unit, without usage reporting (an air-gapped cluster) and, on the head, without the dashboard
    (Ray refuses --include-dashboard on a worker)."""
    if node not in nodes:
        raise InvalidGroup("%s is not a node of the group (%s)" % (node, ", ".join(nodes)))
    head = nodes[0]
    args = ["start", "--block"]
    if node == head:
        args += ["--head", "--port=%d" % port, "--include-dashboard=false"]
    else:
        args += ["--address=%s:%d" % (addresses[head], port)]
    return args + ["--node-ip-address=%s" % addresses[node], "--num-gpus=%d" % gpus, "--disable-usage-stats"]


def node_facts(instance, node_fact):
    """What check_group compares of one node, from what the vllm_service role found there (its
    vllm_service_node fact: {stack, address, gpus, models: {REPO@REVISION: revision directory}}): the stack's key,
    the revision it would serve (a Hub model's revision directory; else the model as given), and the GPUs the
    instance may use there (its gpus, else all of the node's)."""
    model_key = instance.get("model_key")
    if model_key:
        model = os.path.basename(str((node_fact.get("models") or {}).get(model_key) or "")) or None
        model = "%s (%s)" % (model_key.split("@")[0], model) if model else None
    else:
        model = instance.get("model_path") or instance.get("model")
    return {
        "stack": os.path.basename(str(node_fact.get("stack") or "").rstrip("/")) or None,
        "model": model,
        "gpus": len(instance.get("gpus") or []) or int(node_fact.get("gpus") or 0),
        "address": node_fact.get("address"),
    }


def serve_order(hosts, instances_of):
    """The serve play's hosts in batch order, and its batches: each serving group's nodes that are in hosts form one
    batch (head first); the other hosts keep their order. instances_of(host) gives the host's vllm_service_instances.

    Returns (ordered hosts, [[host, ...] per group]); the groups' batches come where their first node was."""
    hosts = list(hosts)
    ordered, batches, placed = [], [], set()
    for host in hosts:
        if host in placed:
            continue
        nodes = []
        for instance in instances_of(host) or []:
            if isinstance(instance, dict) and host in (instance.get("nodes") or []):
                nodes = [node for node in instance["nodes"] if node in hosts]
                break
        if nodes:
            batch = [node for node in nodes if node not in placed]
            ordered += batch
            batches.append(batch)
            placed.update(batch)
        else:
            ordered.append(host)
            placed.add(host)
    return ordered, batches


def serve_batches(ordered, groups, serial):
    """Ansible's serial as a list of batch sizes over ordered hosts: a group's nodes are one batch, and the other
    hosts run serial (a count, or a percentage of all the hosts as Ansible reads it) at a time, never with a group's
    nodes. serial as given when there is no group."""
    if not groups:
        return serial
    text = str(serial).strip()
    size = max(int(len(ordered) * float(text[:-1]) / 100.0) if text.endswith("%") else int(text), 1)
    starts = {batch[0]: len(batch) for batch in groups if batch}
    sizes, index, single = [], 0, 0
    while index < len(ordered):
        host = ordered[index]
        if host in starts:
            if single:
                sizes.append(single)
                single = 0
            sizes.append(starts[host])
            index += starts[host]
            continue
        single += 1
        index += 1
        if single == size:
            sizes.append(single)
            single = 0
    if single:
        sizes.append(single)
    # Ansible repeats the last size for any hosts left; a 1 at the end keeps a late-joining host from a group batch.
    return sizes + [1]


def groups_changed(instances, changed_of):
    """The names of the serving groups among instances (one host's validated instances) that changed on one of their
    own nodes: changed_of(node) gives the instance names whose unit, environment or stack changed on node. A group
    restarts as a unit, so a change on any of its nodes restarts it on all; an instance of the same name on a host
    outside the group is not the group."""
    names = []
    for instance in instances or []:
        name = instance["name"]
        if name not in names and any(name in (changed_of(node) or []) for node in instance.get("nodes") or []):
            names.append(name)
    return names


def missing_from_ray(addresses, ray_nodes):
    """The group's nodes ({node: address}) Ray does not see alive: [(node, address)], from ray.nodes() as
    [{"address": NodeManagerAddress, "alive": bool, ...}]."""
    alive = set(str(node.get("address")) for node in ray_nodes if node.get("alive"))
    return [(node, address) for node, address in addresses.items() if str(address) not in alive]


# What ray_nodes runs with the stack's own Python, as the service account, to read Ray's view of the cluster: a
# driver that joins it (ray.init at the head's address) and lists ray.nodes(). Printed as one JSON line.
RAY_NODES_SCRIPT = """
import json, logging, sys
import ray
ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2] or None, logging_level=logging.ERROR,
         log_to_driver=False, configure_logging=False)
print(json.dumps([{"node_id": node["NodeID"], "address": node["NodeManagerAddress"], "alive": node["Alive"],
                   "gpus": node.get("Resources", {}).get("GPU", 0)} for node in ray.nodes()]))
"""


def ray_nodes_command(python, address, node_ip_address="", user=None):
    """The argv that prints Ray's nodes as JSON (RAY_NODES_SCRIPT), as user when one is given."""
    argv = [python, "-c", RAY_NODES_SCRIPT, address, node_ip_address or ""]
    return (["runuser", "-u", user, "--"] + argv) if user else argv


def parse_ray_nodes(stdout):
    """Ray's nodes from the script's output: its last line that is a JSON list."""
    import json

    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("["):
            return json.loads(line)
    raise ValueError("no list of Ray nodes in the output: %r" % (stdout or "")[-500:])


def missing_message(name, address, missing, ray_nodes, waited):
    """The failure of a group whose nodes did not all join its Ray cluster, naming them and what Ray sees."""
    seen = ", ".join(
        "%s (%s, %g GPU)" % (node.get("address"), "alive" if node.get("alive") else "dead", node.get("gpus") or 0)
        for node in ray_nodes
    )
    return (
        "serving group %r: %s not in the Ray cluster at %s after %d s (Ray sees: %s). Check the node's unit "
        "vllm-%s-ray.service (systemctl status, journalctl) and that it reaches the head"
        % (
            name,
            " and ".join("%s (%s)" % (node, node_address) for node, node_address in missing)
            + (" is" if len(missing) == 1 else " are"),
            address,
            waited,
            seen or "no node",
            name,
        )
    )
