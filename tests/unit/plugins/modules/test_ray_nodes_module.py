"""instinct.stack.ray_nodes as Ansible runs it, against a stand-in for the stack's Python that prints what the real
driver script prints (ray.nodes() as one JSON line, after Ray's own log lines)."""

import json

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import ray_nodes

NODES = [
    {"node_id": "aa", "address": "10.0.0.1", "alive": True, "gpus": 8},
    {"node_id": "bb", "address": "10.0.0.2", "alive": False, "gpus": 8},
]


def python(tmp_path, output, code=0):
    """An executable that takes the place of venv/bin/python: checks it was handed the script and the address."""
    path = tmp_path / "python"
    path.write_text(
        "#!/bin/sh\n"
        '[ "$1" = -c ] && [ "$3" = 10.0.0.1:6379 ] || { echo "bad arguments: $*" >&2; exit 9; }\n'
        "echo '2026-12-07 INFO worker.py -- Connected to Ray cluster.'\n"
        "cat <<'OUT'\n%s\nOUT\nexit %d\n" % (output, code)
    )
    path.chmod(0o755)
    return str(path)


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        ray_nodes.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_a_node_that_did_not_join_fails_the_wait_naming_it(tmp_path, capsys):
    args = {
        "python": python(tmp_path, json.dumps(NODES)),
        "address": "10.0.0.1:6379",
        "name": "llama",
        "nodes": {"node1": "10.0.0.1", "node2": "10.0.0.2"},
    }
    code, result = run_module(args, capsys)
    assert code == 1 and result["missing"] == [{"node": "node2", "address": "10.0.0.2"}]
    assert result["msg"].startswith(
        "serving group 'llama': node2 (10.0.0.2) is not in the Ray cluster at 10.0.0.1:6379"
    )
    assert result["nodes"] == NODES and result["changed"] is False


def test_every_node_alive_passes_and_a_status_only_reports(tmp_path, capsys):
    alive = [dict(node, alive=True) for node in NODES]
    args = {"python": python(tmp_path, json.dumps(alive)), "address": "10.0.0.1:6379", "nodes": {"n2": "10.0.0.2"}}
    code, result = run_module(args, capsys)
    assert code == 0 and result["missing"] == [] and len(result["nodes"]) == 2
    args = dict(args, python=python(tmp_path, json.dumps(NODES)), require_all=False)
    code, result = run_module(args, capsys)
    assert code == 0 and result["missing"] == [{"node": "n2", "address": "10.0.0.2"}]


def test_a_cluster_that_cannot_be_read_says_why(tmp_path, capsys):
    unreadable = python(tmp_path, "ConnectionError: Failed to connect to Ray cluster", 1)
    args = {"python": unreadable, "address": "10.0.0.1:6379"}
    code, result = run_module(args, capsys)
    assert code == 1 and "could not read the Ray cluster at 10.0.0.1:6379" in result["msg"]
    assert "Failed to connect to Ray cluster" in result["msg"]


def test_an_account_that_does_not_exist_is_named(tmp_path, capsys):
    args = {"python": python(tmp_path, "[]"), "address": "10.0.0.1:6379", "user": "no-such-account-here"}
    code, result = run_module(args, capsys)
    assert code == 1 and "no account no-such-account-here on this host" in result["msg"]
