"""module_utils/models.py: model requests, the revision layout, manifests, free space and pruning."""

import os

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import models

COMMIT = "a" * 40
OTHER = "b" * 40


def test_a_hub_model_takes_a_repository_and_a_revision_and_gets_the_default_files():
    spec = models.check_spec({"repo": "meta-llama/Llama-3.1-8B-Instruct", "revision": "main"})
    assert spec == {
        "repo": "meta-llama/Llama-3.1-8B-Instruct",
        "revision": "main",
        "files": models.DEFAULT_FILES,
        "ignore": models.DEFAULT_IGNORE,
    }


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"repo": "llama", "revision": COMMIT}, "is not a Hub repository id: ORG/NAME"),
        ({"repo": "a--b/c", "revision": COMMIT}, "without '--' or '..'"),
        ({"repo": "org/name"}, "has no revision: pin a commit"),
        ({"repo": "org/name", "revision": COMMIT, "files": "*.json"}, "files must be a list of file patterns"),
        ({"repo": "org/name", "revision": COMMIT, "files": []}, "files selects nothing"),
        ({"repo": "org/name", "revision": COMMIT, "token": "x"}, "unknown model option(s) token"),
        ("org/name", "is a mapping {repo, revision}"),
    ],
)
def test_a_bad_model_request_says_what_to_fix(spec, message):
    with pytest.raises(models.ModelError) as error:
        models.check_spec(spec)
    assert message in str(error.value)


def test_the_default_patterns_take_the_safetensors_config_and_tokenizer_not_the_pickles():
    paths = [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer.model",
        "pytorch_model.bin",
        "original/consolidated.00.pth",
        "original/params.json",
        "README.md",
    ]
    assert models.selected(paths, models.DEFAULT_FILES, models.DEFAULT_IGNORE) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer.model",
    ]


def test_the_layout_names_the_repository_and_the_commit(tmp_path):
    assert models.dir_name("org/name") == "org--name"
    assert models.revision_dir(str(tmp_path), "org/name", COMMIT) == str(tmp_path / "org--name" / COMMIT)
    assert models.manifest_path(str(tmp_path), "org/name", COMMIT) == str(tmp_path / "org--name" / (COMMIT + ".json"))
    with pytest.raises(models.ModelError, match="is not a commit"):
        models.revision_dir(str(tmp_path), "org/name", "main")


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", "a//b", ""])
def test_a_path_that_leaves_the_model_directory_is_refused(path):
    with pytest.raises(models.ModelError, match="leaves the model directory"):
        models.safe_join("/models", path)


def write(root, files):
    for path, data in files.items():
        target = os.path.join(root, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)


def test_a_published_revision_is_found_and_one_with_a_changed_file_is_not(tmp_path):
    staging = str(tmp_path / "staging")
    write(staging, {"config.json": b"{}", "sub/model.safetensors": b"x" * 100})
    data = models.manifest("org/name", COMMIT, staging)
    assert data["size"] == 102 and [entry["path"] for entry in data["files"]] == [
        "config.json",
        "sub/model.safetensors",
    ]
    root = str(tmp_path / "models")
    os.makedirs(os.path.join(root, "org--name"))
    models.publish(root, "org/name", COMMIT, staging, data)
    assert not os.path.exists(staging)
    assert models.published(root, "org/name", COMMIT, full=True) == data
    # Same size, other bytes: the quick check (sizes) passes, the full one (sha256) does not.
    write(models.revision_dir(root, "org/name", COMMIT), {"sub/model.safetensors": b"y" * 100})
    assert models.published(root, "org/name", COMMIT) == data
    assert models.published(root, "org/name", COMMIT, full=True) is None
    assert models.manifest_problems(models.revision_dir(root, "org/name", COMMIT), data) == [
        "sub/model.safetensors: sha256 differs from the manifest's %s" % data["files"][1]["sha256"]
    ]


def test_a_revision_without_its_manifest_is_not_published(tmp_path):
    root = str(tmp_path)
    write(models.revision_dir(root, "org/name", COMMIT), {"config.json": b"{}"})
    assert models.published(root, "org/name", COMMIT) is None


def test_the_hub_hashes_are_checked_sha256_for_lfs_and_the_git_blob_sha1_otherwise(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"hello\n")
    sha = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    entry = {"path": "config.json", "size": 6, "sha256": sha}

    def check(expected):
        return models.hub_check(str(path), "config.json", expected)

    # git hash-object of "hello\n"
    assert check({"size": 6, "git_sha1": "ce013625030ba8dba906f756967f9e9ca394464a"}) == (None, entry)
    assert "git blob sha1" in check({"size": 6, "git_sha1": "0" * 40})[0]
    assert check({"size": 6, "sha256": sha}) == (None, entry)
    assert "the Hub publishes" in check({"size": 6, "sha256": "0" * 64})[0]
    assert "6 bytes, the Hub lists 7" in check({"size": 7, "sha256": sha})[0]
    assert "cannot be checked" in check({"size": 6})[0]
    assert check({"size": 6, "sha256": "0" * 64})[1] is None
    assert models.hub_check(str(tmp_path / "absent"), "absent", {"size": 1}) == ("absent: missing", None)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"format": 2, "files": []}, "not a model manifest"),
        ({"format": 1, "repo": "o/n", "revision": COMMIT, "files": []}, "lists no file"),
        (
            {"format": 1, "repo": "o/n", "revision": COMMIT, "files": [{"path": "x", "size": 1}]},
            "has no size and sha256",
        ),
        (
            {
                "format": 1,
                "repo": "o/n",
                "revision": COMMIT,
                "files": [{"path": "../x", "size": 1, "sha256": "0" * 64}],
            },
            "leaves the model directory",
        ),
        ({"format": 1, "repo": "o/other", "revision": COMMIT, "files": []}, "the manifest is for o/other@"),
    ],
)
def test_a_manifest_is_checked_before_it_is_trusted(data, message):
    with pytest.raises(models.ModelError, match=message):
        models.check_manifest(data, "o/n", COMMIT)


def test_space_is_checked_against_the_nearest_existing_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "free_bytes", lambda path: 10 << 30)
    assert models.space_problem(str(tmp_path / "not" / "yet"), 5 << 30, "o/n@x (5 GiB) on h1") is None
    message = models.space_problem(str(tmp_path), 140 << 30, "o/n@x (140.0 GiB) on h1")
    assert "o/n@x (140.0 GiB) on h1 needs 140.0 GiB more in %s, which has 10.0 GiB free" % tmp_path in message


def test_free_bytes_reads_the_file_system(tmp_path):
    stat = os.statvfs(str(tmp_path))
    assert models.free_bytes(str(tmp_path / "a" / "b")) == pytest.approx(stat.f_bavail * stat.f_frsize, rel=0.01)


def test_pruning_keeps_the_newest_the_protected_and_removes_partials(tmp_path):
    root = str(tmp_path)
    revisions = [c * 40 for c in "abcde"]
    for age, revision in enumerate(revisions):
        write(models.revision_dir(root, "o/n", revision), {"config.json": b"{}"})
        manifest = models.manifest_path(root, "o/n", revision)
        with open(manifest, "w") as handle:
            handle.write("{}")
        os.utime(manifest, (1000 + age, 1000 + age))  # e is the newest
    os.makedirs(models.partial_dir(root, "o/n", "f" * 40))
    gone = models.prunable(root, "o/n", keep=2, protected={"a" * 40})
    assert gone == ["b" * 40, "c" * 40, ".%s.partial" % ("f" * 40)]
    models.remove(root, "o/n", gone)
    assert sorted(os.listdir(os.path.join(root, "o--n"))) == sorted(
        ["a" * 40, "d" * 40, "e" * 40] + [r + ".json" for r in ("a" * 40, "d" * 40, "e" * 40)]
    )


def test_the_mirror_resolves_a_branch_to_the_commit_it_recorded():
    specs = [{"repo": "acme/a", "revision": "main"}, {"repo": "acme/b", "revision": "d" * 40}]
    mirrored = {"acme/a": {"revision": "main", "commit": "e" * 40}}
    assert models.mirror_commits(specs, mirrored) == {"acme/a@main": "e" * 40, "acme/b@" + "d" * 40: "d" * 40}


@pytest.mark.parametrize(
    ("mirrored", "named"),
    [({}, "no revision"), ({"acme/a": {"revision": "v2", "commit": "f" * 40}}, "it holds v2, commit " + "f" * 40)],
)
def test_a_branch_the_mirror_did_not_resolve_is_refused(mirrored, named):
    with pytest.raises(models.ModelError) as refused:
        models.mirror_commits([{"repo": "acme/a", "revision": "main"}], mirrored)
    assert "the mirror holds no acme/a at main (%s)" % named in str(refused.value)
    assert "pin the commit" in str(refused.value)


def test_served_revisions_are_the_ones_the_links_resolve_to_under_the_repository(tmp_path):
    repo_dir = tmp_path / "acme--a"
    (repo_dir / ("1" * 40)).mkdir(parents=True)
    (tmp_path / "acme--b" / ("2" * 40)).mkdir(parents=True)
    links = tmp_path / "served"
    links.mkdir()
    os.symlink(str(repo_dir / ("1" * 40)), str(links / "one"))
    os.symlink(str(tmp_path / "acme--b" / ("2" * 40)), str(links / "other-repo"))
    os.symlink(str(tmp_path / "gone"), str(links / "dangling"))
    assert models.served_revisions(str(tmp_path), "acme/a", str(links)) == {"1" * 40}
    assert models.served_revisions(str(tmp_path), "acme/a", str(tmp_path / "none")) == set()
