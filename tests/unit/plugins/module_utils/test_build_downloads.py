import pytest

from ansible_collections.instinct.stack.plugins.module_utils.build_downloads import (
    BuildDownloadError,
    aotriton,
    triton_llvm,
)

# The shape of pytorch/pytorch cmake/External/aotriton.cmake around v2.9.0 (AOTriton 0.11b): set() lists of quoted
# values. Written for this test, not copied.
CMAKE = """
  set(__AOTRITON_VER "0.11b")
  set(__AOTRITON_MANYLINUX_LIST "manylinux_2_28" "manylinux_2_28"
                                "manylinux_2_28")
  set(__AOTRITON_ROCM_LIST "rocm6.4" "rocm7.0"
                           "rocm6.3")
  set(__AOTRITON_BASE_URL "https://github.com/ROCm/aotriton/releases/download/")
  set(__AOTRITON_IMAGE_LIST "amd-gfx90a" "amd-gfx942" "amd-gfx950" "amd-gfx11xx" "amd-gfx120x")
"""
RELEASE = "https://github.com/ROCm/aotriton/releases/download/0.11b/"


def test_triton_llvm_names_the_tarball_from_the_first_eight_hex_digits():
    llvm = triton_llvm("7d5de3033187c8a3bb4d2e322f5462cdaf49808f\n")
    assert llvm == {
        "name": "llvm-7d5de303-ubuntu-x64",
        "url": "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-ubuntu-x64.tar.gz",
    }
    assert (
        triton_llvm("7d5de303", "almalinux-x64", "http://m/llvm/")["url"]
        == "http://m/llvm/llvm-7d5de303-almalinux-x64.tar.gz"
    )


@pytest.mark.parametrize("text", ["", "main", "<html>not found</html>", "7d5de30"])
def test_triton_llvm_refuses_what_is_not_a_commit(text):
    with pytest.raises(BuildDownloadError, match="llvm-hash.txt"):
        triton_llvm(text)


def test_aotriton_runtime_for_the_rocm_release_and_images_for_the_archs():
    plan = aotriton(CMAKE, "7.0.2", "gfx942")
    assert plan["version"] == "0.11b" and plan["name"] == "aotriton-0.11b-rocm7.0"
    assert plan["urls"] == [
        RELEASE + "aotriton-0.11b-manylinux_2_28_x86_64-rocm7.0-shared.tar.gz",
        RELEASE + "aotriton-0.11b-images-amd-gfx942.tar.gz",
    ]


def test_aotriton_images_follow_upstreams_patterns():
    # "11xx" matches any gfx11 arch, "90a" only gfx90a; a list works like the PYTORCH_ROCM_ARCH string.
    urls = aotriton(CMAKE, "6.4.1", ["gfx90a", "gfx1100", "gfx942"])["urls"]
    assert [url.rsplit("-", 1)[1] for url in urls[1:]] == ["gfx90a.tar.gz", "gfx942.tar.gz", "gfx11xx.tar.gz"]
    assert "rocm6.4-shared" in urls[0]


def test_aotriton_refuses_a_rocm_without_a_prebuilt_runtime():
    # Upstream would clone github.com/ROCm/aotriton and build it: nothing a mirror can serve.
    with pytest.raises(BuildDownloadError, match=r"no prebuilt runtime for rocm7\.1 .*pytorch_aotriton"):
        aotriton(CMAKE, "7.1.0", "gfx942")


def test_aotriton_refuses_archs_without_images_and_an_unreadable_file():
    with pytest.raises(BuildDownloadError, match="no kernel images for gfx908"):
        aotriton(CMAKE, "7.0.2", "gfx908")
    with pytest.raises(BuildDownloadError, match="cannot read AOTriton"):
        aotriton("# moved elsewhere", "7.0.2", "gfx942")
    with pytest.raises(BuildDownloadError, match="ROCm major.minor"):
        aotriton(CMAKE, "", "gfx942")
