"""Measure the ccache hit rate of a torch build for a second arch list, after a build for another one.

The pytorch role builds one torch wheel per arch list, each under its own build key and so in its own staging tree
(build_staging_dir/pytorch-KEY/src), through ccache with one cache directory per build host. wheel_build.build sets
CCACHE_BASEDIR to the staging tree and CCACHE_NOHASHDIR=1 so that the second arch list's build can hit on the units
that do not depend on the arch. This benchmark measures that, with the real ccache and compilers of this machine,
on the fixture PyTorch (molecule/shared/mirror/sources/pytorch):

1. gfx942 under its build key, then gfx90a;gfx942 under the other key, both into one fresh CCACHE_DIR, each through
   wheel_build.build as build_arch.yml calls it: the hipify and bdist_wheel steps with the build virtualenv's python,
   the environment of build.yml (USE_ROCM, CMAKE_ARGS, AOTRITON_INSTALLED_PREFIX, MAX_JOBS from max_jobs(), ROCM_PATH,
   PATH, CMAKE_C/CXX_COMPILER_LAUNCHER=ccache, CCACHE_DIR, PYTORCH_ROCM_ARCH), the role's build_key, ccache=True.
   The second build's ccache hits and misses are the ones wheel_build records in its build-info.json.

The controls, each in a fresh CCACHE_DIR and staging directory, the same two builds:

- before: what the role did before CCACHE_BASEDIR/CCACHE_NOHASHDIR: neither is set. wheel_build sets both with
  env.setdefault, so an entry in the build's environment overrides the value, but no entry can unset them, and
  ccache refuses the negative values (0, false, no) of CCACHE_NOHASHDIR. So this control wraps wheel_build's
  _run_steps to drop the two variables from the steps' environment; everything else runs as in the role.
- basedir elsewhere: CCACHE_BASEDIR overridden through the build's environment (which env.setdefault leaves alone)
  to a directory outside the staging trees, CCACHE_NOHASHDIR=1 as wheel_build sets it: hash_dir off alone.

Which compile units hit or missed comes from ccache's own log (CCACHE_LOGFILE, one per build, added to the build's
environment: an observer only, the role does not set it): its "Source file" and "Result" lines per ccache process.

Needs ccache (apt: ccache) and the clang that the fixture ROCm's hipcc runs (apt: clang-16; the fixture rocm-llvm
links it in as ROCm's clang); the build virtualenv (the torch checkout's requirements-build.txt with cmake<4, as the
role installs it) is created in the work directory through pip's configured index. Run from the repository root:

    .venv/bin/python -m benchmarks.ccache_hits [--workdir DIR] [--keep]

Results go to stdout and benchmarks/results/ccache_hits.json (--output); the work directory (a temporary one unless
--workdir) holds the fixture ROCm, the checkout, the build virtualenv, the caches and ccache's logs.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from instinct_stack.collection import collection_module

# The fixture mirror's helpers lay out the fixture ROCm prefix (hipcc, rocm-llvm, the -dev packages' CMake files).
from tests.harness import build_mirror

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = os.path.join(ROOT, "molecule", "shared", "mirror")
# The collection's module_utils, as the pytorch role runs them.
python_abi = collection_module("python_abi")
wheel_build = collection_module("wheel_build")
build_key = collection_module("build_plan").build_key
max_jobs = collection_module("build_plan").max_jobs

ARCH_LISTS = ["gfx942", "gfx90a;gfx942"]
CONFIGURATIONS = ["basedir", "before", "basedir elsewhere"]
ROCM_RELEASE = build_mirror.RELEASES[0][0]
# Counters of a ccache run's "Result:" lines that say what became of the compile unit.
HIT_RESULTS = ("direct_cache_hit", "preprocessed_cache_hit")
MISS_RESULTS = ("cache_miss",)
STORAGE_RESULT = re.compile(r"^(local|remote)_storage_|^(direct|preprocessed)_cache_miss$")
LOG_LINE = re.compile(r"^\[\S+ (\d+)\s*\] (.*)$")


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs).stdout


def fixture_rocm(work):
    """The fixture ROCm release's files laid out under work/root: its prefix (ROCM_PATH) with hipcc, whose clang is
    rocm-llvm's link to the Debian clang, and the -dev packages' CMake files that LoadHIP.cmake finds."""
    root = os.path.join(work, "root")
    scratch = os.path.join(work, "scratch")
    os.makedirs(scratch)
    for _name, _version, _depends, files, _scripts in build_mirror.rocm_packages(ROCM_RELEASE, "noble"):
        build_mirror.write_files(root, files, scratch)
    shutil.rmtree(scratch)
    prefix = os.path.join(root, "opt", "rocm-" + ROCM_RELEASE)
    clang = os.path.realpath(os.path.join(prefix, "lib", "llvm", "bin", "clang++"))
    if not os.path.exists(clang):
        sys.exit("%s is missing: the fixture hipcc compiles with it (apt-get install %s)" % (clang, "clang-16"))
    return prefix


def fixture_aotriton(work, arch_lists):
    """An installed AOTriton (AOTRITON_INSTALLED_PREFIX) with the image packs of every arch: what the role unpacks."""
    prefix = os.path.join(work, "aotriton")
    _mkdir(prefix, "include", "aotriton")
    with open(os.path.join(_mkdir(prefix, "lib"), "libaotriton_v2.so"), "w") as handle:
        handle.write("")
    for arch in sorted({arch for archs in arch_lists for arch in archs.split(";")}):
        image = _mkdir(prefix, "lib", "aotriton.images", "amd-" + arch)
        with open(os.path.join(image, "kernels.aks2"), "w") as handle:
            handle.write("fixture image pack for %s\n" % arch)
    return prefix


def _mkdir(*parts):
    path = os.path.join(*parts)
    os.makedirs(path, exist_ok=True)
    return path


def fixture_checkout(work):
    """The fixture PyTorch committed as the role's checkout holds it, its submodule third_party/fixture-lib in place.
    Returns (tree, commit)."""
    tree = os.path.join(work, "pytorch")
    shutil.copytree(os.path.join(MIRROR, "sources", "pytorch"), tree, ignore=shutil.ignore_patterns("__pycache__"))
    submodule = os.path.join(tree, "third_party", "fixture-lib")
    shutil.copytree(os.path.join(MIRROR, "sources", "pytorch-third-party"), submodule)
    build_mirror.git(tree, "init", "-q")
    build_mirror.git(tree, "add", "-A")
    build_mirror.git(tree, "commit", "-q", "-m", "pytorch fixture")
    return tree, build_mirror.git(tree, "rev-parse", "HEAD")


def build_venv(work, checkout):
    """The build virtualenv as the role makes it: setuptools and wheel, then the checkout's requirements-build.txt with
    the other builds' cmake<4 bound."""
    venv = os.path.join(work, "build-venv")
    run([sys.executable, "-m", "venv", venv])
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, "--no-compile", "setuptools", "wheel"])
    run([*pip, "--no-compile", "-r", os.path.join(checkout, "requirements-build.txt"), "cmake<4"])
    return venv


def mem_total_mb():
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


def python_abi_key():
    """The build host's Python ABI key (instinct.stack.python_abi), part of the role's build key: the system python3's,
    as the role probes it."""
    return python_abi.describe(run(["python3", "-c", python_abi.PROBE]))["key"]


def parse_ccache_log(text):
    """The compile units of a ccache log (CCACHE_LOGFILE): [{source, result, pid}] in the order they started; source
    absolute (ccache logs it as the compiler got it, relative to the working directory once base_dir rewrote it), result
    "hit" (direct or preprocessed), "miss" or the counter ccache gave instead (called_for_link, autoconf_test ...)."""
    units, current = [], {}
    for line in text.splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        pid, message = match.groups()
        if message.startswith("=== CCACHE") and "STARTED" in message:
            current[pid] = {"pid": int(pid), "source": None, "result": None, "cwd": ""}
            units.append(current[pid])
            continue
        unit = current.get(pid)
        if unit is None:
            continue
        if message.startswith("Working directory: "):
            unit["cwd"] = message[len("Working directory: ") :].strip()
        elif message.startswith("Source file: "):
            unit["source"] = os.path.normpath(os.path.join(unit["cwd"], message[len("Source file: ") :].strip()))
        elif message.startswith("Result: ") and unit["result"] in (None, "other"):
            result = message[len("Result: ") :].strip()
            if result in HIT_RESULTS:
                unit["result"] = "hit"
            elif result in MISS_RESULTS:
                unit["result"] = "miss"
            elif not STORAGE_RESULT.search(result):
                unit["result"] = result
    return [
        {"pid": unit["pid"], "source": unit["source"], "result": unit["result"]}
        for unit in units
        if unit["source"] or unit["result"]
    ]


def unit_name(source, trees):
    """(name, in_tree): a source relative to its staging tree (the same name in every build key's tree), or as it is
    when outside every tree (CMake's compiler probe: CMakeCXXCompilerABI.cpp from cmake's own modules)."""
    for tree in trees:
        if source and source.startswith(tree + os.sep):
            return os.path.relpath(source, tree), True
    return source, False


def tree_units(units):
    """The checkout's own compile units by result, and their hit rate (None when there were none)."""
    by_result = {"hit": [], "miss": []}
    for unit in units:
        if unit["in_tree"] and unit["result"] in by_result:
            by_result[unit["result"]].append(unit["source"])
    total = len(by_result["hit"]) + len(by_result["miss"])
    rate = round(float(len(by_result["hit"])) / total, 4) if total else None
    return {"hit": sorted(by_result["hit"]), "miss": sorted(by_result["miss"]), "hit_rate": rate}


def drop_ccache_dir_settings(run_steps):
    """wheel_build's _run_steps with CCACHE_BASEDIR and CCACHE_NOHASHDIR taken out of the steps' environment."""

    def without(name, src, tree, log_path, steps, env, *args):
        env.pop("CCACHE_BASEDIR", None)
        env.pop("CCACHE_NOHASHDIR", None)
        return run_steps(name, src, tree, log_path, steps, env, *args)

    return without


def bench(configuration, work, checkout, commit, rocm, aotriton, venv, abi):
    """The two builds of one configuration; each build's ccache figures and units."""
    base = os.path.join(work, configuration.replace(" ", "-"))
    ccache_dir, cache_dir, staging_dir = (os.path.join(base, part) for part in ("ccache", "wheels", "staging"))
    for directory in (ccache_dir, cache_dir, staging_dir):
        os.makedirs(directory)
    flags = {"USE_ROCM": "1", "CMAKE_ARGS": "", "AOTRITON_INSTALLED_PREFIX": aotriton}
    jobs = max_jobs(os.cpu_count(), mem_total_mb(), 4096)
    build_env = {
        "MAX_JOBS": str(jobs),
        "ROCM_PATH": rocm,
        "PATH": "%s/bin:%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" % (venv, rocm),
        "CMAKE_C_COMPILER_LAUNCHER": "ccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
        "CCACHE_DIR": ccache_dir,
    }
    if configuration == "basedir elsewhere":
        build_env["CCACHE_BASEDIR"] = _mkdir(base, "elsewhere")
    python = os.path.join(venv, "bin", "python")
    steps = [
        {"name": "hipify", "argv": [python, "tools/amd_build/build_amd.py"]},
        {"name": "bdist_wheel", "argv": [python, "setup.py", "bdist_wheel"]},
    ]
    keys = [build_key(archs, {"pytorch": commit, "rocm": ROCM_RELEASE, "python": abi}, flags) for archs in ARCH_LISTS]
    trees = [os.path.join(staging_dir, "pytorch-%s" % key, "src") for key in keys]
    original = wheel_build._run_steps
    if configuration == "before":
        wheel_build._run_steps = drop_ccache_dir_settings(original)
    builds = []
    try:
        for index, (archs, key) in enumerate(zip(ARCH_LISTS, keys, strict=True)):
            log = os.path.join(base, "ccache-%d.log" % (index + 1))
            environment = dict(flags, **build_env, PYTORCH_ROCM_ARCH=archs, CCACHE_LOGFILE=log)
            started = time.time()
            info = wheel_build.build(
                "pytorch",
                checkout,
                key,
                cache_dir,
                staging_dir,
                steps,
                environment=environment,
                metadata={"arch": archs, "commit": commit, "max_jobs": str(jobs)},
                ccache=True,
            )
            with open(log, errors="replace") as handle:
                units = parse_ccache_log(handle.read())
            for unit in units:
                unit["source"], unit["in_tree"] = unit_name(unit["source"], trees)
            builds.append(
                {
                    "arch": archs,
                    "key": key,
                    "seconds": round(time.time() - started, 1),
                    "ccache": info["ccache"],
                    "units": units,
                    "tree_units": tree_units(units),
                }
            )
    finally:
        wheel_build._run_steps = original
    return {"configuration": configuration, "max_jobs": jobs, "builds": builds}


def table(results):
    """One line per build: ccache's counters (CMake's compiler probe included), then the checkout's own units."""
    lines = [
        "%-18s %-14s %5s %7s %9s  %-10s %s"
        % ("configuration", "arch list", "hits", "misses", "hit rate", "units hit", "checkout's units (hit | missed)")
    ]
    for result in results:
        for build in result["builds"]:
            stats, units = build["ccache"] or {}, build["tree_units"]
            lines.append(
                "%-18s %-14s %5s %7s %9s  %-10s %s | %s"
                % (
                    result["configuration"],
                    build["arch"],
                    stats.get("hits", "?"),
                    stats.get("misses", "?"),
                    percent(stats.get("hit_rate")),
                    "%d/%d" % (len(units["hit"]), len(units["hit"]) + len(units["miss"])),
                    ", ".join(units["hit"]) or "-",
                    ", ".join(units["miss"]) or "-",
                )
            )
    return "\n".join(lines)


def percent(rate):
    return "-" if rate is None else "%.0f %%" % (rate * 100)


def machine():
    def first_line(argv):
        try:
            return run(argv).splitlines()[0]
        except (OSError, subprocess.CalledProcessError, IndexError):
            return None

    return {
        "nproc": os.cpu_count(),
        "mem_total_mb": mem_total_mb(),
        "ccache": first_line(["ccache", "--version"]),
        "clang": first_line(["clang++-16", "--version"]),
        "gcc": first_line(["gcc", "--version"]),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configurations", nargs="+", choices=CONFIGURATIONS, default=CONFIGURATIONS)
    parser.add_argument("--workdir", help="work directory (default: a temporary one, removed at the end)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "ccache_hits.json"))
    args = parser.parse_args(argv)
    if not shutil.which("ccache"):
        sys.exit("ccache is not on PATH (apt-get install ccache)")
    work = args.workdir or tempfile.mkdtemp(prefix="ccache-hits-")
    os.makedirs(work, exist_ok=True)
    try:
        rocm = fixture_rocm(work)
        aotriton = fixture_aotriton(work, ARCH_LISTS)
        checkout, commit = fixture_checkout(work)
        venv = build_venv(work, checkout)
        abi = python_abi_key()
        results = []
        for configuration in args.configurations:
            print("%s ..." % configuration, flush=True)
            results.append(bench(configuration, work, checkout, commit, rocm, aotriton, venv, abi))
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    document = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "arch_lists": ARCH_LISTS,
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
    print("results: %s" % args.output)


if __name__ == "__main__":
    main()
