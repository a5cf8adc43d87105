# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fetch one model revision from a Hugging Face Hub (or a site's Hub-compatible endpoint) into the models layout.

huggingface_hub, the Hub's maintained client, resolves the revision to its commit and downloads the selected
files; it checks their sizes, not their contents. So every file is then checked against what the Hub publishes for
it - the sha256 of an LFS file, the git blob sha1 of any other - before the revision is published with its manifest
(module_utils/models.py). Files left by a cut run are taken up again by the client on the next.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import shutil

from ansible_collections.instinct.stack.plugins.module_utils import models

# Read by huggingface_hub when it is imported: no telemetry call, no Xet or hf_transfer download path (a plain
# HTTP GET per file from the endpoint, which a site's mirror can serve), no progress bars in a module's output.
CLIENT_ENVIRONMENT = {
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_XET": "1",
    "HF_HUB_ENABLE_HF_TRANSFER": "0",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}
CLIENT_STATE = os.path.join(".cache", "huggingface")  # what hf_hub_download keeps in a local_dir


def client(endpoint=None):
    """huggingface_hub, imported with CLIENT_ENVIRONMENT (and HF_ENDPOINT when given), read at its import."""
    os.environ.update(CLIENT_ENVIRONMENT)
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint.rstrip("/")
    try:
        import huggingface_hub
    except ImportError:
        raise models.ModelError(
            "huggingface_hub is not importable by this interpreter: run the fetch with the models' client "
            "virtualenv's python (the role creates it)"
        ) from None
    return huggingface_hub


def _hub_error(hub, exc, spec):
    errors = importlib.import_module("huggingface_hub.errors")
    where = "%s@%s" % (spec["repo"], spec["revision"])
    if isinstance(exc, getattr(errors, "GatedRepoError", ())):
        return "%s is gated: give a Hub token (vault) of an account that accepted its terms" % spec["repo"]
    if isinstance(exc, getattr(errors, "RepositoryNotFoundError", ())):
        return "%s: no such repository on the Hub, or it is private and the token cannot read it" % spec["repo"]
    if isinstance(exc, getattr(errors, "RevisionNotFoundError", ())):
        return "%s: no such revision (a commit, branch or tag of the repository)" % where
    return "%s: the Hub request failed: %s" % (where, exc)


def expected_files(info, spec):
    """{path: {size, sha256 or git_sha1}} of the files the spec selects, from model_info(files_metadata=True)."""
    siblings = {sibling.rfilename: sibling for sibling in info.siblings or []}
    names = models.selected(siblings, spec["files"], spec["ignore"])
    if not names:
        raise models.ModelError(
            "%s@%s: files %s (ignoring %s) select none of its files: %s"
            % (spec["repo"], info.sha, spec["files"], spec["ignore"], ", ".join(sorted(siblings)) or "none")
        )
    expected = {}
    for name in names:
        sibling = siblings[name]
        lfs = getattr(sibling, "lfs", None)
        expected[name] = {
            "size": sibling.size,
            "sha256": (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None,
            "git_sha1": getattr(sibling, "blob_id", None),
        }
    return expected


def fetch(root, spec, endpoint=None, token=None, keep=2, protected=(), check_mode=False):
    """Bring root/ORG--NAME/COMMIT to the Hub's files of the spec; a result dict (changed, repo, revision, commit,
    path, size, files, pruned). ModelError says what is wrong."""
    spec = models.check_spec(spec)
    hub = client(endpoint)
    api = hub.HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token or None)
    try:
        info = api.model_info(spec["repo"], revision=spec["revision"], files_metadata=True)
    except Exception as exc:  # the client's own errors, named by _hub_error
        raise models.ModelError(_hub_error(hub, exc, spec)) from None
    commit = info.sha
    if not models.is_commit(commit):
        raise models.ModelError("%s: the Hub named no commit for revision %s" % (spec["repo"], spec["revision"]))
    result = {"repo": spec["repo"], "revision": spec["revision"], "commit": commit}
    path = models.revision_dir(root, spec["repo"], commit)
    held = models.published(root, spec["repo"], commit)
    if held is not None:
        pruned = models.prunable(root, spec["repo"], keep, set(protected) | {commit})
        if pruned and not check_mode:
            models.remove(root, spec["repo"], pruned)
        result.update(changed=bool(pruned), path=path, size=held["size"], files=len(held["files"]), pruned=pruned)
        return result
    expected = expected_files(info, spec)
    staging = models.partial_dir(root, spec["repo"], commit)
    total = sum(entry["size"] or 0 for entry in expected.values())
    present = sum(
        os.path.getsize(models.safe_join(staging, name))
        for name in expected
        if os.path.isfile(models.safe_join(staging, name))
    )
    problem = models.space_problem(
        os.path.dirname(path), total - present, "%s@%s (%s)" % (spec["repo"], commit, models.human(total))
    )
    if problem:
        raise models.ModelError(problem)
    if check_mode:
        result.update(changed=True, path=path, size=total, files=len(expected), pruned=[])
        return result
    if not os.path.isdir(staging):
        os.makedirs(staging, 0o755)
    for name in expected:
        try:
            hub.hf_hub_download(
                spec["repo"], name, revision=commit, local_dir=staging, endpoint=endpoint or None, token=token or None
            )
        except Exception as exc:  # the client's own errors, named by _hub_error; a rerun resumes
            raise models.ModelError(_hub_error(hub, exc, spec)) from None
    bad, checked = [], []
    for name, entry in expected.items():
        problem, checked_entry = models.hub_check(models.safe_join(staging, name), name, entry)
        if problem:
            bad.append(problem)
            os.unlink(models.safe_join(staging, name))
        else:
            checked.append(checked_entry)
    # The client's record of what it downloaded: not part of the model, and a rerun after a refusal starts clean.
    shutil.rmtree(os.path.join(staging, CLIENT_STATE), ignore_errors=True)
    if os.path.isdir(os.path.join(staging, ".cache")) and not os.listdir(os.path.join(staging, ".cache")):
        os.rmdir(os.path.join(staging, ".cache"))
    models.remove_unlisted(staging, set(expected))
    if bad:
        raise models.ModelError(
            "%s@%s: refused, the downloaded files differ from what the Hub publishes for them (removed, a rerun "
            "downloads them again): %s" % (spec["repo"], commit, "; ".join(bad))
        )
    # The manifest from the digests the checks computed: a 140 GB model is read once, not twice.
    data = models.manifest_of(spec["repo"], commit, checked)
    models.publish(root, spec["repo"], commit, staging, data)
    pruned = models.prunable(root, spec["repo"], keep, set(protected) | {commit})
    models.remove(root, spec["repo"], pruned)
    result.update(changed=True, path=path, size=data["size"], files=len(data["files"]), pruned=pruned)
    return result
