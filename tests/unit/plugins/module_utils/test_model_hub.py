"""module_utils/model_hub.py with the real huggingface_hub client against the fixture Hub
(tests/harness/fixture_hub.py) serving a small model in the Hub's layout, written with the real safetensors library
(tests/harness/fixture_model.py)."""

import os

import pytest
from safetensors import safe_open

from ansible_collections.instinct.stack.plugins.module_utils import model_hub, models
from tests.harness import fixture_hub, fixture_model

REPO = "acme/tiny-llama"
TOKEN = "hf_fixture_token_8c1e"  # noqa: S105 - a test value, searched for in the messages


@pytest.fixture
def hub(fixture_hub_server):
    server = fixture_hub_server
    server.commits = [fixture_hub.add_commit(server.root, REPO, fixture_model.files(seed=1))]
    return server


def fetch(hub, store, revision, **kwargs):
    return model_hub.fetch(str(store), {"repo": REPO, "revision": revision}, endpoint=hub.url, **kwargs)


def test_a_branch_is_resolved_to_its_commit_and_the_selected_files_are_published_verified(hub, tmp_path):
    store = tmp_path / "store"
    result = fetch(hub, store, "main")
    commit = hub.commits[0]
    assert result["commit"] == commit and result["revision"] == "main" and result["changed"]
    directory = store / "acme--tiny-llama" / commit
    assert result["path"] == str(directory)
    # No pytorch_model.bin, no README.md, no client state.
    assert sorted(os.listdir(directory)) == fixture_model.DEFAULT_SELECTION
    manifest = models.published(str(store), REPO, commit, full=True)
    assert manifest["size"] == result["size"] and len(manifest["files"]) == 7
    with safe_open(str(directory / "model.safetensors"), framework="np") as weights:
        assert "model.embed_tokens.weight" in list(weights.keys())  # safe_open has no __contains__
    # Every request went to the fixture endpoint; the duplicate weights were never asked for.
    assert hub.requests and not any("pytorch_model.bin" in path for _method, path, _auth in hub.requests)


def test_a_fetched_revision_is_not_fetched_again(hub, tmp_path):
    store = tmp_path / "store"
    fetch(hub, store, hub.commits[0])
    hub.requests.clear()
    result = fetch(hub, store, hub.commits[0])
    assert not result["changed"]
    assert [method for method, _path, _auth in hub.requests] == ["GET"]  # the revision's metadata only


@pytest.mark.parametrize("path", ["model.safetensors", "config.json"])
def test_a_file_that_differs_from_what_the_hub_publishes_is_refused_and_nothing_is_published(hub, tmp_path, path):
    commit = hub.commits[0]
    fixture_hub.Repository(hub.root, REPO).files(commit)  # the Hub's metadata, recorded before the damage
    fixture_hub.corrupt(hub.root, REPO, commit, path)
    store = tmp_path / "store"
    with pytest.raises(models.ModelError) as error:
        fetch(hub, store, commit)
    kind = "sha256" if path.endswith(".safetensors") else "git blob sha1"
    assert "%s: %s" % (path, kind) in str(error.value) and "the Hub publishes" in str(error.value)
    assert not os.path.exists(models.revision_dir(str(store), REPO, commit))
    assert models.published(str(store), REPO, commit) is None


def test_a_gated_model_needs_a_token_which_no_message_shows(hub, tmp_path):
    fixture_hub.set_access(hub.root, REPO, gated=True, tokens=[TOKEN])
    store = tmp_path / "store"
    with pytest.raises(models.ModelError) as error:
        fetch(hub, store, "main", token="hf_wrong_token_1234")  # noqa: S106 - a test value
    assert "is gated: give a Hub token" in str(error.value) and "hf_wrong" not in str(error.value)
    result = fetch(hub, store, "main", token=TOKEN)
    assert result["changed"] and TOKEN not in repr(result)
    assert all(auth for _method, _path, auth in hub.requests[-3:])


def test_unknown_repositories_and_revisions_are_named(hub, tmp_path):
    with pytest.raises(models.ModelError, match="acme/nothing: no such repository"):
        model_hub.fetch(str(tmp_path), {"repo": "acme/nothing", "revision": "main"}, endpoint=hub.url)
    with pytest.raises(models.ModelError, match="acme/tiny-llama@v9: no such revision"):
        fetch(hub, tmp_path, "v9")


def test_patterns_that_select_nothing_name_the_files_there_are(hub, tmp_path):
    with pytest.raises(models.ModelError, match="select none of its files: README.md, config.json"):
        model_hub.fetch(str(tmp_path), {"repo": REPO, "revision": "main", "files": ["*.gguf"]}, endpoint=hub.url)


def test_too_little_space_is_refused_before_any_download(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(models, "free_bytes", lambda path: 1 << 20)
    hub.requests.clear()
    with pytest.raises(models.ModelError, match=r"needs 4\.5 MiB more in .*, which has 1\.0 MiB free"):
        fetch(hub, tmp_path, "main")
    assert [method for method, _path, _auth in hub.requests] == ["GET"]


def test_a_new_commit_is_fetched_beside_and_the_oldest_pruned(hub, tmp_path):
    store = tmp_path / "store"
    fetch(hub, store, "main")
    second = fixture_hub.add_commit(hub.root, REPO, fixture_model.files(seed=2))
    third = fixture_hub.add_commit(hub.root, REPO, fixture_model.files(seed=3))
    fetch(hub, store, second)
    result = fetch(hub, store, third, keep=1, protected=[second])
    assert result["pruned"] == [hub.commits[0]]
    assert sorted(os.listdir(store / "acme--tiny-llama")) == sorted([second, second + ".json", third, third + ".json"])


def test_check_mode_reports_the_fetch_and_writes_nothing(hub, tmp_path):
    store = tmp_path / "store"
    result = fetch(hub, store, "main", check_mode=True)
    assert result["changed"] and not store.exists()
