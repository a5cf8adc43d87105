"""Builds the fixture vllm wheel against the installed torch, the way vLLM builds for ROCm."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup

ROOT = os.path.dirname(os.path.abspath(__file__))

if os.environ.get("VLLM_TARGET_DEVICE", "cuda") != "rocm":
    sys.exit("error: CUDA_HOME is not set (VLLM_TARGET_DEVICE=cuda); set VLLM_TARGET_DEVICE=rocm to build for ROCm")
import torch  # noqa: E402 - the torch that the build runs against

if not torch.version.hip:
    sys.exit("error: the installed torch %s is not a ROCm build (torch.version.hip is empty)" % torch.__version__)
with open(os.path.join(ROOT, "requirements", "rocm.txt")) as handle:
    if any(line.startswith("torch") for line in handle):
        sys.exit("error: requirements/rocm.txt pins torch; run python use_existing_torch.py to use the installed one")
archs = [arch for arch in os.environ.get("PYTORCH_ROCM_ARCH", "").split(";") if arch]


def read_requirements(name):
    """The requirement lines of requirements/NAME, -r includes followed (setup.py get_requirements, upstream)."""
    found = []
    with open(os.path.join(ROOT, "requirements", name)) as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line.startswith("-r "):
                found += read_requirements(line[3:].strip())
            elif line and not line.startswith("-"):
                found.append(line)
    return found


def cmake_version():
    """vLLM's CMake build: cmake by name on PATH, >= 3.26.1 and below 4 (rocm-build.txt pins cmake<4: CMake 4
    dropped the compatibility that ROCm's CMake configs rely on, vllm-project/vllm PR #15709)."""
    cmake = shutil.which("cmake")
    if not cmake:
        sys.exit("error: CMake is not found on PATH; install the build requirements (requirements/rocm-build.txt)")
    output = subprocess.run([cmake, "--version"], capture_output=True, text=True, check=True).stdout
    version = tuple(int(part) for part in re.search(r"version (\d+)\.(\d+)\.(\d+)", output).groups())
    if version < (3, 26, 1):
        sys.exit("error: CMake %s is too old: vLLM needs cmake>=3.26.1" % ".".join(map(str, version)))
    if version >= (4, 0, 0):
        sys.exit(
            "CMake Error: Compatibility with CMake < 3.5 has been removed from CMake (found CMake %s; "
            "requirements/rocm-build.txt pins cmake<4)" % ".".join(map(str, version))
        )
    return version


if not archs:
    sys.exit("error: PYTORCH_ROCM_ARCH is empty")

if "bdist_wheel" in sys.argv or "build" in sys.argv:
    cmake_version()
    if importlib.util.find_spec("setuptools_scm") is None:  # vLLM's version comes from setuptools-scm
        sys.exit("error: setuptools-scm is not installed; install the build requirements (requirements/rocm-build.txt)")
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    offload = ["--offload-arch=" + arch for arch in archs]
    library, source = os.path.join(ROOT, "vllm", "_C.so"), os.path.join(ROOT, "csrc", "kernels.hip")
    subprocess.run(
        [os.path.join(rocm, "bin", "hipcc"), *offload, "-x", "c++", "-shared", "-fPIC", "-o", library, source],
        check=True,
    )
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with open(os.path.join(ROOT, "vllm", "_build_info.py"), "w") as handle:
        handle.write('commit = "%s"\ntorch = "%s"\nrocm_arch = "%s"\n' % (commit, torch.__version__, ";".join(archs)))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    name="vllm",
    version="0.11.1+rocm" + torch.version.hip.split("-")[0],
    packages=["vllm", "vllm.entrypoints", "vllm.executor", "vllm.platforms"],
    package_data={"vllm": ["_C.so"]},
    # As upstream: the wheel requires what requirements/rocm.txt (with common.txt) names, plus the torch it was built
    # against (use_existing_torch.py removed torch from the files).
    install_requires=["torch==" + torch.__version__] + read_requirements("rocm.txt"),
    entry_points={"console_scripts": ["vllm = vllm.entrypoints.cli:main"]},
    distclass=BinaryDistribution,
)
