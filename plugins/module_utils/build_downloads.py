# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the real source builds download at build time, read from the checkout at its pinned commit.

Left alone, Triton's setup.py downloads a prebuilt LLVM (and NVIDIA's tools) and PyTorch's ROCm build downloads
AOTriton. Air-gapped, those downloads must come from the mirror: `instinct-stack mirror build` fetches the files named
here and `mirror verify` names any that are missing, and the roles fetch them onto the build host and point the build
at them with upstream's own switches (TRITON_OFFLINE_BUILD and LLVM_SYSPATH; AOTRITON_INSTALLED_PREFIX).

Integrity: PyTorch's aotriton.cmake lists a SHA-256 per tarball (URL_HASH SHA256=...), and aotriton() returns it per
URL, so the roles and the mirror check what upstream's build would check. An empty entry ("") means upstream names
no hash for that tarball: there is nothing to check it against, so the caller warns and fetches it unchecked. Triton's
setup.py checks no hash for its LLVM and the release publishes none (triton-lang/triton#1103): nothing here invents
one, so the LLVM tarball is only as good as the mirror that serves it (its manifest's sha256, `mirror verify`).
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
AOTRITON_DEFAULT_Z = "gz"
SHA256 = re.compile(r"^[0-9a-f]{64}$")


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
    """The quoted values of set(VARIABLE "a" "b" ...) in a CMake file, or None without one. Line comments
    (upstream's "<sha256>"  # rocm6.4) are dropped first; a # inside quotes is kept."""
    cmake_text = re.sub(r"(\"[^\"]*\")|#[^\n]*", lambda m: m.group(1) or "", cmake_text)
    match = re.search(r"set\(\s*%s\s+((?:\"[^\"]*\"\s*)+)\)" % re.escape(variable), cmake_text)
    if not match:
        return None
    return re.findall(r"\"([^\"]*)\"", match.group(1))


def _sha256_list(cmake_text, variable, names, version):
    """The SHA-256 per entry of names (upstream's lists are parallel: one hash per ROCm release, one per image),
    "" for an empty entry and for every entry when the file has no such list (upstream then names no hash)."""
    hashes = _cmake_list(cmake_text, variable)
    if hashes is None:
        return [""] * len(names)
    if len(hashes) != len(names):
        raise BuildDownloadError(
            "%s lists %d hashes in %s for the %d entries %s of AOTriton %s: it cannot say which hash is whose"
            % (AOTRITON_CMAKE_FILE, len(hashes), variable, len(names), ", ".join(names), version)
        )
    for index, value in enumerate(hashes):
        if value and not SHA256.match(value.lower()):
            raise BuildDownloadError(
                "%s: %s holds %r for %s, not a SHA-256" % (AOTRITON_CMAKE_FILE, variable, value[:80], names[index])
            )
    return [value.lower() for value in hashes]


def aotriton(cmake_text, hip_version, archs, processor="x86_64"):
    """The AOTriton tarballs PyTorch's ROCm build downloads for a ROCm release and an arch list.

    cmake_text is the checkout's cmake/External/aotriton.cmake. Upstream takes the prebuilt runtime only for a ROCm
    whose major.minor is in its list (otherwise it clones and builds AOTriton: network access the mirror cannot
    serve) and one image tarball per image whose gfx pattern (the "x" a wildcard) matches an entry of
    PYTORCH_ROCM_ARCH (archs: that string or a list). Extracted together they are the AOTRITON_INSTALLED_PREFIX.

    sha256 maps each URL to the hash upstream downloads it with (__AOTRITON_SHA256_LIST, one per ROCm release, and
    __AOTRITON_IMAGE_SHA256_LIST, one per image), "" where upstream names none; unchecked lists those URLs, for the
    caller to warn about (it then fetches them without a check: there is no hash to check them against).
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
    runtime_hashes = _sha256_list(cmake_text, "__AOTRITON_SHA256_LIST", rocm_list, version)
    image_hashes = _sha256_list(cmake_text, "__AOTRITON_IMAGE_SHA256_LIST", images, version)
    compression = (_cmake_list(cmake_text, "__AOTRITON_Z") or [AOTRITON_DEFAULT_Z])[0]
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
    runtime = release + "aotriton-%s-%s_%s-%s-shared.tar.%s" % (version, manylinux, processor, rocm, compression)
    sha256 = {runtime: runtime_hashes[rocm_list.index(rocm)]}
    for image in wanted:
        sha256[release + "aotriton-%s-images-%s.tar.%s" % (version, image, compression)] = image_hashes[
            images.index(image)
        ]
    return {
        "version": version,
        "name": "aotriton-%s-%s" % (version, rocm),
        "urls": list(sha256),
        "sha256": sha256,
        "unchecked": [url for url, value in sha256.items() if not value],
    }
