"""mirror build's build-time downloads: named from the mirrored sources at their pinned commits, fetched through
download_rewrites into files/HOST/PATH, checked against the SHA-256 the sources list, and named by mirror verify when
missing or unlike that SHA-256."""

import hashlib
import json
import subprocess

import pytest

from instinct_stack import mirror

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
LLVM_HASH = "7d5de3033187c8a3bb4d2e322f5462cdaf49808f"
LLVM_URL = "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-ubuntu-x64.tar.gz"
RELEASE = "https://github.com/ROCm/aotriton/releases/download/0.11b/"
AOTRITON_URLS = [
    RELEASE + "aotriton-0.11b-manylinux_2_28_x86_64-rocm7.0-shared.tar.gz",
    RELEASE + "aotriton-0.11b-images-amd-gfx942.tar.gz",
]


def served(url):
    """What the upstream file tree serves for url."""
    return b"tarball " + url.encode()


def digest(data):
    return hashlib.sha256(data).hexdigest()


# Upstream's layout (pytorch/pytorch cmake/External/aotriton.cmake, AOTriton 0.11b), with the hashes of what is served.
AOTRITON_CMAKE = """set(__AOTRITON_VER "0.11b")
set(__AOTRITON_ROCM_LIST
    "rocm7.0"
    )
set(__AOTRITON_SHA256_LIST
    "%s"  # rocm7.0
    )
set(__AOTRITON_IMAGE_LIST
    "amd-gfx942"
    )
set(__AOTRITON_IMAGE_SHA256_LIST
    "%s"  # amd-gfx942
    )
""" % tuple(digest(served(url)) for url in AOTRITON_URLS)


def repo(path, files):
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(GIT + ["-C", str(path), "add", "-A"], check=True)
    subprocess.run(GIT + ["-C", str(path), "commit", "-qm", "init"], check=True)


@pytest.fixture
def mirrored(tmp_path):
    """A Triton and a PyTorch source, mirrored as mirror build mirrors them, and an upstream file tree."""
    repo(tmp_path / "src" / "triton", {"cmake/llvm-hash.txt": LLVM_HASH + "\n"})
    repo(tmp_path / "src" / "pytorch", {"cmake/External/aotriton.cmake": AOTRITON_CMAKE})
    config = {
        "rocm_version": "7.0.2",
        "gpu_archs": ["gfx942", "gfx908"],
        "triton_llvm_system_suffix": "ubuntu-x64",
        "aotriton": True,
        "git": {
            name: {"url": "file://%s" % (tmp_path / "src" / name), "ref": "main"} for name in ("triton", "pytorch")
        },
        "git_rewrites": {},
        "download_rewrites": {"https://": "file://%s/upstream/" % tmp_path},
    }
    dest = tmp_path / "mirror"
    refs = mirror.git_repositories(config, dest, tmp_path)
    for url in [LLVM_URL, *AOTRITON_URLS]:
        served_path = tmp_path / "upstream" / url[len("https://") :]
        served_path.parent.mkdir(parents=True, exist_ok=True)
        served_path.write_bytes(served(url))
    return config, dest, refs


def test_downloads_are_named_from_the_sources_at_their_commits(mirrored):
    config, dest, refs = mirrored
    needed = mirror.needed_downloads(config, dest, refs)
    assert sorted(needed) == sorted([LLVM_URL, *AOTRITON_URLS])
    assert needed[LLVM_URL]["why"].startswith("triton ") and needed[LLVM_URL]["why"].endswith(": cmake/llvm-hash.txt")
    # Upstream names no hash for Triton's LLVM; AOTriton's come from the pinned aotriton.cmake.
    assert needed[LLVM_URL]["sha256"] == ""
    assert {url: needed[url]["sha256"] for url in AOTRITON_URLS} == {url: digest(served(url)) for url in AOTRITON_URLS}
    config["aotriton"] = False
    assert list(mirror.needed_downloads(config, dest, refs)) == [LLVM_URL]


def test_downloads_are_fetched_through_rewrites_and_stored_under_upstream(mirrored):
    config, dest, refs = mirrored
    stored = mirror.fetch_downloads(config, dest, mirror.needed_downloads(config, dest, refs))
    assert (
        stored[LLVM_URL] == "files/oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-ubuntu-x64.tar.gz"
    )
    assert (dest / stored[LLVM_URL]).read_bytes() == b"tarball " + LLVM_URL.encode()
    assert not list(dest.rglob("*.partial"))


def test_a_download_unlike_its_upstream_sha256_is_refused_and_not_stored(mirrored, tmp_path):
    config, dest, refs = mirrored
    image = AOTRITON_URLS[1]
    (tmp_path / "upstream" / image[len("https://") :]).write_bytes(b"tampered")
    with pytest.raises(mirror.MirrorError) as error:
        mirror.fetch_downloads(config, dest, mirror.needed_downloads(config, dest, refs))
    message = str(error.value)
    assert message.startswith(image + " (fetched from file://")
    assert "has SHA-256 %s, not the %s that pytorch " % (digest(b"tampered"), digest(served(image))) in message
    assert message.endswith(
        ": cmake/External/aotriton.cmake names for it: a corrupted or tampered file; nothing was stored"
    )
    assert not list(dest.rglob("*images-amd-gfx942*"))  # neither stored nor left half-written


def test_a_download_without_an_upstream_hash_is_stored_with_a_warning(mirrored, capsys):
    config, dest, refs = mirrored
    mirror.fetch_downloads(config, dest, mirror.needed_downloads(config, dest, refs))
    warnings = capsys.readouterr().err.splitlines()
    # Only the LLVM: Triton's setup.py checks no hash and its release publishes none (triton-lang/triton#1103).
    assert warnings == [
        "warning: no upstream SHA-256 for %s (needed by triton %s: cmake/llvm-hash.txt): stored unchecked"
        % (LLVM_URL, refs["triton"]["commit"][:12])
    ]


def test_an_unreachable_download_names_what_needs_it(mirrored):
    config, dest, refs = mirrored
    config["download_rewrites"] = {"https://": "file:///nonexistent/"}
    with pytest.raises(
        mirror.MirrorError, match=r"cannot fetch https://\S+ \(needed by (pytorch|triton) [0-9a-f]{12}: "
    ):
        mirror.fetch_downloads(config, dest, mirror.needed_downloads(config, dest, refs))
    assert not list(dest.rglob("*.tar.gz*"))  # nothing half-written


def test_a_rocm_without_an_aotriton_runtime_stops_the_build_saying_what_to_set(mirrored):
    config, dest, refs = mirrored
    config["rocm_version"] = "7.1.0"
    with pytest.raises(mirror.MirrorError, match="no prebuilt runtime for rocm7.1.*aotriton: false"):
        mirror.needed_downloads(config, dest, refs)


def test_verify_names_a_missing_build_time_download(mirrored):
    config, dest, refs = mirrored
    mirror.fetch_downloads(config, dest, mirror.needed_downloads(config, dest, refs))
    manifest = mirror.write_manifest(
        dest, {"rocm_version": "7.0.2", "git": refs, "gpu_archs": ["gfx942"], "aotriton": True}
    )
    assert mirror.verify(dest) == []
    # A mirror from before the downloads were mirrored: its manifest never listed them, verify still asks for them.
    llvm = dest / "files/oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-ubuntu-x64.tar.gz"
    llvm.unlink()
    manifest["files"].pop(str(llvm.relative_to(dest)))
    (dest / mirror.MANIFEST).write_text(json.dumps(manifest))
    problems = mirror.verify(dest)
    assert problems == [
        "missing build-time download: %s (needed by triton %s: cmake/llvm-hash.txt)"
        % (LLVM_URL, refs["triton"]["commit"][:12])
    ]


def test_verify_names_a_build_time_download_unlike_its_upstream_sha256(mirrored):
    config, dest, refs = mirrored
    mirror.fetch_downloads(config, dest, mirror.needed_downloads(config, dest, refs))
    image = dest / "files/github.com/ROCm/aotriton/releases/download/0.11b/aotriton-0.11b-images-amd-gfx942.tar.gz"
    image.write_bytes(b"tampered")
    # Written after the change: the manifest vouches for the tampered file; the upstream hash does not.
    mirror.write_manifest(dest, {"rocm_version": "7.0.2", "git": refs, "gpu_archs": ["gfx942"], "aotriton": True})
    assert mirror.verify(dest) == [
        "build-time download does not match its SHA-256: %s (%s) has %s, pytorch %s: cmake/External/aotriton.cmake "
        "names %s"
        % (
            AOTRITON_URLS[1],
            image.relative_to(dest),
            digest(b"tampered"),
            refs["pytorch"]["commit"][:12],
            digest(served(AOTRITON_URLS[1])),
        )
    ]
