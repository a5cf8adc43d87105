"""Builds the fixture vllm wheel against the installed torch, the way vLLM builds for ROCm."""

import os
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
if not archs:
    sys.exit("error: PYTORCH_ROCM_ARCH is empty")

if "bdist_wheel" in sys.argv or "build" in sys.argv:
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
    version="0.11.0+rocm" + torch.version.hip.split("-")[0],
    packages=["vllm", "vllm.entrypoints", "vllm.platforms"],
    package_data={"vllm": ["_C.so"]},
    install_requires=["torch==" + torch.__version__],
    entry_points={"console_scripts": ["vllm = vllm.entrypoints.cli:main"]},
    distclass=BinaryDistribution,
)
