"""plugins/module_utils/serving_group.py: a group's shape, the checks before it starts, and Ray's arguments."""

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import serving_group as sg

GROUP = {"name": "llama", "nodes": ["node1", "node2"], "tensor_parallel_size": 8, "pipeline_parallel_size": 2}


def facts(**changes):
    found = {
        "node1": {"stack": "s1", "model": "m@1", "gpus": 8, "address": "10.0.0.1"},
        "node2": {"stack": "s1", "model": "m@1", "gpus": 8, "address": "10.0.0.2"},
    }
    for node, values in changes.items():
        found[node] = dict(found[node], **values)
    return found


def test_a_group_that_fits_has_no_problem():
    assert sg.check_group(GROUP, facts()) == []


def test_nodes_on_different_stacks_are_refused_naming_the_node():
    (problem,) = sg.check_group(GROUP, facts(node2={"stack": "s2"}))
    assert problem == (
        "serving group 'llama': node2 would serve stack s2, the head node1 s1: "
        "roll out one stack to every node of a group"
    )


def test_a_different_model_revision_is_refused():
    (problem,) = sg.check_group(GROUP, facts(node2={"model": "m@2"}))
    assert "node2 has model revision m@2, the head node1 m@1" in problem


def test_a_node_with_too_few_gpus_for_tensor_parallel_is_named():
    (problem,) = sg.check_group(GROUP, facts(node2={"gpus": 4}))
    assert problem == "serving group 'llama': node2 has 4 GPU(s) and tensor_parallel_size 8 needs 8 on every node"


def test_nodes_sharing_an_address_are_refused_with_vllms_words():
    (problem,) = sg.check_group(GROUP, facts(node2={"address": "10.0.0.1"}))
    assert "node1 and node2 share the address 10.0.0.1" in problem and "unique IP address" in problem


def test_a_node_missing_from_the_run_stops_the_check():
    found = facts()
    del found["node2"]
    (problem,) = sg.check_group(GROUP, found)
    assert "node2 is not in this run" in problem


def test_every_problem_is_reported_at_once():
    problems = sg.check_group(GROUP, facts(node2={"stack": "s2", "gpus": 1, "address": "10.0.0.1"}))
    assert len(problems) == 3


@pytest.mark.parametrize(
    "instance, message",
    [
        (
            {"name": "x", "nodes": ["a", "b"], "pipeline_parallel_size": 3},
            "pipeline_parallel_size is 3 but nodes names 2",
        ),
        ({"name": "x", "pipeline_parallel_size": 2}, "pipeline_parallel_size 2 needs nodes"),
        ({"name": "x", "nodes": ["a"], "pipeline_parallel_size": 1}, "needs two nodes or more"),
        ({"name": "x", "nodes": ["a", "a"], "pipeline_parallel_size": 2}, "names a host twice"),
        ({"name": "x", "nodes": "a,b"}, "must be a list of inventory host names"),
    ],
)
def test_a_bad_shape_says_what_to_set(instance, message):
    with pytest.raises(sg.InvalidGroup, match=message):
        sg.check_shape(instance)


def test_an_instance_on_one_host_is_no_group():
    sg.check_shape({"name": "x"})
    assert sg.group_nodes({"name": "x"}) == []


def test_the_head_starts_the_cluster_and_a_worker_joins_it():
    addresses = {"node1": "10.0.0.1", "node2": "10.0.0.2"}
    assert sg.ray_start_args("node1", ["node1", "node2"], addresses, 8) == [
        "start",
        "--block",
        "--head",
        "--port=6379",
        "--include-dashboard=false",
        "--node-ip-address=10.0.0.1",
        "--num-gpus=8",
        "--disable-usage-stats",
    ]
    worker = sg.ray_start_args("node2", ["node1", "node2"], addresses, 8)
    assert worker[:3] == ["start", "--block", "--address=10.0.0.1:6379"] and "--node-ip-address=10.0.0.2" in worker
    # Ray (2.60) refuses it on a worker: "`--include-dashboard` should only be specified when starting head node".
    assert not any(arg.startswith("--include-dashboard") for arg in worker)
    with pytest.raises(sg.InvalidGroup, match="node3 is not a node of the group"):
        sg.ray_start_args("node3", ["node1", "node2"], addresses, 8)


def test_an_address_that_is_not_an_ip_is_refused():
    (problem,) = sg.check_group(GROUP, facts(node2={"address": "gpu2.example"}))
    assert "node2 has the address 'gpu2.example', not an IP address" in problem
    assert "vllm_service_node_address" in problem


def test_node_facts_compare_the_stack_key_and_the_revision_directory():
    instance = dict(GROUP, model_key="org/m@main", gpus=[])
    fact = {"stack": "/opt/s/stacks/k1/", "address": "10.0.0.1", "gpus": "8", "models": {"org/m@main": "/m/r/abc"}}
    assert sg.node_facts(instance, fact) == {"stack": "k1", "model": "org/m (abc)", "gpus": 8, "address": "10.0.0.1"}
    assert sg.node_facts(instance, dict(fact, models={}))["model"] is None
    # A path model is compared as given; gpus, when set, are what each node gives.
    path = dict(GROUP, model_key=None, model_path="/srv/m", gpus=[0, 1])
    assert sg.node_facts(path, fact)["model"] == "/srv/m" and sg.node_facts(path, fact)["gpus"] == 2


def test_the_serve_order_puts_a_group_together_where_its_first_node_was():
    instances = {"b": [dict(GROUP, nodes=["d", "b"])], "d": [dict(GROUP, nodes=["d", "b"])]}
    ordered, groups = sg.serve_order(["a", "b", "c", "d", "e"], lambda host: instances.get(host, []))
    assert ordered == ["a", "d", "b", "c", "e"] and groups == [["d", "b"]]
    # A node outside the play (--limit) is left out of the batch; the group check then refuses the group.
    ordered, groups = sg.serve_order(["b", "c"], lambda host: instances.get(host, []))
    assert ordered == ["b", "c"] and groups == [["b"]]


def test_the_batches_keep_a_group_whole_and_the_others_at_serial():
    ordered = ["a", "d", "b", "c", "e"]
    assert sg.serve_batches(ordered, [["d", "b"]], 1) == [1, 2, 1, 1, 1]
    assert sg.serve_batches(ordered, [["d", "b"]], "40%") == [1, 2, 2, 1]
    assert sg.serve_batches(["d", "b", "a"], [["d", "b"]], "100%") == [2, 1, 1]
    assert sg.serve_batches(ordered, [], "25%") == "25%"


def test_ray_s_view_names_the_nodes_that_did_not_join():
    ray_nodes = [
        {"address": "10.0.0.1", "alive": True, "gpus": 8},
        {"address": "10.0.0.2", "alive": False, "gpus": 8},
    ]
    addresses = {"node1": "10.0.0.1", "node2": "10.0.0.2"}
    missing = sg.missing_from_ray(addresses, ray_nodes)
    assert missing == [("node2", "10.0.0.2")]
    message = sg.missing_message("llama", "10.0.0.1:6379", missing, ray_nodes, 300)
    assert message.startswith("serving group 'llama': node2 (10.0.0.2) is not in the Ray cluster at 10.0.0.1:6379")
    assert "10.0.0.2 (dead, 8 GPU)" in message and "vllm-llama-ray.service" in message


def test_the_ray_nodes_command_runs_as_the_service_account_and_its_output_is_read():
    argv = sg.ray_nodes_command("/s/venv/bin/python", "10.0.0.1:6379", "10.0.0.1", "vllm")
    assert argv[:4] == ["runuser", "-u", "vllm", "--"] and argv[4:6] == ["/s/venv/bin/python", "-c"]
    assert argv[-2:] == ["10.0.0.1:6379", "10.0.0.1"]
    assert sg.parse_ray_nodes('2026 INFO connected\n[{"address": "10.0.0.1"}]\n') == [{"address": "10.0.0.1"}]
    with pytest.raises(ValueError, match="no list of Ray nodes"):
        sg.parse_ray_nodes("Traceback ...")


def test_a_group_changed_on_any_of_its_nodes_restarts_and_a_namesake_elsewhere_does_not():
    single = {"name": "llama", "nodes": []}  # a one-host instance of the same name, on node3
    changed = {"node1": [], "node2": ["llama"], "node3": ["llama", "other"]}
    assert sg.groups_changed([GROUP], changed.get) == ["llama"]
    changed["node2"] = []
    # node3 is not one of the group's nodes: its own "llama" changing restarts nothing of the group.
    assert sg.groups_changed([GROUP], changed.get) == []
    assert sg.groups_changed([single, {"name": "other"}], changed.get) == []
    # A node not in the batch (no fact) changed nothing.
    assert sg.groups_changed([GROUP], {}.get) == []
