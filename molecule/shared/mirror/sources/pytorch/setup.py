"""Builds the fixture torch wheel the way PyTorch's setup.py builds a ROCm wheel.

As upstream: cmake found by name on PATH at version >= 3.27 (tools/setup_helpers/cmake.py fails with
"no cmake or cmake3 with version >= 3.27.0" otherwise), the Ninja generator when ninja is on PATH
(Makefiles otherwise), and a wheel that declares torch's runtime requirements.

AOTriton, as CMakeLists.txt and cmake/External/aotriton.cmake at v2.9.0 use it: with flash or memory-efficient
attention on (USE_FLASH_ATTENTION, USE_MEM_EFF_ATTENTION: on by default) the build takes an installed AOTriton from
AOTRITON_INSTALLED_PREFIX (its lib/ and include/ copied into torch/) or downloads the runtime for the ROCm release and
the image packs for PYTORCH_ROCM_ARCH from github.com, or clones and builds AOTriton for a ROCm release without a
prebuilt runtime. Nothing here reaches a network: where upstream would download, this fixture stops and says so.
"""

import os
import re
import shutil
import subprocess
import sys
import time

from setuptools import Distribution, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
# Fault injection for the airgapped scenario's fault tests (test_faults.py), not upstream's: while this file exists
# the compile step waits, so a test can kill the build, or the ansible-playbook that started it, mid-build.
HOLD_FILE = "/run/instinct-fixture/hold-build"
# A benchmark's knob, not upstream's either: benchmarks/build_farm.py writes a number of seconds here so that the
# compile step takes a stated time, as a real torch build's hours would, and the farm's parallel builds show.
STRETCH_FILE = "/run/instinct-fixture/build-seconds"
# Another benchmark knob: benchmarks/scale.py --wheel-mb writes a number of megabytes here, and the wheel carries that
# much random data in torch/lib/weight/, so that the stack weighs what a real one does (a ROCm torch wheel is gigabytes)
# and the bytes that cross the controller can be told from the stack's.
WEIGHT_FILE = "/run/instinct-fixture/wheel-mb"


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

CMAKE_MINIMUM_VERSION = (3, 27, 0)


def env_on(name):
    """tools/setup_helpers/env.py check_negative_env_flag: on unless set to 0, OFF, NO or FALSE."""
    return os.environ.get(name, "ON").upper() not in ("0", "OFF", "NO", "FALSE", "N")


def cmake_list(text, variable):
    match = re.search(r"set\(\s*%s\s+((?:\"[^\"]*\"\s*)+)\)" % variable, text)
    return re.findall(r"\"([^\"]*)\"", match.group(1)) if match else []


def aotriton():
    """The AOTriton copied into torch/ (its version), or "" when neither attention kernel is built."""
    if not (env_on("USE_FLASH_ATTENTION") or env_on("USE_MEM_EFF_ATTENTION")):
        return ""
    with open(os.path.join(ROOT, "cmake", "External", "aotriton.cmake")) as handle:
        text = handle.read()
    release = cmake_list(text, "__AOTRITON_VER")[0]
    images = cmake_list(text, "__AOTRITON_IMAGE_LIST")
    wanted = [image for image in images if any(re.search(image[7:].replace("x", "."), arch) for arch in archs)]
    prefix = os.environ.get("AOTRITON_INSTALLED_PREFIX")
    if not prefix:
        rocm = "rocm" + ".".join(hip_version.split(".")[:2])
        if rocm not in cmake_list(text, "__AOTRITON_ROCM_LIST"):
            fail(
                "AOTriton %s has no runtime for %s: the build would clone https://github.com/ROCm/aotriton.git and "
                "build it here (no network on an air-gapped host)" % (release, rocm)
            )
        fail(
            "the build would download AOTriton %s (the %s runtime and the %s image packs) from %s here (no "
            "network on an air-gapped host): set AOTRITON_INSTALLED_PREFIX, or USE_FLASH_ATTENTION=0 and "
            "USE_MEM_EFF_ATTENTION=0" % (release, rocm, ", ".join(wanted), cmake_list(text, "__AOTRITON_BASE_URL")[0])
        )
    for part in ("lib/libaotriton_v2.so", "include/aotriton"):
        if not os.path.exists(os.path.join(prefix, part)):
            fail("AOTRITON_INSTALLED_PREFIX=%s has no %s" % (prefix, part))
    # Upstream builds without the images and flash attention fails at run time for lack of kernels; the fixture
    # stops here so that a test sees it.
    present = (
        os.listdir(os.path.join(prefix, "lib", "aotriton.images"))
        if os.path.isdir(os.path.join(prefix, "lib", "aotriton.images"))
        else []
    )
    missing = [image for image in wanted if image not in present]
    if missing:
        fail(
            "AOTRITON_INSTALLED_PREFIX=%s lacks the kernel images %s for %s"
            % (prefix, ", ".join(missing), ";".join(archs))
        )
    for part in ("lib", "include"):  # install(DIRECTORY $PREFIX/lib $PREFIX/include DESTINATION torch)
        shutil.copytree(os.path.join(prefix, part), os.path.join(ROOT, "torch", part), dirs_exist_ok=True)
    return release


def cmake_command():
    """The cmake (or cmake3) on PATH with the highest version >= CMAKE_MINIMUM_VERSION."""
    found = {}
    for name in ("cmake3", "cmake"):
        path = shutil.which(name)
        if path:
            output = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
            match = re.search(r"version (\d+)\.(\d+)\.(\d+)", output)
            if match:
                found[path] = tuple(int(part) for part in match.groups())
    valid = {path: version for path, version in found.items() if version >= CMAKE_MINIMUM_VERSION}
    if not valid:
        raise RuntimeError(
            "no cmake or cmake3 with version >= %s, found: %s"
            % (".".join(map(str, CMAKE_MINIMUM_VERSION)), {path: ".".join(map(str, v)) for path, v in found.items()})
        )
    return max(valid, key=valid.get)


if "bdist_wheel" in sys.argv or "build" in sys.argv:
    with open(os.path.join(ROOT, "third_party", "fixture-lib", "VERSION")) as handle:
        third_party = handle.read().strip()
    cmake = cmake_command()
    aotriton_version = aotriton()
    generator = "Ninja" if shutil.which("ninja") else "Unix Makefiles"
    build_dir = os.path.join(ROOT, "build")
    os.makedirs(build_dir, exist_ok=True)
    with open(hip_source) as src, open(os.path.join(build_dir, "ops.cpp"), "w") as dst:
        dst.write(src.read())
    subprocess.run(
        [
            cmake,
            "-S",
            ROOT,
            "-B",
            build_dir,
            "-G",
            generator,
            "-DCMAKE_CXX_COMPILER=" + os.path.join(rocm, "bin", "hipcc"),
            "-DCMAKE_LIBRARY_OUTPUT_DIRECTORY=" + os.path.join(ROOT, "torch"),
            "-DTORCH_FIXTURE_OFFLOAD_FLAGS=" + ";".join("--offload-arch=" + arch for arch in archs),
        ],
        check=True,
    )
    if os.path.exists(HOLD_FILE):
        print("fixture: the compile step is held while %s exists" % HOLD_FILE, flush=True)
        while os.path.exists(HOLD_FILE):
            time.sleep(0.2)
    subprocess.run([cmake, "--build", build_dir, "--parallel", os.environ.get("MAX_JOBS") or "1"], check=True)
    if os.path.exists(STRETCH_FILE):
        with open(STRETCH_FILE) as handle:
            stretch = float(handle.read())
        print("fixture: the compile step is stretched to %g s (%s)" % (stretch, STRETCH_FILE), flush=True)
        time.sleep(stretch)
    weight_dir = os.path.join(ROOT, "torch", "lib", "weight")
    shutil.rmtree(weight_dir, ignore_errors=True)
    if os.path.exists(WEIGHT_FILE):
        with open(WEIGHT_FILE) as handle:
            megabytes = int(handle.read())
        print("fixture: the wheel carries %d MB of random data (%s)" % (megabytes, WEIGHT_FILE), flush=True)
        os.makedirs(weight_dir)
        with open(os.path.join(weight_dir, "fixture-weight.bin"), "wb") as handle:
            for _ in range(megabytes):
                handle.write(os.urandom(1 << 20))
    with open(os.path.join(ROOT, "torch", "version.py"), "w") as handle:
        handle.write(
            '__version__ = "%s+rocm%s"\nhip = "%s"\ncuda = None\ngit_version = "%s"\nrocm_arch = "%s"\n'
            'third_party = "%s"\nmax_jobs = "%s"\ncmake_generator = "%s"\ncmake_version = "%s"\naotriton = "%s"\n'
            % (
                version,
                hip_version.split("-")[0],
                hip_version,
                git_version,
                ";".join(archs),
                third_party,
                os.environ.get("MAX_JOBS", ""),
                generator,
                subprocess.run([cmake, "--version"], capture_output=True, text=True, check=True).stdout.split()[2],
                aotriton_version,
            )
        )


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    name="torch",
    version="%s+rocm%s" % (version, hip_version.split("-")[0]),
    packages=["torch", "torch.backends"],
    package_data={"torch": ["_C.so", "lib/*.so*", "lib/aotriton.images/*/*", "include/aotriton/*", "lib/weight/*"]},
    # torch's runtime requirements, as the upstream wheel declares them (../shared/UPSTREAM.md; bounds from
    # pytorch/pytorch pyproject.toml): a stack virtualenv without them does not import torch.
    install_requires=[
        "filelock",
        "typing-extensions>=4.10.0",
        "sympy>=1.13.3",
        "networkx>=2.5.1",
        "jinja2",
        "fsspec>=0.8.5",
    ],
    distclass=BinaryDistribution,
)
