"""mirror build's git part against real local repositories: absolute submodule URLs, fetched through rewrites."""

import subprocess

from instinct_stack import mirror

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "protocol.file.allow=always"]


def repo(path, files):
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for name, content in files.items():
        (path / name).write_text(content)
    subprocess.run(GIT + ["-C", str(path), "add", "-A"], check=True)
    subprocess.run(GIT + ["-C", str(path), "commit", "-qm", "init"], check=True)


def test_absolute_submodule_urls_are_fetched_through_rewrites_and_stored_under_upstream(tmp_path):
    upstream = tmp_path / "upstream"
    # "github.com" as a directory here; the superproject's .gitmodules names the absolute upstream URL.
    repo(upstream / "github.com" / "pytorch" / "fixture-lib", {"VERSION": "1.0\n"})
    superproject = upstream / "pytorch"
    repo(superproject, {"setup.py": ""})
    subprocess.run(
        GIT
        + [
            "-C",
            str(superproject),
            "submodule",
            "add",
            "-q",
            str(upstream / "github.com/pytorch/fixture-lib"),
            "third_party/fixture-lib",
        ],
        check=True,
    )
    subprocess.run(
        [
            "git",
            "-C",
            str(superproject),
            "config",
            "-f",
            ".gitmodules",
            "submodule.third_party/fixture-lib.url",
            "https://github.com/pytorch/fixture-lib",
        ],
        check=True,
    )
    subprocess.run(GIT + ["-C", str(superproject), "commit", "-qam", "submodule"], check=True)
    config = {
        "git": {"pytorch": {"url": "file://%s" % superproject, "ref": "main"}},
        "git_rewrites": {"https://github.com/": "file://%s/github.com/" % upstream},
    }
    dest = tmp_path / "mirror"
    refs = mirror.git_repositories(config, dest, tmp_path)
    stored = dest / "git" / "github.com" / "pytorch" / "fixture-lib.git"
    assert stored.is_dir() and (stored / "info" / "refs").is_file()
    assert refs["pytorch"]["commit"]


def test_unreachable_submodule_names_its_url(tmp_path):
    superproject = tmp_path / "pytorch"
    repo(superproject, {".gitmodules": '[submodule "x"]\n\tpath = x\n\turl = https://github.com/none/x.git\n'})
    # A gitlink is needed for the submodule to count; without rewrites github.com is unreachable here.
    blob = subprocess.run(
        ["git", "-C", str(superproject), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout
    subprocess.run(
        ["git", "-C", str(superproject), "update-index", "--add", "--cacheinfo", "160000,%s,x" % blob.strip()],
        check=True,
    )
    subprocess.run(GIT + ["-C", str(superproject), "commit", "-qm", "gitlink"], check=True)
    config = {
        "git": {"pytorch": {"url": "file://%s" % superproject, "ref": "main"}},
        "git_rewrites": {"https://github.com/": "file://%s/nowhere/" % tmp_path},
    }
    try:
        mirror.git_repositories(config, tmp_path / "mirror", tmp_path)
    except mirror.MirrorError as error:
        assert "cannot mirror https://github.com/none/x.git" in str(error)
    else:
        raise AssertionError("an unreachable submodule must stop the mirror build")
