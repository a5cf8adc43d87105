"""Builds the fixture triton wheel (ROCm backend) with the build needs of Triton 3.5.

As triton-lang/triton at v3.5.0: setup.py sits at the repository root (python/ up to 3.3); the build runs cmake
(>= 3.20, < 4: pyproject.toml [build-system]) and ninja by name from PATH and imports pybind11; the distribution
name comes from TRITON_WHEEL_NAME (PyTorch's build_triton_wheel.py sets pytorch-triton-rocm), "triton" otherwise.
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


if "bdist_wheel" in sys.argv or "build" in sys.argv:
    cmake = tool_version("cmake")
    if not (3, 20, 0) <= cmake < (4, 0, 0):
        sys.exit("error: Triton needs cmake>=3.20,<4.0, found %s" % ".".join(map(str, cmake)))
    tool_version("ninja")
    if importlib.util.find_spec("pybind11") is None:
        sys.exit("error: pybind11 is not installed; Triton's build imports it (pip install pybind11>=2.13.1)")

commit = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.strip()
with open(os.path.join(ROOT, "triton", "_build_info.py"), "w") as handle:
    handle.write('commit = "%s"\nbackend = "hip"\n' % commit)

setup(name=os.environ.get("TRITON_WHEEL_NAME", "triton"), version="3.5.0+git%s" % commit[:8], packages=["triton"])
