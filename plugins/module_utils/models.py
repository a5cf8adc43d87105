# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model weights as pinned artifacts: names, manifests, verification, free space and pruning.

A model is a Hub repository at one commit. Its files live in a directory named for that commit,
ROOT/ORG--NAME/REVISION/, and beside it the revision's manifest, ROOT/ORG--NAME/REVISION.json: every file with its
size and sha256. The manifest is written last, after every file was checked, so its presence says the directory
is whole and verified; a directory is filled under a hidden .REVISION.partial name and published with one rename.
The same layout serves as the store the hosts pull from (the store host's copy, fetched from the Hub) and as each
host's own copy, so a host pulls the store's manifest and then exactly the files it names.

The Hub publishes a sha256 for the files it keeps in LFS (the weights) and only the git blob sha1 for the others
(config.json, the tokenizer); huggingface_hub itself checks a download's size, not its content. So each file is
checked against what the Hub publishes for it, and the manifest records every file's sha256 for the pulls.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import hashlib
import json
import os
import re
import shutil
import tempfile

from ansible_collections.instinct.stack.plugins.module_utils.stack_lock import sha256 as sha256_file

FORMAT = 1
# The Hub's repository names (huggingface_hub's validate_repo_id): letters, digits, "-", "_", "."; no "--" or "..",
# which also keeps ORG--NAME, the directory name, unambiguous.
REPO_ID = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
# What vLLM loads: the safetensors weights and their index, the configuration and the tokenizer. Not the same
# weights again as PyTorch pickles (*.bin, *.pth, original/), which vLLM reads only when no safetensors exist.
DEFAULT_FILES = ["*.safetensors", "*.json", "tokenizer.model", "*.tiktoken", "merges.txt", "vocab.txt"]
DEFAULT_IGNORE = ["original/*"]
MANIFEST_SUFFIX = ".json"
PARTIAL = ".%s.partial"
BLOCK = 1 << 20


class ModelError(Exception):
    """A model request or a model's files that cannot be used; the message says what to fix."""


def check_repo(repo):
    if not isinstance(repo, str) or not REPO_ID.match(repo):
        raise ModelError(
            "model repository %r is not a Hub repository id: ORG/NAME, letters, digits, '-', '_' and '.', "
            "without '--' or '..'" % (repo,)
        )
    return repo


def is_commit(revision):
    return isinstance(revision, str) and bool(COMMIT.match(revision))


def dir_name(repo):
    """ORG--NAME, the directory of a repository's revisions (the Hub cache's own convention, without its prefix)."""
    return check_repo(repo).replace("/", "--")


def revision_dir(root, repo, revision):
    if not is_commit(revision):
        raise ModelError("revision %r of %s is not a commit (40 lower-case hex digits)" % (revision, repo))
    return os.path.join(root, dir_name(repo), revision)


def manifest_path(root, repo, revision):
    return revision_dir(root, repo, revision) + MANIFEST_SUFFIX


def partial_dir(root, repo, revision):
    return os.path.join(root, dir_name(repo), PARTIAL % revision)


def check_spec(spec):
    """An instance's model as a Hub repository: {repo, revision, files, ignore} with the defaults filled in.

    revision is a commit, or a branch or tag that the fetch resolves once and records; files and ignore are
    fnmatch patterns on the repository's paths, as huggingface_hub's allow_patterns and ignore_patterns."""
    if not isinstance(spec, dict):
        raise ModelError("a model from the Hub is a mapping {repo, revision}, not %r" % (spec,))
    unknown = sorted(set(spec) - {"repo", "revision", "files", "ignore"})
    if unknown:
        raise ModelError(
            "unknown model option(s) %s: a model takes repo, revision, files and ignore" % ", ".join(unknown)
        )
    check_repo(spec.get("repo"))
    revision = spec.get("revision")
    if not isinstance(revision, str) or not revision.strip():
        raise ModelError(
            "model %s has no revision: pin a commit of the repository (a branch such as main is resolved once "
            "and recorded)" % spec["repo"]
        )
    patterns = {}
    for key, default in (("files", DEFAULT_FILES), ("ignore", DEFAULT_IGNORE)):
        value = spec.get(key, default)
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ModelError("model %s: %s must be a list of file patterns, not %r" % (spec["repo"], key, value))
        patterns[key] = list(value)
    if not patterns["files"]:
        raise ModelError("model %s: files selects nothing" % spec["repo"])
    return {
        "repo": spec["repo"],
        "revision": revision.strip(),
        "files": patterns["files"],
        "ignore": patterns["ignore"],
    }


def selected(paths, files, ignore):
    """The paths the patterns select, sorted: those matching a files pattern and no ignore pattern."""
    return sorted(
        path
        for path in paths
        if any(fnmatch.fnmatch(path, pattern) for pattern in files)
        and not any(fnmatch.fnmatch(path, pattern) for pattern in ignore)
    )


def safe_join(root, path):
    """root/path for a repository path, refusing one that would leave root (absolute, or with '..')."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ModelError("file path %r leaves the model directory: refused" % (path,))
    return os.path.join(root, *parts)


def file_digests(path):
    """(size, sha256, git blob sha1) of a file, read once."""
    size = os.path.getsize(path)
    sha256 = hashlib.sha256()
    git = hashlib.sha1(b"blob %d\0" % size)  # noqa: S324 - git's object id, compared with the one the Hub publishes
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            sha256.update(block)
            git.update(block)
    return size, sha256.hexdigest(), git.hexdigest()


def hub_check(path, name, expected):
    """(None, the file's manifest entry) when the file is what the Hub published ({size, sha256} for LFS, else
    {size, git_sha1}), else (why not, None): the file is read once for both."""
    if not os.path.isfile(path):
        return "%s: missing" % name, None
    size, sha256, git = file_digests(path)
    if expected.get("size") is not None and size != expected["size"]:
        return "%s: %d bytes, the Hub lists %d" % (name, size, expected["size"]), None
    if expected.get("sha256"):
        if sha256 != expected["sha256"]:
            return "%s: sha256 %s, the Hub publishes %s" % (name, sha256, expected["sha256"]), None
    elif expected.get("git_sha1"):
        if git != expected["git_sha1"]:
            return "%s: git blob sha1 %s, the Hub publishes %s" % (name, git, expected["git_sha1"]), None
    else:
        return "%s: the Hub publishes no hash for it, so it cannot be checked" % name, None
    return None, {"path": name, "size": size, "sha256": sha256}


def manifest_of(repo, revision, files):
    """The manifest of a revision from its files' entries ({path, size, sha256})."""
    files = sorted(files, key=lambda entry: entry["path"])
    return {
        "format": FORMAT,
        "repo": repo,
        "revision": revision,
        "size": sum(entry["size"] for entry in files),
        "files": files,
    }


def files_under(root):
    """The paths of the files under root, relative and with "/", sorted."""
    found = []
    for directory, _dirnames, filenames in os.walk(root):
        for filename in filenames:
            found.append(os.path.relpath(os.path.join(directory, filename), root).replace(os.sep, "/"))
    return sorted(found)


def manifest(repo, revision, root):
    """The manifest of a verified directory: every file under root with its size and sha256."""
    return manifest_of(
        repo,
        revision,
        [
            {"path": path, "size": os.path.getsize(safe_join(root, path)), "sha256": sha256_file(safe_join(root, path))}
            for path in files_under(root)
        ],
    )


def remove_unlisted(root, listed):
    """Remove the files under root that listed does not name: a cut run's leftovers of another selection."""
    for path in files_under(root):
        if path not in listed:
            os.unlink(safe_join(root, path))


def check_manifest(data, repo=None, revision=None):
    """A manifest read from a store, a mirror or a host, checked before anything trusts it."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), list):
        raise ModelError("not a model manifest of format %d" % FORMAT)
    if repo is not None and data.get("repo") != repo or revision is not None and data.get("revision") != revision:
        raise ModelError(
            "the manifest is for %s@%s, not %s@%s" % (data.get("repo"), data.get("revision"), repo, revision)
        )
    for entry in data["files"]:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("size"), int)
            or not re.match(r"^[0-9a-f]{64}$", str(entry.get("sha256")))
        ):
            raise ModelError("manifest entry %r has no size and sha256" % (entry,))
        safe_join("/", entry.get("path") or "")
    if not data["files"]:
        raise ModelError("the manifest of %s@%s lists no file" % (data.get("repo"), data.get("revision")))
    return data


def manifest_problems(root, data, full=True):
    """What differs between a directory and its manifest: missing, resized or (full) changed files, and extras."""
    problems = []
    listed = set()
    for entry in data["files"]:
        path = safe_join(root, entry["path"])
        listed.add(entry["path"])
        if not os.path.isfile(path):
            problems.append("%s: missing" % entry["path"])
        elif os.path.getsize(path) != entry["size"]:
            problems.append(
                "%s: %d bytes, the manifest says %d" % (entry["path"], os.path.getsize(path), entry["size"])
            )
        elif full and sha256_file(path) != entry["sha256"]:
            problems.append("%s: sha256 differs from the manifest's %s" % (entry["path"], entry["sha256"]))
    for relative in files_under(root):
        if relative not in listed:
            problems.append("%s: not in the manifest" % relative)
    return sorted(problems)


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def write_json(path, data):
    """Write JSON with one rename, so a reader sees the old file or the whole new one."""
    directory = os.path.dirname(path)
    descriptor, staging = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(staging, 0o644)
        os.rename(staging, path)
    except BaseException:
        if os.path.exists(staging):
            os.unlink(staging)
        raise


def published(root, repo, revision, full=False):
    """The manifest of a published revision whose files are there (full: and match it), else None."""
    path = manifest_path(root, repo, revision)
    if not os.path.isfile(path):
        return None
    try:
        data = check_manifest(read_json(path), repo, revision)
    except (ValueError, ModelError):
        return None
    if manifest_problems(revision_dir(root, repo, revision), data, full=full):
        return None
    return data


def publish(root, repo, revision, staging, data):
    """Move a verified staging directory to root/ORG--NAME/REVISION with one rename, then write its manifest."""
    target = revision_dir(root, repo, revision)
    if os.path.lexists(target):  # an unverified leftover (no manifest): the verified staging replaces it
        shutil.rmtree(target)
    os.rename(staging, target)
    write_json(manifest_path(root, repo, revision), data)
    return target


def free_bytes(path):
    """Bytes free for an unprivileged writer on the file system that holds path (or its nearest existing parent)."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def human(size):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return ("%d %s" % (size, unit)) if unit == "B" else ("%.1f %s" % (size, unit))
        size /= 1024.0
    return "%d B" % size  # pragma: no cover - the loop returns


def space_problem(path, needed, what):
    """None when path's file system has needed bytes free, else a message that says what to do."""
    free = free_bytes(path)
    if needed <= free:
        return None
    return (
        "%s needs %s more in %s, which has %s free: free space there (older revisions are pruned only after a "
        "switch) or point the models' directory at a larger file system" % (what, human(needed), path, human(free))
    )


def prunable(root, repo, keep, protected=()):
    """The published revisions of repo to remove: all but the keep newest (by their manifests' times) and the
    protected ones (the revision a service uses and the previous one), with any partial directory left over."""
    directory = os.path.join(root, dir_name(repo))
    if not os.path.isdir(directory):
        return []
    revisions, partials = [], []
    for name in os.listdir(directory):
        if name.endswith(MANIFEST_SUFFIX) and is_commit(name[: -len(MANIFEST_SUFFIX)]):
            revisions.append((os.path.getmtime(os.path.join(directory, name)), name[: -len(MANIFEST_SUFFIX)]))
        elif name.startswith(".") and name.endswith(".partial"):
            partials.append(name)
    revisions.sort(reverse=True)
    kept = {revision for _time, revision in revisions[:keep]} | set(protected)
    return sorted(revision for _time, revision in revisions if revision not in kept) + sorted(partials)


def model_key(repo, revision):
    """REPO@REVISION: how a model at a revision is named across the roles (the pull's results, the services' links)."""
    return "%s@%s" % (repo, revision)


def mirror_commits(specs, mirrored):
    """{REPO@REVISION: commit} for each model spec: the revision itself when it is a commit, else the commit the
    mirror resolved it to (its manifest's models: {repo: {revision, commit}}), else a ModelError naming what to do."""
    commits = {}
    for spec in specs:
        repo, revision = spec["repo"], spec["revision"]
        entry = (mirrored or {}).get(repo) or {}
        if is_commit(revision):
            commits[model_key(repo, revision)] = revision
        elif entry.get("revision") == revision and is_commit(entry.get("commit")):
            commits[model_key(repo, revision)] = entry["commit"]
        else:
            raise ModelError(
                "the mirror holds no %s at %s (%s): add it to the mirror's models and rebuild it, or pin the commit"
                % (
                    repo,
                    revision,
                    "it holds %s, commit %s" % (entry.get("revision"), entry.get("commit")) if entry else "no revision",
                )
            )
    return commits


def served_revisions(root, repo, links):
    """The revisions of repo that links (a directory of links, each naming a revision directory) resolve to: the
    ones services use and used before, which no prune removes."""
    if not links or not os.path.isdir(links):
        return set()
    directory = os.path.realpath(os.path.join(root, dir_name(repo)))
    served = set()
    for name in os.listdir(links):
        target = os.path.realpath(os.path.join(links, name))
        if os.path.dirname(target) == directory and is_commit(os.path.basename(target)):
            served.add(os.path.basename(target))
    return served


def remove(root, repo, names):
    """Remove revisions (their manifest first, so a half-removed one is never taken as published) and partials."""
    directory = os.path.join(root, dir_name(repo))
    for name in names:
        if is_commit(name):
            manifest = os.path.join(directory, name + MANIFEST_SUFFIX)
            if os.path.exists(manifest):
                os.unlink(manifest)
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
