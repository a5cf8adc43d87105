"""Builds the fixture torch wheel the way PyTorch's setup.py builds a ROCm wheel."""

import os
import subprocess
import sys

from setuptools import Distribution, setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    sys.exit("error: " + message)


if os.environ.get("USE_ROCM") != "1":
    fail("USE_ROCM=1 is not set and CUDA was not found: this tree builds only for ROCm")
archs = [arch for arch in os.environ.get("PYTORCH_ROCM_ARCH", "").split(";") if arch]
if not archs:
    fail("PYTORCH_ROCM_ARCH is empty")
hip_source = os.path.join(ROOT, "torch", "csrc", "ops.hip")
if not os.path.exists(hip_source):
    fail("torch/csrc/ops.hip is missing: run python tools/amd_build/build_amd.py first")
rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
with open(os.path.join(rocm, ".info", "version")) as handle:
    hip_version = handle.read().strip()
with open(os.path.join(ROOT, "version.txt")) as handle:
    version = handle.read().strip()
git_version = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.strip()

if "bdist_wheel" in sys.argv or "build" in sys.argv:
    with open(os.path.join(ROOT, "third_party", "fixture-lib", "VERSION")) as handle:
        third_party = handle.read().strip()
    cpp = os.path.join(ROOT, "build", "ops.cpp")
    os.makedirs(os.path.dirname(cpp), exist_ok=True)
    with open(hip_source) as src, open(cpp, "w") as dst:
        dst.write(src.read())
    subprocess.run(
        [
            os.path.join(rocm, "bin", "hipcc"),
            *["--offload-arch=" + arch for arch in archs],
            "-shared",
            "-fPIC",
            "-O2",
            "-o",
            os.path.join(ROOT, "torch", "_C.so"),
            cpp,
        ],
        check=True,
    )
    with open(os.path.join(ROOT, "torch", "version.py"), "w") as handle:
        handle.write(
            '__version__ = "%s+rocm%s"\nhip = "%s"\ncuda = None\ngit_version = "%s"\nrocm_arch = "%s"\n'
            'third_party = "%s"\nmax_jobs = "%s"\n'
            % (
                version,
                hip_version.split("-")[0],
                hip_version,
                git_version,
                ";".join(archs),
                third_party,
                os.environ.get("MAX_JOBS", ""),
            )
        )


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    name="torch",
    version="%s+rocm%s" % (version, hip_version.split("-")[0]),
    packages=["torch"],
    package_data={"torch": ["_C.so"]},
    distclass=BinaryDistribution,
)
