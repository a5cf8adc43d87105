# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pull one model revision from a store (or a mirror) that holds it in the models layout (module_utils/models.py).

The store's manifest names every file with its size and sha256. The pull checks the free space first, downloads
into a hidden partial directory (resuming a file cut short with an HTTP range request), checks every file's sha256,
and publishes the directory with one rename and the manifest beside it. A host that holds the revision already
(its manifest there, the files of its sizes) downloads nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible.module_utils.six.moves.http_client import HTTPException
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.instinct.stack.plugins.module_utils import models

TIMEOUT = 60


def revision_url(base, repo, revision, suffix=""):
    return "%s/%s/%s%s" % (base.rstrip("/"), models.dir_name(repo), revision, suffix)


def read_manifest(base, repo, revision, opener=open_url):
    url = revision_url(base, repo, revision, models.MANIFEST_SUFFIX)
    try:
        response = opener(url, timeout=TIMEOUT)
        data = json.loads(response.read().decode("utf-8"))
    except HTTPError as exc:
        if exc.code == 404:
            raise models.ModelError(
                "%s@%s is not in the store at %s (no %s): fetch it there first, or add it to the mirror's models"
                % (repo, revision, base, url)
            ) from None
        raise models.ModelError("reading %s failed: HTTP %s" % (url, exc.code)) from None
    except (URLError, OSError, ValueError) as exc:
        raise models.ModelError("reading %s failed: %s" % (url, exc)) from None
    return models.check_manifest(data, repo, revision)


def _download(url, path, size, opener):
    """Download url into path, resuming a shorter file with a range request; the bytes transferred."""
    have = os.path.getsize(path) if os.path.isfile(path) else 0
    if have > size:
        os.unlink(path)
        have = 0
    if have == size:
        return 0
    headers = {"Range": "bytes=%d-" % have} if have else {}
    response = opener(url, headers=headers, timeout=TIMEOUT)
    status = response.getcode()
    mode = "ab" if have and status == 206 else "wb"  # a server without ranges sends the whole file: start over
    written = 0
    with open(path, mode) as handle:
        for block in iter(lambda: response.read(models.BLOCK), b""):
            handle.write(block)
            written += len(block)
        handle.flush()
        os.fsync(handle.fileno())
    if os.path.getsize(path) < size:  # the connection closed early: keep the bytes for a range request next time
        raise IOError("the connection closed after %d of %d bytes" % (os.path.getsize(path), size))
    return written


def pull(
    base, root, repo, revision, keep=2, protected=(), check_mode=False, opener=open_url, what="this host", served=None
):
    """Bring root/ORG--NAME/REVISION to the store's revision; a result dict (changed, path, size, downloaded,
    pruned). ModelError says what is wrong: not in the store, too little space, a file that does not match.
    Revisions that a link in served resolves to are protected like those in protected."""
    path = models.revision_dir(root, repo, revision)
    protected = set(protected) | models.served_revisions(root, repo, served)
    held = models.published(root, repo, revision)
    if held is not None:
        pruned = models.prunable(root, repo, keep, set(protected) | {revision})
        if pruned and not check_mode:
            models.remove(root, repo, pruned)
        return {"changed": bool(pruned), "path": path, "size": held["size"], "downloaded": 0, "pruned": pruned}
    data = read_manifest(base, repo, revision, opener)
    staging = models.partial_dir(root, repo, revision)
    present = 0
    for entry in data["files"]:
        local = models.safe_join(staging, entry["path"])
        if os.path.isfile(local):
            present += min(os.path.getsize(local), entry["size"])
    problem = models.space_problem(
        os.path.dirname(path),
        data["size"] - present,
        "%s@%s (%s) on %s" % (repo, revision, models.human(data["size"]), what),
    )
    if problem:
        raise models.ModelError(problem)
    if check_mode:
        return {"changed": True, "path": path, "size": data["size"], "downloaded": 0, "pruned": []}
    if os.path.isdir(staging):  # a cut pull of another manifest may have left files this one does not name
        models.remove_unlisted(staging, set(entry["path"] for entry in data["files"]))
    downloaded = 0
    bad = []
    for entry in data["files"]:
        local = models.safe_join(staging, entry["path"])
        directory = os.path.dirname(local)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        url = "%s/%s" % (revision_url(base, repo, revision), entry["path"])
        try:
            downloaded += _download(url, local, entry["size"], opener)
        except HTTPError as exc:
            raise models.ModelError("downloading %s failed: HTTP %s" % (url, exc.code)) from None
        except (URLError, OSError, HTTPException) as exc:
            raise models.ModelError("downloading %s failed: %r (a rerun resumes it)" % (url, exc)) from None
        if os.path.getsize(local) != entry["size"] or models.sha256_file(local) != entry["sha256"]:
            os.unlink(local)  # a rerun downloads it again rather than resuming wrong bytes
            bad.append(entry["path"])
    if bad:
        raise models.ModelError(
            "%s@%s: %s did not match the store's manifest (sha256 or size) and %s removed; the store's copy is "
            "damaged or changed: check it with its manifest (instinct-stack mirror verify for a mirror)"
            % (repo, revision, ", ".join(bad), "was" if len(bad) == 1 else "were")
        )
    models.publish(root, repo, revision, staging, data)
    pruned = models.prunable(root, repo, keep, set(protected) | {revision})
    models.remove(root, repo, pruned)
    return {"changed": True, "path": path, "size": data["size"], "downloaded": downloaded, "pruned": pruned}
