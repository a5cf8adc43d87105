"""Builds the fixture triton wheel (ROCm backend) with the build needs of Triton 3.5.

As triton-lang/triton at v3.5.0: setup.py sits at the repository root (python/ up to 3.3); the build runs cmake
(>= 3.20, < 4: pyproject.toml [build-system]) and ninja by name from PATH and imports pybind11; the distribution
name comes from TRITON_WHEEL_NAME (PyTorch's build_triton_wheel.py sets pytorch-triton-rocm), "triton" otherwise.

Build-time downloads, as setup.py at v3.5.0 makes them: a prebuilt LLVM named by cmake/llvm-hash.txt unless
LLVM_SYSPATH is set, nlohmann json for Proton (on unless TRITON_BUILD_PROTON=OFF) unless JSON_SYSPATH is set, and
NVIDIA's ptxas, cuobjdump, nvdisasm, cudart, cupti and crt headers unless TRITON_OFFLINE_BUILD is set. With
TRITON_OFFLINE_BUILD every package it needs must have its *_SYSPATH ("Requested an offline build but ... is not
set"). Nothing here reaches a network: where upstream would download, this fixture stops and names the URL. The
LLVM_SYSPATH tree must hold what CMakeLists.txt reads from it (include/, lib/cmake/{llvm,mlir,lld}, bin/FileCheck).
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def tool_version(name):
    path = shutil.which(name)
    if not path:
        sys.exit("error: %s is not on PATH; Triton's build needs it (pip install the build requirements)" % name)
    output = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(part) for part in re.search(r"(\d+)\.(\d+)\.(\d+)", output).groups())


def env_flag(name, default):
    return os.environ.get(name, default).upper() in ("ON", "1", "YES", "TRUE", "Y")


def would_download(what, url):
    sys.exit("error: the build would download %s from %s here (no network on an air-gapped host)" % (what, url))


def check_build_downloads():
    offline = env_flag("TRITON_OFFLINE_BUILD", "")
    with open(os.path.join(ROOT, "cmake", "llvm-hash.txt")) as handle:
        revision = handle.read(8)
    packages = [
        (
            "LLVM_SYSPATH",
            "LLVM",
            "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-%s-ubuntu-x64.tar.gz" % revision,
        )
    ]
    if env_flag("TRITON_BUILD_PROTON", "ON"):
        packages.append(
            ("JSON_SYSPATH", "nlohmann json", "https://github.com/nlohmann/json/releases/download/v3.11.3/include.zip")
        )
    for variable, what, url in packages:
        if not os.environ.get(variable):
            if offline:
                raise RuntimeError("Requested an offline build but %s is not set" % variable)
            would_download(what, url)
    if not offline:
        would_download(
            "NVIDIA's ptxas, cuobjdump, nvdisasm and CUDA headers",
            "https://developer.download.nvidia.com/compute/cuda/redist/",
        )
    llvm = os.environ["LLVM_SYSPATH"]
    needed = ["include", "lib/cmake/llvm", "lib/cmake/mlir", "lib/cmake/lld", "bin/FileCheck"]
    missing = [part for part in needed if not os.path.exists(os.path.join(llvm, part))]
    if missing:
        sys.exit(
            "error: LLVM_SYSPATH=%s lacks %s (CMakeLists.txt needs an LLVM built with MLIR and LLD)"
            % (llvm, ", ".join(missing))
        )
    return llvm


if "bdist_wheel" in sys.argv or "build" in sys.argv:
    cmake = tool_version("cmake")
    if not (3, 20, 0) <= cmake < (4, 0, 0):
        sys.exit("error: Triton needs cmake>=3.20,<4.0, found %s" % ".".join(map(str, cmake)))
    tool_version("ninja")
    if importlib.util.find_spec("pybind11") is None:
        sys.exit("error: pybind11 is not installed; Triton's build imports it (pip install pybind11>=2.13.1)")
    check_build_downloads()

commit = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.strip()
with open(os.path.join(ROOT, "triton", "_build_info.py"), "w") as handle:
    handle.write(
        'commit = "%s"\nbackend = "hip"\nllvm = "%s"\n'
        % (commit, os.path.basename(os.environ.get("LLVM_SYSPATH", "").rstrip("/")))
    )

setup(
    name=os.environ.get("TRITON_WHEEL_NAME", "triton"),
    version="3.5.0+git%s" % commit[:8],
    packages=["triton", "triton.runtime"],
)
