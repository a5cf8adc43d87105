# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the real source builds download at build time, read from the checkout at its pinned commit.

Left alone, Triton's setup.py downloads a prebuilt LLVM (and NVIDIA's tools) and PyTorch's ROCm build downloads
AOTriton. Air-gapped, those downloads must come from the mirror: `instinct-stack mirror build` fetches the files named
here and `mirror verify` names any that are missing, and the roles fetch them onto the build host and point the build
at them with upstream's own switches (TRITON_OFFLINE_BUILD and LLVM_SYSPATH; AOTRITON_INSTALLED_PREFIX).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# triton-lang/triton setup.py (get_llvm_package_info): llvm-{first 8 of cmake/llvm-hash.txt}-{system suffix}.tar.gz
# under this URL; the suffix is "ubuntu-x64" on x86_64 with glibc newer than 2.28 (Debian 12, Ubuntu 20.04 on).
TRITON_LLVM_BASE_URL = "https://oaitriton.blob.core.windows.net/public/llvm-builds"
TRITON_LLVM_SYSTEM_SUFFIX = "ubuntu-x64"
TRITON_LLVM_HASH_FILE = "cmake/llvm-hash.txt"
# pytorch/pytorch cmake/External/aotriton.cmake: the runtime and per-arch image tarballs of one AOTriton release.
AOTRITON_CMAKE_FILE = "cmake/External/aotriton.cmake"
AOTRITON_DEFAULT_BASE_URL = "https://github.com/ROCm/aotriton/releases/download/"
AOTRITON_DEFAULT_MANYLINUX = "manylinux_2_28"


class BuildDownloadError(ValueError):
    pass


def triton_llvm(llvm_hash_text, system_suffix=TRITON_LLVM_SYSTEM_SUFFIX, base_url=TRITON_LLVM_BASE_URL):
    """The prebuilt LLVM Triton's setup.py would download for the content of its cmake/llvm-hash.txt.

    Returns name (also the tarball's top directory, the LLVM_SYSPATH once extracted) and url.
    """
    revision = (llvm_hash_text or "").strip()
    if not re.match(r"^[0-9a-f]{8,40}$", revision):
        raise BuildDownloadError(
            "%s holds %r, not an LLVM commit: is this a Triton checkout?" % (TRITON_LLVM_HASH_FILE, revision[:60])
        )
    name = "llvm-%s-%s" % (revision[:8], system_suffix)
    return {"name": name, "url": "%s/%s.tar.gz" % (base_url.rstrip("/"), name)}


def _cmake_list(cmake_text, variable):
    """The quoted values of set(VARIABLE "a" "b" ...) in a CMake file, or None without one."""
    match = re.search(r"set\(\s*%s\s+((?:\"[^\"]*\"\s*)+)\)" % re.escape(variable), cmake_text)
    if not match:
        return None
    return re.findall(r"\"([^\"]*)\"", match.group(1))


def aotriton(cmake_text, hip_version, archs, processor="x86_64"):
    """The AOTriton tarballs PyTorch's ROCm build downloads for a ROCm release and an arch list.

    cmake_text is the checkout's cmake/External/aotriton.cmake. Upstream takes the prebuilt runtime only for a ROCm
    whose major.minor is in its list (otherwise it clones and builds AOTriton: network access the mirror cannot
    serve) and one image tarball per image whose gfx pattern (the "x" a wildcard) matches an entry of
    PYTORCH_ROCM_ARCH (archs: that string or a list). Extracted together they are the AOTRITON_INSTALLED_PREFIX.
    """
    version = _cmake_list(cmake_text, "__AOTRITON_VER")
    rocm_list = _cmake_list(cmake_text, "__AOTRITON_ROCM_LIST")
    images = _cmake_list(cmake_text, "__AOTRITON_IMAGE_LIST")
    if not version or not rocm_list or images is None:
        raise BuildDownloadError(
            "cannot read AOTriton's version, ROCm list and image list from %s: set pytorch_aotriton_prefix to an "
            "installed AOTriton, or pytorch_aotriton: false to build without flash attention" % AOTRITON_CMAKE_FILE
        )
    version = version[0]
    base = (_cmake_list(cmake_text, "__AOTRITON_BASE_URL") or [AOTRITON_DEFAULT_BASE_URL])[0]
    manylinux_list = _cmake_list(cmake_text, "__AOTRITON_MANYLINUX_LIST") or [AOTRITON_DEFAULT_MANYLINUX] * len(
        rocm_list
    )
    match = re.match(r"^(\d+)\.(\d+)", hip_version or "")
    if not match:
        raise BuildDownloadError("cannot read a ROCm major.minor from %r" % (hip_version,))
    rocm = "rocm%s.%s" % match.groups()
    if rocm not in rocm_list:
        raise BuildDownloadError(
            "AOTriton %s has no prebuilt runtime for %s (it has %s), so PyTorch's build would clone and build it "
            "from github.com: set pytorch_aotriton_prefix to an AOTriton built for this ROCm, or pytorch_aotriton: "
            "false to build without flash attention" % (version, rocm, ", ".join(rocm_list))
        )
    manylinux = manylinux_list[rocm_list.index(rocm)] if len(manylinux_list) == len(rocm_list) else manylinux_list[0]
    release = "%s%s/" % (base if base.endswith("/") else base + "/", version)
    targets = [arch for arch in re.split(r"[;\s]+", archs if isinstance(archs, str) else ";".join(archs)) if arch]
    wanted = [
        image
        for image in images
        # upstream: string(SUBSTRING image 7 -1) ("942", "11xx"), "x" -> ".", then `target MATCHES` (a search).
        if any(re.search(image[len("amd-gfx") :].replace("x", "."), target.split(":")[0]) for target in targets)
    ]
    if not wanted:
        raise BuildDownloadError(
            "AOTriton %s has no kernel images for %s (it has %s): set pytorch_aotriton: false for these archs"
            % (version, ";".join(targets), ", ".join(images))
        )
    runtime = "aotriton-%s-%s_%s-%s-shared.tar.gz" % (version, manylinux, processor, rocm)
    return {
        "version": version,
        "name": "aotriton-%s-%s" % (version, rocm),
        "urls": [release + runtime] + [release + "aotriton-%s-images-%s.tar.gz" % (version, image) for image in wanted],
    }
