"""The fleet filters as the playbooks call them, with their documentation beside them."""

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.instinct.stack.plugins.filter.fleet import FilterModule

FILTERS = FilterModule().filters()


def test_every_filter_has_its_documentation_file():
    here = os.path.dirname(FILTERS["python_abi_problem"].__code__.co_filename)
    assert sorted(name for name in FILTERS if not os.path.isfile(os.path.join(here, name + ".yml"))) == []


def test_python_abi_problem_names_the_hosts_of_each_abi():
    problem = FILTERS["python_abi_problem"](
        {
            "a": {"key": "cp311-linux_x86_64-glibc2.36", "python": "3.11.2"},
            "b": {"key": "cp310-linux_x86_64-glibc2.35", "python": "3.10.12"},
        }
    )
    assert "cp310-linux_x86_64-glibc2.35 (Python 3.10.12): b" in problem and "(Python 3.11.2): a" in problem
    assert FILTERS["python_abi_problem"]({"a": {"key": "k"}}) == ""


def test_python_abi_problem_refuses_what_is_not_a_dict():
    with pytest.raises(AnsibleFilterError, match="takes a dict of host name to instinct_python_abi"):
        FILTERS["python_abi_problem"](["a", "b"])


GROUP = {"name": "llama", "nodes": ["node1", "node2"], "pipeline_parallel_size": 2, "tensor_parallel_size": 1,
         "gpus": [], "model_key": None, "model_path": "/srv/m"}  # fmt: skip


def node(stack, address):
    return {"vllm_service_node": {"stack": "/opt/s/stacks/" + stack, "address": address, "gpus": 1, "models": {}}}


def test_serving_group_problems_reads_each_node_from_hostvars():
    hostvars = {"node1": node("k1", "10.0.0.1"), "node2": node("k2", "10.0.0.2")}
    (problem,) = FILTERS["serving_group_problems"](GROUP, hostvars)
    assert problem.startswith("serving group 'llama': node2 would serve stack k2, the head node1 k1")
    hostvars["node2"] = node("k1", "10.0.0.2")
    assert FILTERS["serving_group_problems"](GROUP, hostvars) == []
    # A node that did not record what it would serve is not in the run (another batch, --limit, a failed host).
    hostvars["node2"] = {}
    assert "node2 is not in this run" in FILTERS["serving_group_problems"](GROUP, hostvars)[0]


def test_serve_order_gives_the_play_its_hosts_and_batches():
    hostvars = {"node1": {"vllm_service_instances": [GROUP]}, "node2": {"vllm_service_instances": [GROUP]}, "x": {}}
    plan = FILTERS["serve_order"](["x", "node2", "node1"], hostvars, 1)
    assert plan == {"hosts": ["x", "node1", "node2"], "serial": [1, 2, 1], "groups": [["node1", "node2"]]}
    assert FILTERS["serve_order"](["x"], hostvars, "25%") == {"hosts": ["x"], "serial": "25%", "groups": []}


def test_ray_start_args_refuses_a_host_that_is_not_a_node():
    args = FILTERS["ray_start_args"](["node1", "node2"], "node2", {"node1": "10.0.0.1", "node2": "10.0.0.2"}, "8")
    assert "--address=10.0.0.1:6379" in args and "--num-gpus=8" in args
    with pytest.raises(AnsibleFilterError, match="node3 is not a node of the group"):
        FILTERS["ray_start_args"](["node1", "node2"], "node3", {}, 8)


def test_serving_groups_changed_reads_each_nodes_changes_from_hostvars():
    hostvars = {"node1": {"vllm_service_changed": []}, "node2": {"vllm_service_changed": ["llama"]}, "x": {}}
    assert FILTERS["serving_groups_changed"]([GROUP], hostvars) == ["llama"]
    hostvars = {"node1": {}, "node2": {"vllm_service_changed": []}, "node3": {"vllm_service_changed": ["llama"]}}
    assert FILTERS["serving_groups_changed"]([GROUP], hostvars) == []


def test_serving_group_addresses_maps_each_node_to_the_address_it_recorded():
    hostvars = {"node1": node("k1", "10.0.0.1"), "node2": node("k1", "10.0.0.2")}
    assert FILTERS["serving_group_addresses"](GROUP, hostvars) == {"node1": "10.0.0.1", "node2": "10.0.0.2"}
    assert list(FILTERS["serving_group_addresses"](GROUP, hostvars)) == ["node1", "node2"]
    assert FILTERS["serving_group_addresses"](GROUP, {"node1": node("k1", "10.0.0.1")})["node2"] is None
    with pytest.raises(AnsibleFilterError):
        FILTERS["serving_group_addresses"]({"name": "x", "nodes": "node1"}, hostvars)
