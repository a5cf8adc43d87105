"""module_utils/model_pull.py against a real HTTP server over a store in the models layout: the store's manifest,
each file's sha256, free space, resumed downloads (HTTP ranges), one rename, pruning."""

import functools
import http.server
import os
import re
import threading

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import model_pull, models

REPO = "acme/tiny-llama"


class Store(http.server.SimpleHTTPRequestHandler):
    """A directory over HTTP with single ranges (bytes=N-), as nginx answers them; cut_after cuts the next weights'
    body short."""

    def log_message(self, format, *args):  # noqa: A002
        self.server.requests.append((self.path, self.headers.get("Range")))

    def send_head(self):
        ranged = re.match(r"^bytes=(\d+)-$", self.headers.get("Range") or "")
        path = self.translate_path(self.path)
        if not ranged or not os.path.isfile(path):
            return super().send_head()
        handle = open(path, "rb")  # noqa: SIM115 - the base class's send_head returns the open file, as this does
        size = os.fstat(handle.fileno()).st_size
        start = int(ranged.group(1))
        handle.seek(start)
        self.send_response(206)
        self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        return handle

    def copyfile(self, source, outputfile):
        cut = self.server.cut_after
        if cut is None or not self.path.endswith(".safetensors"):
            return super().copyfile(source, outputfile)
        self.server.cut_after = None
        outputfile.write(source.read(cut))  # then the connection closes: the client reads fewer bytes than announced
        self.close_connection = True


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    staging = tmp_path / "staging"
    files = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": os.urandom(3 << 20)}
    for path, data in files.items():
        os.makedirs(staging, exist_ok=True)
        (staging / path).write_bytes(data)
    os.makedirs(root / "acme--tiny-llama")
    commit = "c" * 40
    models.publish(str(root), REPO, commit, str(staging), models.manifest(REPO, commit, str(staging)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Store, directory=str(root)))
    server.requests, server.cut_after, server.root, server.commit = [], None, root, commit
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield server
    server.shutdown()


def test_a_pull_verifies_every_file_and_publishes_the_revision_once(store, tmp_path):
    host = tmp_path / "host"
    result = model_pull.pull(store.url, str(host), REPO, store.commit)
    assert result["changed"] and result["downloaded"] == result["size"] == (3 << 20) + 39
    assert models.published(str(host), REPO, store.commit, full=True) is not None
    assert sorted(os.listdir(host / "acme--tiny-llama")) == [store.commit, store.commit + ".json"]
    store.requests.clear()
    again = model_pull.pull(store.url, str(host), REPO, store.commit)
    assert not again["changed"] and again["downloaded"] == 0 and store.requests == []


def test_a_cut_download_is_resumed_with_a_range(store, tmp_path):
    host = tmp_path / "host"
    store.cut_after = 1 << 20
    with pytest.raises(models.ModelError, match="a rerun resumes it"):
        model_pull.pull(store.url, str(host), REPO, store.commit)
    assert models.published(str(host), REPO, store.commit) is None
    result = model_pull.pull(store.url, str(host), REPO, store.commit)
    assert ("/acme--tiny-llama/%s/model.safetensors" % store.commit, "bytes=%d-" % (1 << 20)) in store.requests
    assert result["downloaded"] < result["size"]
    assert models.published(str(host), REPO, store.commit, full=True) is not None


def test_a_store_file_that_differs_from_its_manifest_is_refused_and_removed(store, tmp_path):
    damaged = store.root / "acme--tiny-llama" / store.commit / "model.safetensors"
    data = bytearray(damaged.read_bytes())
    data[100] ^= 0xFF
    damaged.write_bytes(bytes(data))
    host = tmp_path / "host"
    with pytest.raises(models.ModelError, match="model.safetensors did not match the store's manifest"):
        model_pull.pull(store.url, str(host), REPO, store.commit)
    staging = models.partial_dir(str(host), REPO, store.commit)
    assert not os.path.exists(os.path.join(staging, "model.safetensors"))
    assert not os.path.exists(models.revision_dir(str(host), REPO, store.commit))


def test_a_revision_the_store_lacks_is_named(store, tmp_path):
    with pytest.raises(models.ModelError, match="is not in the store at .*: fetch it there first"):
        model_pull.pull(store.url, str(tmp_path), REPO, "d" * 40)


def test_a_host_short_of_space_is_refused_before_it_downloads(store, tmp_path, monkeypatch):
    monkeypatch.setattr(models, "free_bytes", lambda path: 1 << 20)
    with pytest.raises(
        models.ModelError, match=r"\(3\.0 MiB\) on h7 needs 3\.0 MiB more in .*, which has 1\.0 MiB free"
    ):
        model_pull.pull(store.url, str(tmp_path), REPO, store.commit, what="h7")
    assert [path for path, _range in store.requests] == ["/acme--tiny-llama/%s.json" % store.commit]


def test_check_mode_downloads_nothing(store, tmp_path):
    result = model_pull.pull(store.url, str(tmp_path / "host"), REPO, store.commit, check_mode=True)
    assert result["changed"] and not (tmp_path / "host").exists()


def publish_revision(root, commit, data):
    staging = root / ("staging-" + commit)
    staging.mkdir(parents=True)
    (root / "acme--tiny-llama").mkdir(exist_ok=True)
    (staging / "config.json").write_bytes(data)
    models.publish(str(root), REPO, commit, str(staging), models.manifest(REPO, commit, str(staging)))
    return root / "acme--tiny-llama" / commit


def test_a_revision_a_served_link_names_is_never_pruned(store, tmp_path):
    host = tmp_path / "host"
    served = host / "served"
    served.mkdir(parents=True)
    old = publish_revision(host, "a" * 40, b"{}")
    newer = publish_revision(host, "b" * 40, b"{}")
    os.symlink(str(old), str(served / "llama"))  # what the instance serves now
    os.symlink(str(newer), str(served / "llama.previous"))
    result = model_pull.pull(store.url, str(host), REPO, store.commit, keep=0, served=str(served))
    assert result["pruned"] == [] and old.is_dir() and newer.is_dir()
    os.unlink(str(served / "llama.previous"))
    again = model_pull.pull(store.url, str(host), REPO, store.commit, keep=0, served=str(served))
    assert again["pruned"] == ["b" * 40] and not newer.exists() and old.is_dir()
