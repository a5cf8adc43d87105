"""The SHA-256 that PyTorch's cmake/External/aotriton.cmake lists for each AOTriton tarball, per URL."""

import re

import pytest

from ansible_collections.instinct.stack.plugins.module_utils.build_downloads import BuildDownloadError, aotriton

RUNTIME_70 = "a" * 64
RUNTIME_64 = "b" * 64
GFX942 = "c" * 64
GFX950 = "D" * 64  # upper-case hex is still a SHA-256; compared in lower case
# The shape of pytorch/pytorch cmake/External/aotriton.cmake at AOTriton 0.11b: one hash per ROCm release and one per
# image, in the order of their lists, each followed by a comment naming its entry. Written for this test, not copied.
CMAKE = """
  set(__AOTRITON_VER "0.11b")
  set(__AOTRITON_MANYLINUX_LIST
      "manylinux_2_28"  # rocm6.4
      "manylinux_2_28"  # rocm7.0
      )
  set(__AOTRITON_ROCM_LIST
      "rocm6.4"
      "rocm7.0"
      )
  set(__AOTRITON_CI_COMMIT "972223c501ffc22068bb035ac5d64cf54318d895")
  set(__AOTRITON_SHA256_LIST
      "%s"  # rocm6.4
      "%s"  # rocm7.0
      )
  set(__AOTRITON_IMAGE_LIST
      "amd-gfx90a"
      "amd-gfx942"
      "amd-gfx950"
     )
  set(__AOTRITON_IMAGE_SHA256_LIST
     "%s" # amd-gfx90a
     "%s" # amd-gfx942
     "%s" # amd-gfx950
     )
  set(__AOTRITON_BASE_URL "https://github.com/ROCm/aotriton/releases/download/")  # @lint-ignore
  set(__AOTRITON_Z "gz")
"""
RELEASE = "https://github.com/ROCm/aotriton/releases/download/0.11b/"
RUNTIME = RELEASE + "aotriton-0.11b-manylinux_2_28_x86_64-rocm7.0-shared.tar.gz"


def cmake(runtime_64=RUNTIME_64, runtime_70=RUNTIME_70, gfx90a="e" * 64, gfx942=GFX942, gfx950=GFX950):
    return CMAKE % (runtime_64, runtime_70, gfx90a, gfx942, gfx950)


def test_each_url_gets_the_hash_listed_at_its_entry():
    plan = aotriton(cmake(), "7.0.2", "gfx942;gfx950")
    assert plan["urls"] == [
        RUNTIME,
        RELEASE + "aotriton-0.11b-images-amd-gfx942.tar.gz",
        RELEASE + "aotriton-0.11b-images-amd-gfx950.tar.gz",
    ]
    assert plan["sha256"] == {
        RUNTIME: RUNTIME_70,
        RELEASE + "aotriton-0.11b-images-amd-gfx942.tar.gz": GFX942,
        RELEASE + "aotriton-0.11b-images-amd-gfx950.tar.gz": GFX950.lower(),
    }
    assert plan["unchecked"] == []
    # The runtime hash follows the ROCm release, not the first entry.
    rocm64 = RELEASE + "aotriton-0.11b-manylinux_2_28_x86_64-rocm6.4-shared.tar.gz"
    assert aotriton(cmake(), "6.4.1", "gfx942")["sha256"][rocm64] == RUNTIME_64


def test_an_empty_entry_means_no_upstream_hash_and_is_listed_unchecked():
    plan = aotriton(cmake(gfx942=""), "7.0.2", "gfx942")
    image = RELEASE + "aotriton-0.11b-images-amd-gfx942.tar.gz"
    assert plan["sha256"] == {RUNTIME: RUNTIME_70, image: ""}
    assert plan["unchecked"] == [image]


def test_a_file_without_hash_lists_checks_nothing():
    text = re.sub(r"set\(__AOTRITON_(IMAGE_)?SHA256_LIST[^)]*\)", "", cmake())
    assert "SHA256" not in text and RUNTIME_70 not in text
    plan = aotriton(text, "7.0.2", "gfx942")
    assert set(plan["sha256"].values()) == {""} and plan["unchecked"] == plan["urls"]


def test_a_hash_list_that_does_not_pair_with_its_entries_is_refused():
    short = cmake().replace('     "%s" # amd-gfx950\n' % GFX950, "")
    with pytest.raises(BuildDownloadError, match=r"2 hashes in __AOTRITON_IMAGE_SHA256_LIST for the 3 entries"):
        aotriton(short, "7.0.2", "gfx942")


@pytest.mark.parametrize("value", ["abc123", "g" * 64, "a" * 63])
def test_an_entry_that_is_not_a_sha256_is_refused(value):
    with pytest.raises(BuildDownloadError, match=r"__AOTRITON_SHA256_LIST holds .* for rocm7.0, not a SHA-256"):
        aotriton(cmake(runtime_70=value), "7.0.2", "gfx942")


def test_the_compression_comes_from_the_file():
    plan = aotriton(cmake().replace('"gz"', '"bz2"'), "7.0.2", "gfx942")
    assert plan["urls"][0].endswith("-rocm7.0-shared.tar.bz2") and plan["urls"][1].endswith("gfx942.tar.bz2")


def test_a_hash_sign_inside_quotes_is_not_a_comment():
    text = cmake().replace(
        'set(__AOTRITON_BASE_URL "https://github.com/ROCm/aotriton/releases/download/")',
        'set(__AOTRITON_BASE_URL "https://mirror.example/a#b/")',
    )
    assert aotriton(text, "7.0.2", "gfx942")["urls"][0].startswith("https://mirror.example/a#b/0.11b/")
