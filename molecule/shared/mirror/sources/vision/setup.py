"""Builds the fixture torchvision against the installed torch, the way pytorch/vision's setup.py (v0.24.0) does.

As upstream: the build imports the installed torch and pins the wheel to it (torch==<that version>); it is a ROCm
build when torch.version.hip and ROCM_HOME are both set; and the GPU ops are compiled only when torch.cuda is available
or FORCE_CUDA=1, so on a build host without a GPU a build without FORCE_CUDA=1 silently has CPU ops only.
"""

import os
import subprocess
import sys

from setuptools import Distribution, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.24.0"

import torch  # noqa: E402 - the torch this build runs against

rocm_home = os.environ.get("ROCM_HOME") or os.environ.get("ROCM_PATH")
is_rocm = bool(torch.version.hip) and bool(rocm_home)
force_cuda = os.environ.get("FORCE_CUDA", "0") == "1"
gpu_ops = is_rocm and (torch.cuda.is_available() or force_cuda)
commit = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.strip()

if "bdist_wheel" in sys.argv or "build" in sys.argv:
    archs = [arch for arch in os.environ.get("PYTORCH_ROCM_ARCH", "").split(";") if arch]
    if gpu_ops:
        if not archs:
            sys.exit("error: PYTORCH_ROCM_ARCH is empty")
        subprocess.run(
            [
                os.path.join(rocm_home, "bin", "hipcc"),
                *["--offload-arch=" + arch for arch in archs],
                "-x",
                "c++",
                "-shared",
                "-fPIC",
                "-o",
                os.path.join(ROOT, "torchvision", "_C.so"),
                os.path.join(ROOT, "torchvision", "csrc", "nms.hip"),
            ],
            check=True,
        )
    with open(os.path.join(ROOT, "torchvision", "version.py"), "w") as handle:
        handle.write(
            "__version__ = %r\ngit_version = %r\ntorch = %r\nhip = %r\n"
            % (VERSION + "+git" + commit[:7], commit, torch.__version__, torch.version.hip if gpu_ops else None)
        )


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    name="torchvision",
    version=VERSION + "+git" + commit[:7],
    packages=["torchvision"],
    package_data={"torchvision": ["_C.so"]},
    install_requires=["numpy", "torch==" + torch.__version__, "pillow!=8.3.*,>=5.3.0"],
    distclass=BinaryDistribution,
)
