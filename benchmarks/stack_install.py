"""One stack onto one host, three ways (issue 29): pip installing the locked closure (the vllm role before the stack
archive, and still how the build host assembles a stack), uv installing the same locked files, and the stack archive
(the build host's assembled stack packed once; each inference host downloads, checks and unpacks it).

Every way runs the collection's own code where it has some, reached through ansible-core's collection loader as the
CLI does (plugins/module_utils/stack_archive.py):

- pip: stack_archive.assemble(), the build host's assembly: a new venv, `pip install --require-hashes --no-deps
  --only-binary=:all: -r stack-lock.txt` over the lock's files, then amdsmi from its source;
- uv: the same venv, lock and files with `uv pip install --require-hashes --no-deps -r stack-lock.txt`, then amdsmi
  (uv from the index, into a venv of its own in the work directory);
- archive: stack_archive.pack() of the pip-assembled stack (the build host, once per stack), then per host
  stack_archive.install() from a real HTTP server on the loopback: download, sha256, unpack beside, sync, one rename;
- unpack: `tar --extract --zstd` of the same archive into an empty directory and a sync, nothing else: the limit the
  issue's target is stated against (a host's install at most 2x the time to unpack the same bytes).

With --formats, the last run's stack is also packed once with each compressor in FORMATS (pack time, size, unpack
time and a sync): why the archive is zstd at level 3 (plugins/module_utils/stack_archive.py).

Bytecode as the role's default (vllm_stack_pip_compile: true) unless --no-compile. The stack's own check (importing
torch and vLLM in the new venv) is the same on every way and is not timed. All files on one file system (--workdir):
the stack's absolute path is the same for every way, as on the hosts. Where the kernel lets it, the page cache is
dropped before each timed step (the result says whether it was).

The inputs are a stack lock and the directories holding its files, as the build host has them after a rollout
(/var/cache/instinct-stack/locks/KEY/stack-lock.txt, the wheel cache and the closure's downloaded wheels):

    .venv/bin/python -m benchmarks.stack_install --lock LOCK --find-links DIR [--find-links DIR ...] \
        [--repeat 3] [--workdir build/bench-stack-install] [--no-compile] [--formats]

Results go to stdout and to benchmarks/results/stack-install-DATE.json and .txt. The work directory is removed at
the end (also on Ctrl-C and SIGTERM) unless --keep.
"""

import argparse
import functools
import http.server
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from instinct_stack.collection import collection_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
# The amdsmi source the fixture ROCm ships (molecule/shared/mirror/sources/amd_smi): installed after the closure by
# every way, as the role installs ROCm's own.
AMDSMI_SRC = os.path.join(ROOT, "molecule", "shared", "mirror", "sources", "amd_smi")
KEY = "bench0000000000000"


def run(argv, **kwargs):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kwargs)  # noqa: S603


def drop_caches():
    """Write back and drop the page cache; False where this kernel or container does not allow it."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


def timed(function, *args, **kwargs):
    start = time.monotonic()
    result = function(*args, **kwargs)
    return round(time.monotonic() - start, 2), result


def tree_bytes(path):
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(top, name)
            if not os.path.islink(full):
                total += os.path.getsize(full)
    return total


def prepare(args, work):
    """The build backend amdsmi's source asks for, and uv: both from the index, once, untimed."""
    backend = os.path.join(work, "backend")
    run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--dest", backend, "setuptools", "wheel"]
    )
    uv_venv = os.path.join(work, "uv-venv")
    run([sys.executable, "-m", "venv", uv_venv])
    run([os.path.join(uv_venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check", "uv"])
    uv = os.path.join(uv_venv, "bin", "uv")
    version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=True).stdout.strip()  # noqa: S603
    links = []
    for directory in list(args.find_links) + [backend]:
        links += ["--find-links", os.path.abspath(directory)]
    return links, uv, version


def install_with_uv(stack_dir, lock, links, uv, compile_bytecode):
    """The pip way's steps with uv: a new venv, the locked closure, amdsmi from a copy of its source."""
    shutil.rmtree(stack_dir, ignore_errors=True)
    os.makedirs(stack_dir)
    shutil.copyfile(lock, os.path.join(stack_dir, "stack-lock.txt"))
    venv = os.path.join(stack_dir, "venv")
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    common = [uv, "pip", "install", "-q", "--python", os.path.join(venv, "bin", "python"), "--no-index"] + links
    common += ["--compile-bytecode"] if compile_bytecode else []
    run(common + ["--require-hashes", "--no-deps", "--only-binary", ":all:", "-r", lock])
    copy = os.path.join(stack_dir, ".amd_smi")
    shutil.copytree(AMDSMI_SRC, copy, symlinks=True)
    try:
        run(common + [copy])
    finally:
        shutil.rmtree(copy, ignore_errors=True)


class Store:
    """The archive directory over HTTP on the loopback, from a thread (http.server; one client at a time here)."""

    def __init__(self, directory):
        handler = functools.partial(QuietHandler, directory=directory)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def unpack_only(archive, target):
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    run(["tar", "--extract", "--zstd", "--file", archive, "--directory", target])
    run(["sync", "--file-system", target])


# Each compressor as tar runs it: (name, compress program, decompress program). gzip is single-threaded (the
# distribution's); xz at its fastest level, since its default takes minutes for a stack on two cores.
FORMATS = (
    ("zstd -1", "zstd -T0 -1", "zstd -d"),
    ("zstd -3 (the archive's)", "zstd -T0 -3", "zstd -d"),
    ("zstd -9", "zstd -T0 -9", "zstd -d"),
    ("gzip -6", "gzip -6", "gzip -d"),
    ("xz -1", "xz -T0 -1", "xz -d -T0"),
)


def unpack_and_sync(extract, target):
    run(extract)
    run(["sync", "--file-system", target])


def compare_formats(stack_dir, work):
    """Pack stack_dir with each of FORMATS and unpack it again: [{name, pack, bytes, unpack}], one run each."""
    rows = []
    archive = os.path.join(work, "format.tar")
    target = os.path.join(work, "format-unpacked")
    for name, compress, decompress in FORMATS:
        drop_caches()
        create = ["tar", "--create", "--file", archive, "--directory", stack_dir, "--use-compress-program", compress]
        pack_seconds = timed(run, create + ["."])[0]
        size = os.path.getsize(archive)
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        drop_caches()
        extract = ["tar", "--extract", "--file", archive, "--directory", target, "--use-compress-program", decompress]
        unpack_seconds = timed(unpack_and_sync, extract, target)[0]
        rows.append({"name": name, "pack": pack_seconds, "bytes": size, "unpack": unpack_seconds})
        print("  %-24s pack %6.1f s  %6.2f GB  unpack %6.1f s" % (name, pack_seconds, size / 1e9, unpack_seconds))
        os.unlink(archive)
        shutil.rmtree(target)
    return rows


def summary(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "runs": values}


def measure(args, work):
    stack_archive = collection_module("stack_archive")
    links, uv, uv_version = prepare(args, work)
    stacks = os.path.join(work, "stacks")
    stack_dir = os.path.join(stacks, KEY)
    archives = os.path.join(work, "store")
    times = {way: [] for way in ("pip", "uv", "pack", "archive", "download", "unpack_in_install", "unpack")}
    cache_dropped = True
    info = None
    for repeat in range(args.repeat):
        print("run %d of %d" % (repeat + 1, args.repeat), flush=True)
        cache_dropped &= drop_caches()
        seconds = timed(install_with_uv, stack_dir, args.lock, links, uv, args.compile)[0]
        times["uv"].append(seconds)
        print("  uv      %7.1f s" % seconds, flush=True)
        cache_dropped &= drop_caches()
        seconds = timed(stack_archive.assemble, stack_dir, args.lock, links, AMDSMI_SRC, sys.executable, args.compile)[
            0
        ]
        times["pip"].append(seconds)
        print("  pip     %7.1f s" % seconds, flush=True)
        stack_bytes = tree_bytes(stack_dir)
        shutil.rmtree(archives, ignore_errors=True)
        cache_dropped &= drop_caches()
        seconds, info = timed(stack_archive.pack, stack_dir, archives, KEY)
        times["pack"].append(seconds)
        print("  pack    %7.1f s (%d bytes from %d)" % (seconds, info["size"], stack_bytes), flush=True)
        shutil.rmtree(stack_dir)
        store = Store(archives)
        try:
            cache_dropped &= drop_caches()
            seconds, result = timed(
                stack_archive.install, "%s/%s" % (store.url, info["file"]), info["sha256"], stacks, KEY
            )
        finally:
            store.close()
        times["archive"].append(seconds)
        times["download"].append(result["seconds"]["download"])
        times["unpack_in_install"].append(result["seconds"]["unpack"])
        print(
            "  archive %7.1f s (download and sha256 %.1f s, unpack %.1f s)"
            % ((seconds,) + tuple(result["seconds"][step] for step in ("download", "unpack"))),
            flush=True,
        )
        cache_dropped &= drop_caches()
        seconds = timed(unpack_only, info["path"], os.path.join(work, "unpacked"))[0]
        times["unpack"].append(seconds)
        print("  unpack  %7.1f s" % seconds, flush=True)
        shutil.rmtree(os.path.join(work, "unpacked"))
    formats = compare_formats(stack_dir, work) if args.formats else []
    with open(args.lock) as handle:
        locked = sum(1 for line in handle if line.strip() and not line.startswith("#"))
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": "%s, %d cores, %s" % (platform.node(), os.cpu_count(), platform.platform()),
        "command": " ".join(["python -m benchmarks.stack_install"] + sys.argv[1:]),
        "uv": uv_version,
        "pip": subprocess.run(  # noqa: S603
            [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True
        ).stdout.split(" from ", maxsplit=1)[0],
        "compile_bytecode": args.compile,
        "page_cache_dropped": cache_dropped,
        "locked_files": locked,
        "stack_bytes": stack_bytes,
        "archive_bytes": info["size"],
        "seconds": {way: summary(values) for way, values in times.items()},
        "formats": formats,
    }


def table(result):
    s = result["seconds"]
    lines = [
        "stack install, %d locked files, stack %.2f GB, archive %.2f GB (zstd), bytecode %s, page cache %s"
        % (
            result["locked_files"],
            result["stack_bytes"] / 1e9,
            result["archive_bytes"] / 1e9,
            "compiled" if result["compile_bytecode"] else "not compiled",
            "dropped before each step" if result["page_cache_dropped"] else "NOT dropped (not allowed here)",
        ),
        "%s; %s; %s" % (result["date"], result["machine"], result["command"]),
        "%-44s %8s %8s %8s" % ("way (seconds over %d runs)" % len(s["pip"]["runs"]), "min", "median", "max"),
    ]
    names = [
        ("pip", "pip install of the lock (%s)" % result["pip"]),
        ("uv", "uv pip install of the lock (%s)" % result["uv"]),
        ("pack", "pack once on the build host (zstd)"),
        ("archive", "stack_install: download, sha256, unpack"),
        ("download", "  of which download and sha256"),
        ("unpack_in_install", "  of which unpack, sync, rename"),
        ("unpack", "tar --extract --zstd alone (the limit)"),
    ]
    for way, label in names:
        lines.append("%-44s %8.1f %8.1f %8.1f" % ((label,) + tuple(s[way][k] for k in ("min", "median", "max"))))
    lines.append(
        "per-host install against the limit: %.2fx (median archive / median unpack); pip %.1fx and uv %.1fx slower "
        "than the archive"
        % (
            s["archive"]["median"] / s["unpack"]["median"],
            s["pip"]["median"] / s["archive"]["median"],
            s["uv"]["median"] / s["archive"]["median"],
        )
    )
    if result.get("formats"):
        lines.append("each compressor, one run on the same stack (tar; unpack includes a sync):")
        lines.append("%-44s %8s %8s %8s" % ("format", "pack s", "GB", "unpack s"))
        for row in result["formats"]:
            lines.append("%-44s %8.1f %8.2f %8.1f" % (row["name"], row["pack"], row["bytes"] / 1e9, row["unpack"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--lock", required=True, help="a stack lock (stack-lock.txt)")
    parser.add_argument("--find-links", action="append", required=True, help="a directory holding the lock's files")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench-stack-install"))
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="no bytecode (the default compiles)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--formats", action="store_true", help="also pack and unpack the stack with each of FORMATS")
    args = parser.parse_args(argv)
    args.lock = os.path.abspath(args.lock)
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        result = measure(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = table(result)
    print(text)
    os.makedirs(RESULTS, exist_ok=True)
    stem = os.path.join(RESULTS, "stack-install-%s" % time.strftime("%Y%m%d-%H%M", time.gmtime()))
    with open(stem + ".json", "w") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
    with open(stem + ".txt", "w") as handle:
        handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
