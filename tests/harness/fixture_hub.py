"""A fixture Hugging Face Hub: a real HTTP server that answers the requests huggingface_hub makes, for repositories
kept in a directory, so the real client runs against it where no Hub is reachable.

What it answers, as the Hub does (huggingface_hub 0.36 and 2.x; docs/docsite/rst/fixture_contracts.rst):

- GET /api/models/ORG/NAME/revision/REV[?blobs=true]: {id, modelId, sha, siblings[{rfilename}]}, with blobs each
  sibling's size, blobId (the git blob sha1) and, for an LFS file, lfs {sha256, size, pointerSize};
- GET /api/models/ORG/NAME/tree/REV[/PATH]?recursive=: [{type, path, size, oid, lfs {oid, size, pointerSize}}];
- HEAD and GET /ORG/NAME/resolve/REV/PATH: X-Repo-Commit, ETag (the sha256 of an LFS file, else its git blob
  sha1), X-Linked-Etag and X-Linked-Size for LFS files, Content-Length, and ranges (206, Content-Range);
- errors with the Hub's X-Error-Code: RepoNotFound (401), RevisionNotFound (404), EntryNotFound (404), GatedRepo
  (403) for a gated repository without a token it accepts.

Repositories live under ROOT/ORG/NAME/: commits/COMMIT/ (the files of each commit), refs.json (branch -> commit),
access.json ({"gated": true, "tokens": [...]}, optional). add_commit() writes them; the commit id is the sha1 of
the files' paths and contents, so other contents are another commit. Files named *.safetensors, *.bin or larger
than 10 MiB are LFS files, as the Hub's default .gitattributes has it. No Xet headers are ever sent.

Run as a service: python -m tests.harness.fixture_hub serve ROOT --bind ADDRESS --port PORT.
"""

import argparse
import hashlib
import http.server
import json
import os
import re
import shutil
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".bin", ".pth", ".gguf")
LFS_SIZE = 10 << 20
REVISION = re.compile(r"^/api/models/([^/]+/[^/]+)/revision/(.+)$")
TREE = re.compile(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$")
RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def is_lfs(path, size):
    return path.endswith(LFS_SUFFIXES) or size > LFS_SIZE


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id


def lfs_pointer(sha256, size):
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha256.encode(), size)


def add_commit(root, repo, files, branch="main"):
    """Write a commit of repo holding files ({path: bytes}) and point branch at it; the commit id."""
    digest = hashlib.sha1(repo.encode())  # noqa: S324 - a commit id, not a security boundary
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    commit = digest.hexdigest()
    base = os.path.join(root, repo, "commits", commit)
    for path, data in files.items():
        target = os.path.join(base, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
    refs_path = os.path.join(root, repo, "refs.json")
    refs = read_json(refs_path) if os.path.exists(refs_path) else {}
    refs[branch] = commit
    with open(refs_path, "w") as handle:
        json.dump(refs, handle)
    return commit


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def set_access(root, repo, gated, tokens=()):
    with open(os.path.join(root, repo, "access.json"), "w") as handle:
        json.dump({"gated": gated, "tokens": list(tokens)}, handle)


def corrupt(root, repo, commit, path):
    """Flip one byte of a stored file: the Hub's metadata stays, so the served bytes no longer match it."""
    target = os.path.join(root, repo, "commits", commit, *path.split("/"))
    with open(target, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 0xFF]))


class Repository:
    def __init__(self, root, repo):
        self.root = root
        self.repo = repo
        self.base = os.path.join(root, repo)

    def exists(self):
        return os.path.isfile(os.path.join(self.base, "refs.json"))

    def access(self):
        path = os.path.join(self.base, "access.json")
        return read_json(path) if os.path.exists(path) else {"gated": False, "tokens": []}

    def commit(self, revision):
        if re.match(r"^[0-9a-f]{40}$", revision) and os.path.isdir(os.path.join(self.base, "commits", revision)):
            return revision
        return read_json(os.path.join(self.base, "refs.json")).get(revision)

    def files(self, commit):
        """{path: metadata} of a commit's files, as the Hub describes them (the stored metadata, not the bytes)."""
        base = os.path.join(self.base, "commits", commit)
        meta_path = os.path.join(self.base, "meta-%s.json" % commit)
        if os.path.exists(meta_path):
            return read_json(meta_path)
        found = {}
        for directory, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for filename in sorted(filenames):
                full = os.path.join(directory, filename)
                path = os.path.relpath(full, base).replace(os.sep, "/")
                with open(full, "rb") as handle:
                    data = handle.read()
                entry = {"path": path, "size": len(data), "blob": git_blob_sha1(data)}
                if is_lfs(path, len(data)):
                    sha256 = hashlib.sha256(data).hexdigest()
                    pointer = lfs_pointer(sha256, len(data))
                    entry.update(blob=git_blob_sha1(pointer), lfs={"sha256": sha256, "pointerSize": len(pointer)})
                found[path] = entry
        # Recorded once: a file corrupted afterwards keeps the metadata the Hub published for it.
        with open(meta_path, "w") as handle:
            json.dump(found, handle)
        return found


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FixtureHub/1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        self.server.requests.append((self.command, self.path, self.headers.get("authorization") is not None))

    def do_HEAD(self):  # noqa: N802 - the base class's naming
        self.answer(head=True)

    def do_GET(self):  # noqa: N802
        self.answer(head=False)

    def send(self, status, headers, body=b"", head=False):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def error(self, status, code, message, head):
        body = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}
        self.send(status, headers, body, head)

    def json(self, data, head):
        self.send(200, {"Content-Type": "application/json"}, json.dumps(data).encode(), head)

    def repository(self, repo, head):
        repository = Repository(self.server.root, repo)
        if not repository.exists():
            self.error(401, "RepoNotFound", "Repository not found", head)
            return None
        access = repository.access()
        token = (self.headers.get("authorization") or "").replace("Bearer ", "", 1)
        if access.get("gated") and token not in access.get("tokens", []):
            self.error(403, "GatedRepo", "Access to model %s is restricted." % repo, head)
            return None
        return repository

    def lookup(self, repo, revision, head):
        """(repository, commit) for a request, or None once the Hub's error is sent."""
        repository = self.repository(repo, head)
        if repository is None:
            return None
        commit = repository.commit(revision)
        if commit is None:
            self.error(404, "RevisionNotFound", "Invalid rev id: %s" % revision, head)
            return None
        return repository, commit

    def answer(self, head):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(url.query).items()}
        for pattern, method in ((REVISION, self.revision), (TREE, self.tree), (RESOLVE, self.resolve)):
            match = pattern.match(path)
            if match:
                return method(head, query, *match.groups())
        return self.error(404, "EntryNotFound", "Not found", head)

    def revision(self, head, query, repo, revision):
        found = self.lookup(repo, revision, head)
        if found is None:
            return None
        repository, commit = found
        siblings = []
        for entry in repository.files(commit).values():
            sibling = {"rfilename": entry["path"]}
            if query.get("blobs", "").lower() == "true":
                sibling.update(size=entry["size"], blobId=entry["blob"])
                if "lfs" in entry:
                    sibling["lfs"] = {
                        "sha256": entry["lfs"]["sha256"],
                        "size": entry["size"],
                        "pointerSize": entry["lfs"]["pointerSize"],
                    }
            siblings.append(sibling)
        access = repository.access()
        return self.json(
            {
                "_id": commit[:24],
                "id": repo,
                "modelId": repo,
                "sha": commit,
                "private": False,
                "gated": "manual" if access.get("gated") else False,
                "disabled": False,
                "tags": [],
                "siblings": siblings,
            },
            head,
        )

    def tree(self, head, query, repo, revision, prefix):
        found = self.lookup(repo, revision, head)
        if found is None:
            return None
        repository, commit = found
        entries = []
        recursive = query.get("recursive", "").lower() == "true"
        for entry in repository.files(commit).values():
            relative = entry["path"] if not prefix else entry["path"][len(prefix) + 1 :]
            if prefix and not entry["path"].startswith(prefix + "/"):
                continue
            if "/" in relative and not recursive:
                continue
            item = {"type": "file", "path": entry["path"], "size": entry["size"], "oid": entry["blob"]}
            if "lfs" in entry:
                item["lfs"] = {
                    "oid": entry["lfs"]["sha256"],
                    "size": entry["size"],
                    "pointerSize": entry["lfs"]["pointerSize"],
                }
            entries.append(item)
        return self.json(entries, head)

    def resolve(self, head, query, repo, revision, path):
        found = self.lookup(repo, revision, head)
        if found is None:
            return None
        repository, commit = found
        entry = repository.files(commit).get(path)
        if entry is None:
            return self.error(404, "EntryNotFound", "%s does not exist on %s" % (path, revision), head)
        full = os.path.join(repository.base, "commits", commit, *path.split("/"))
        size = os.path.getsize(full)
        etag = entry["lfs"]["sha256"] if "lfs" in entry else entry["blob"]
        headers = {"X-Repo-Commit": commit, "ETag": '"%s"' % etag, "Accept-Ranges": "bytes"}
        if "lfs" in entry:
            headers.update({"X-Linked-Etag": '"%s"' % etag, "X-Linked-Size": entry["size"]})
        start, status = 0, 200
        ranged = re.match(r"^bytes=(\d+)-$", self.headers.get("Range") or "")
        if ranged and int(ranged.group(1)) < size:
            start, status = int(ranged.group(1)), 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, size - 1, size)
        headers["Content-Length"] = size - start
        headers["Content-Type"] = "application/octet-stream"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        if not head:
            with open(full, "rb") as handle:
                handle.seek(start)
                shutil.copyfileobj(handle, self.wfile, 1 << 20)
        return None


class FixtureHub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root, address=("127.0.0.1", 0)):
        super().__init__(address, Handler)
        self.root = root
        self.requests = []

    @property
    def url(self):
        return "http://%s:%d" % self.server_address[:2]

    def start(self):
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return self


# The scenarios' and scripts/run.sh's model: a small Llama-shaped repository. main is a model vLLM serves; the branch
# no-architectures holds a config.json without architectures, a revision vLLM refuses at start ("No model
# architectures are specified"), for the rollback of a model change.
FIXTURE_REPO = "instinct-fixtures/tiny-llama"


def make_fixture_repositories(root):
    """Write FIXTURE_REPO's commits under root (the same commit ids every time: they hash the contents);
    {branch: commit}."""
    from tests.harness import fixture_model  # numpy and safetensors: only where a repository is written

    files = fixture_model.files()
    commits = {"main": add_commit(root, FIXTURE_REPO, files)}
    settings = json.loads(files["config.json"])
    del settings["architectures"]
    broken = dict(files, **{"config.json": json.dumps(settings, indent=2).encode()})
    commits["no-architectures"] = add_commit(root, FIXTURE_REPO, broken, branch="no-architectures")
    return commits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write the fixture repository under ROOT and print its branches' commits")
    make.add_argument("root")
    serve = commands.add_parser("serve", help="answer the Hub's requests for the repositories under ROOT")
    serve.add_argument("root")
    serve.add_argument("--bind", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8090)
    args = parser.parse_args(argv)
    if args.command == "make":
        print(json.dumps({"repo": FIXTURE_REPO, "commits": make_fixture_repositories(args.root)}))
        return
    FixtureHub(args.root, (args.bind, args.port)).serve_forever()


if __name__ == "__main__":
    main()
