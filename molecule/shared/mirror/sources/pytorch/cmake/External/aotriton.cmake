# Fixture of pytorch/pytorch cmake/External/aotriton.cmake at v2.9.0 (AOTriton 0.11b, pytorch#161754): the
# release, the ROCm releases with a prebuilt runtime, the per-arch kernel image packs and the SHA-256 of each tarball
# (upstream downloads each with URL_HASH SHA256=<its entry>), in the same set() form and order the roles read
# (plugins/module_utils/build_downloads.py). The fixture's setup.py does what this file does.
# The hashes are those of the fixture tarballs tests/harness/build_mirror.py writes (byte for byte the same
# on every machine); tests/unit/harness/test_fixture_contracts.py holds the two together and prints the new lists
# when a fixture tarball changes.
set(__AOTRITON_VER "0.11b")
set(__AOTRITON_MANYLINUX_LIST
    "manylinux_2_28"  # rocm6.2
    "manylinux_2_28"  # rocm6.3
    "manylinux_2_28"  # rocm6.4
    "manylinux_2_28"  # rocm7.0
    )
set(__AOTRITON_ROCM_LIST
    "rocm6.2"
    "rocm6.3"
    "rocm6.4"
    "rocm7.0"
    )
set(__AOTRITON_SHA256_LIST
    "968c18eae2bf0cffccfaac92c76912084b253d68a222a2dbe7890cdd664f3141"  # rocm6.2
    "7959721486e1201b7e669c4afe79a71689c5097d1dae5a35f57c620e0294ef03"  # rocm6.3
    "92cf96709fbeda7788083d4671d731a38ad128659ae17f5f28bb436afac2ad24"  # rocm6.4
    "ac7b890fb58c87b0bd236de6338c8e65b45d4e4ba7fdf43403b203736205e914"  # rocm7.0
    )
set(__AOTRITON_IMAGE_LIST
    "amd-gfx90a"
    "amd-gfx942"
    "amd-gfx950"
    "amd-gfx11xx"
    "amd-gfx120x"
    )
set(__AOTRITON_IMAGE_SHA256_LIST
    "3d33c8ec671874a093065504247c1058b39760d186be9acc3bc07d0d95369a54"  # amd-gfx90a
    "f4772cecf07ee4a0ff5a39b958e036cef322a3ca4abfaa84ff767129e3f66b81"  # amd-gfx942
    "fef4623422cf3bd24cfb5358e10c09116b0a91a7ce4200fa87a5bad1c8d4bfb4"  # amd-gfx950
    "d72fe6ce803422b9cfdfee3c2ba12396807ef3382972cc2eb5de0046fde974d9"  # amd-gfx11xx
    "f884589d0b35854854a3cead00acd822da0787c6fb1b00d885a14e3a83439fe3"  # amd-gfx120x
    )
set(__AOTRITON_BASE_URL "https://github.com/ROCm/aotriton/releases/download/")  # @lint-ignore
set(__AOTRITON_Z "gz")
