"""instinct.stack.model_fetch and instinct.stack.model_pull as Ansible runs them: the real huggingface_hub client
against the fixture Hub, then a pull from the store it filled over a real HTTP server."""

import functools
import http.server
import json
import os
import threading

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import model_fetch, model_pull
from tests.harness import fixture_hub, fixture_model

REPO = "acme/tiny-llama"
TOKEN = "hf_fixture_token_5d2a"  # noqa: S105 - a test value, searched for in the output


def run(module, args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    output = capsys.readouterr().out
    return exit_info.value.code, json.loads(output), output


@pytest.fixture
def hub(fixture_hub_server):
    server = fixture_hub_server
    server.commit = fixture_hub.add_commit(server.root, REPO, fixture_model.files(seed=4))
    fixture_hub.set_access(server.root, REPO, gated=True, tokens=[TOKEN])
    return server


def test_fetch_then_pull_a_gated_model_and_no_output_holds_the_token(hub, tmp_path, capsys):
    store = tmp_path / "store"
    args = {"repo": REPO, "revision": "main", "root": str(store), "endpoint": hub.url, "token": TOKEN}
    code, result, output = run(model_fetch, args, capsys)
    assert code == 0 and result["changed"] and result["commit"] == hub.commit, output
    assert TOKEN not in output
    code, again, output = run(model_fetch, dict(args, revision=hub.commit), capsys)
    assert code == 0 and not again["changed"]

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(store))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        pull = {"url": url, "repo": REPO, "revision": hub.commit, "root": str(tmp_path / "host")}
        code, pulled, output = run(model_pull, pull, capsys)
        assert code == 0 and pulled["changed"] and pulled["downloaded"] == result["size"], output
        assert sorted(os.listdir(pulled["directory"])) == sorted(os.listdir(result["directory"]))
        code, again, output = run(model_pull, pull, capsys)
        assert code == 0 and not again["changed"] and again["downloaded"] == 0
    finally:
        server.shutdown()


def test_a_fetch_without_the_token_fails_saying_what_to_give(hub, tmp_path, capsys):
    code, result, _output = run(
        model_fetch, {"repo": REPO, "revision": "main", "root": str(tmp_path), "endpoint": hub.url}, capsys
    )
    assert code == 1 and result["msg"] == (
        "acme/tiny-llama is gated: give a Hub token (vault) of an account that accepted its terms"
    )


def test_a_pull_of_a_bad_repository_name_fails_early(tmp_path, capsys):
    code, result, _output = run(
        model_pull, {"url": "http://127.0.0.1:9", "repo": "nope", "revision": "a" * 40, "root": str(tmp_path)}, capsys
    )
    assert code == 1 and "is not a Hub repository id" in result["msg"]
