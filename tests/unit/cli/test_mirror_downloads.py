"""mirror build's build-time downloads: named from the mirrored sources at their pinned commits, fetched through
download_rewrites into files/HOST/PATH, and named by mirror verify when missing."""

import json
import subprocess

import pytest

from instinct_stack import mirror

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
LLVM_HASH = "7d5de3033187c8a3bb4d2e322f5462cdaf49808f"
AOTRITON_CMAKE = (
    'set(__AOTRITON_VER "0.11b")\nset(__AOTRITON_ROCM_LIST "rocm7.0")\nset(__AOTRITON_IMAGE_LIST "amd-gfx942")\n'
)
LLVM_URL = "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-ubuntu-x64.tar.gz"
RELEASE = "https://github.com/ROCm/aotriton/releases/download/0.11b/"
AOTRITON_URLS = [
    RELEASE + "aotriton-0.11b-manylinux_2_28_x86_64-rocm7.0-shared.tar.gz",
    RELEASE + "aotriton-0.11b-images-amd-gfx942.tar.gz",
]


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
        served = tmp_path / "upstream" / url[len("https://") :]
        served.parent.mkdir(parents=True, exist_ok=True)
        served.write_bytes(b"tarball " + url.encode())
    return config, dest, refs


def test_downloads_are_named_from_the_sources_at_their_commits(mirrored):
    config, dest, refs = mirrored
    needed = mirror.needed_downloads(config, dest, refs)
    assert sorted(needed) == sorted([LLVM_URL, *AOTRITON_URLS])
    assert needed[LLVM_URL].startswith("triton ") and needed[LLVM_URL].endswith(": cmake/llvm-hash.txt")
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
