"""The mirror's models: fetched with the real huggingface_hub client from the fixture Hub into the layout the hosts
pull from, recorded in the mirror's manifest, and checked by `mirror verify` (a missing or changed file named)."""

import json

import pytest

from instinct_stack import mirror
from instinct_stack.collection import BadInput
from tests.harness import fixture_hub, fixture_model

REPO = "acme/tiny-llama"


@pytest.fixture
def hub(fixture_hub_server):
    server = fixture_hub_server
    server.commit = fixture_hub.add_commit(server.root, REPO, fixture_model.files(seed=6))
    return server


def test_models_are_checked_when_the_configuration_is_read(tmp_path):
    assert (
        mirror.model_settings("m.yml", [{"repo": REPO, "revision": "main"}])[0]["files"] == mirror.models.DEFAULT_FILES
    )
    with pytest.raises(BadInput, match=r"m.yml: models\[0\]: model acme/x has no revision"):
        mirror.model_settings("m.yml", [{"repo": "acme/x"}])
    with pytest.raises(BadInput, match="acme/x listed twice"):
        mirror.model_settings("m.yml", [{"repo": "acme/x", "revision": "a"}, {"repo": "acme/x", "revision": "b"}])
    with pytest.raises(BadInput, match="models must be a list"):
        mirror.model_settings("m.yml", {"repo": "acme/x"})


def test_a_mirrored_model_is_recorded_by_commit_and_verify_names_a_damaged_or_missing_file(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment_only")
    config = {"models": mirror.model_settings("m.yml", [{"repo": REPO, "revision": "main"}]), "hub_endpoint": hub.url}
    dest = tmp_path / "mirror"
    dest.mkdir()
    mirrored = mirror.mirror_models(config, dest)
    assert mirrored[REPO]["commit"] == hub.commit and mirrored[REPO]["revision"] == "main"
    assert all(auth for _method, _path, auth in hub.requests)  # the token from HF_TOKEN went to the Hub
    manifest = mirror.write_manifest(dest, {"models": mirrored})
    assert "models/acme--tiny-llama/%s/model.safetensors" % hub.commit in manifest["files"]
    assert "hf_from_the_environment_only" not in json.dumps(manifest)
    assert mirror.model_problems(dest, manifest) == []
    weights = dest / "models" / "acme--tiny-llama" / hub.commit / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    (dest / "models" / "acme--tiny-llama" / hub.commit / "tokenizer.json").unlink()
    assert mirror.model_problems(dest, manifest) == [
        "model %s@%s: model.safetensors: sha256 differs from the manifest's %s"
        % (REPO, hub.commit, next(f["sha256"] for f in json.loads(
            (dest / "models" / "acme--tiny-llama" / (hub.commit + ".json")).read_text())["files"]
            if f["path"] == "model.safetensors")),
        "model %s@%s: tokenizer.json: missing" % (REPO, hub.commit),
    ]  # fmt: skip


def test_a_model_the_hub_refuses_stops_the_mirror_with_its_name(hub, tmp_path):
    config = {
        "models": mirror.model_settings("m.yml", [{"repo": "acme/gone", "revision": "main"}]),
        "hub_endpoint": hub.url,
    }
    with pytest.raises(mirror.MirrorError, match="model acme/gone: acme/gone: no such repository on the Hub"):
        mirror.mirror_models(config, tmp_path)
