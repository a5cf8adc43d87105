# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stack as one archive: assembled and verified once on the build host, unpacked by every inference host.

The build host installs a stack's locked closure (module_utils/stack_lock.py) and ROCm's amdsmi into
STACKS/KEY/venv, at the very path the inference hosts use (a virtualenv's scripts and its pyvenv.cfg name their own
absolute path), checks that it imports as a ROCm build, and packs the directory, less the host's own records, into
ARCHIVES/KEY-SHA256PREFIX.tar.zst with KEY.json beside it (file, sha256, size). An inference host downloads that
file from the artifact store into a hidden file beside the stacks, checks its sha256 before anything is unpacked,
unpacks it into a hidden staging directory, writes it to disk and publishes it with one rename: a stack directory
is there whole or not at all. The verification (verify()) then writes STACKS/KEY/.verified, which alone makes a
stack switchable.

zstd and not Python's tarfile: tarfile reads zstd only from Python 3.14; gzip unpacks the stack 2.3x slower and xz 2.7x
(BENCHMARKS.md, "Stack install"). tar and zstd run as commands.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil
import subprocess
import time

from ansible.module_utils.six.moves.http_client import HTTPException
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.instinct.stack.plugins.module_utils.stack_lock import sha256 as sha256_file

SUFFIX = ".tar.zst"
RECORD = ".verified"
# The build host's mark of a stack it assembled in place and packed: {"sha256": the archive's}. Like the record it
# is the host's own, never in an archive.
ASSEMBLED = ".assembled"
HOST_ONLY = (RECORD, ASSEMBLED)
LOCK_FILE = "stack-lock.txt"
BLOCK = 1 << 20
TIMEOUT = 60
# Levels 1 and 3 pack the fixtures' 2.1 GB stack in about the same time on two cores, 3 is 14% smaller; 9 takes 2.7x as
# long for 12% less (BENCHMARKS.md, "Stack install").
ZSTD_LEVEL = 3

# What a stack must show in its own interpreter: torch built for HIP, vLLM's platform (found through amdsmi), and
# torchvision's HIP operators. One JSON line.
CHECK_CODE = (
    "import json, importlib.metadata as m, torch, triton, vllm\n"
    "from vllm.platforms import current_platform as p\n"
    "import torchvision\n"
    "print(json.dumps({'torch': torch.__version__, 'hip': torch.version.hip, 'gpu': torch.cuda.is_available(),"
    " 'triton': triton.__version__, 'vllm': vllm.__version__, 'platform': p.device_name or 'unspecified',"
    " 'amdsmi': m.version('amdsmi'), 'torchvision': m.version('torchvision'),"
    " 'torchvision_hip_ops': torch._C._dispatch_has_kernel_for_dispatch_key('torchvision::nms', 'CUDA')}))\n"
)


class ArchiveError(Exception):
    pass


def archive_name(key, digest):
    """Content-addressed: a stack packed again with other bytes gets another name, so no host reads a mix."""
    return "%s-%s%s" % (key, digest[:16], SUFFIX)


def info_path(archive_dir, key):
    return os.path.join(archive_dir, key + ".json")


def read_published(archive_dir, key):
    """The published archive of key as {"key", "file", "sha256", "size", "path"}, or None (also when its file is
    gone or of another size: packed again)."""
    try:
        with open(info_path(archive_dir, key)) as handle:
            info = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    path = os.path.join(archive_dir, info.get("file", ""))
    if not info.get("file") or not os.path.isfile(path) or os.path.getsize(path) != info.get("size"):
        return None
    info["path"] = path
    return info


def _run(runner, argv, what, env=None):
    proc = runner(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, env=env)
    if proc.returncode != 0:
        raise ArchiveError("%s failed (%s, exit %d):\n%s" % (what, argv[0], proc.returncode, _tail(proc.stdout)))
    return proc.stdout


def _tail(text, lines=25):
    return "\n".join((text or "").splitlines()[-lines:])


def _write_json(path, data):
    """data as JSON in path, on disk before it is renamed into place."""
    partial = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".partial")
    with open(partial, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(partial, 0o644)
    os.rename(partial, path)
    _fsync_dir(os.path.dirname(path))


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_stack(stack_dir, runner=subprocess.run):
    """What the stack's own interpreter reports (CHECK_CODE), as a dict; ArchiveError when it cannot say."""
    python = os.path.join(stack_dir, "venv", "bin", "python")
    out = _run(runner, [python, "-c", CHECK_CODE], "the stack's check (%s -c ...)" % python)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ArchiveError("the stack's check printed no result:\n%s" % _tail(out)) from None


def problems(found, platform=True, gpu=False):
    """What the check found wrong: torch.version.hip unset, torchvision without HIP operators, and with platform
    vLLM's platform other than rocm (it needs a loaded driver, so not asked of a build host), with gpu no GPU."""
    wrong = []
    if not found.get("hip"):
        wrong.append("torch.version.hip is not set (not a ROCm build of torch)")
    if not found.get("torchvision_hip_ops"):
        wrong.append("torchvision has no HIP kernel for nms")
    if platform and found.get("platform") != "rocm":
        wrong.append("vLLM detects the platform %r, not rocm (through amdsmi)" % found.get("platform"))
    if gpu and not found.get("gpu"):
        wrong.append("torch.cuda.is_available() is false where /dev/kfd exists")
    return wrong


def assemble(
    stack_dir, lock_file, pip_args, amdsmi_src, python="python3", compile_bytecode=True, runner=subprocess.run
):
    """Install the lock's closure and ROCm's amdsmi into stack_dir/venv (stack_dir made anew) with pip."""
    if os.path.lexists(stack_dir):
        shutil.rmtree(stack_dir)
    os.makedirs(stack_dir, 0o755)
    lock = os.path.join(stack_dir, LOCK_FILE)
    shutil.copyfile(lock_file, lock)
    os.chmod(lock, 0o644)
    venv = os.path.join(stack_dir, "venv")
    _run(runner, [python, "-m", "venv", venv], "creating the stack's virtualenv")
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    pip += [] if compile_bytecode else ["--no-compile"]
    # Exactly the locked files, each checked against its sha256; --no-deps: the lock is the whole closure.
    argv = pip + list(pip_args) + ["--require-hashes", "--no-deps", "--only-binary=:all:", "-r", lock]
    _run(runner, argv, "installing the locked closure")
    if not os.path.isdir(amdsmi_src):
        raise ArchiveError(
            '%s is missing: without the amdsmi package vLLM detects no platform and `vllm serve` fails with "Failed '
            'to infer device type". Install amd-smi-lib (the rocm meta package brings it) or point vllm_amdsmi_src '
            "at ROCm's share/amd_smi" % amdsmi_src
        )
    # pip may build in the source tree: a copy, so ROCm's own stays as its package installed it; removed after.
    copy = os.path.join(stack_dir, ".amd_smi")
    shutil.copytree(amdsmi_src, copy, symlinks=True)
    try:
        _run(runner, pip + list(pip_args) + [copy], "installing amdsmi into the stack's virtualenv")
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def pack(stack_dir, archive_dir, key, runner=subprocess.run):
    """Pack stack_dir (less HOST_ONLY) into archive_dir as a content-addressed archive and publish KEY.json; the
    info dict. Names sorted and owners numeric, so the same tree packs to the same bytes; modification times kept,
    since the bytecode in __pycache__ is checked against its source's."""
    if not os.path.isdir(archive_dir):
        os.makedirs(archive_dir, 0o755)
    partial = os.path.join(archive_dir, ".%s%s.partial" % (key, SUFFIX))
    argv = ["tar", "--create", "--file", partial, "--directory", stack_dir, "--sort=name", "--numeric-owner"]
    argv += ["--owner=0", "--group=0"]
    argv += ["--exclude=./%s" % name for name in HOST_ONLY]
    argv += ["--use-compress-program", "zstd -T0 -%d" % ZSTD_LEVEL, "."]
    try:
        _run(runner, argv, "packing the stack")
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        digest = sha256_file(partial)
        name = archive_name(key, digest)
        size = os.path.getsize(partial)
        os.chmod(partial, 0o644)
        os.rename(partial, os.path.join(archive_dir, name))
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    previous = read_published(archive_dir, key)
    info = {"key": key, "file": name, "sha256": digest, "size": size}
    _write_json(info_path(archive_dir, key), info)
    if previous and previous["file"] != name:  # packed again with other bytes: the old name serves nobody now
        os.unlink(previous["path"])
    return read_published(archive_dir, key)


def read_mark(stack_dir):
    """The build host's ASSEMBLED mark of stack_dir ({"sha256": ..., "file": ...}), or None."""
    try:
        with open(os.path.join(stack_dir, ASSEMBLED)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def build(
    stacks_dir,
    key,
    archive_dir,
    lock_file,
    pip_args=(),
    amdsmi_src="/opt/rocm/share/amd_smi",
    python="python3",
    compile_bytecode=True,
    pack_archive=True,
    check_mode=False,
    runner=subprocess.run,
):
    """On the build host: the published archive of key, assembling, checking and packing the stack first when there
    is none. With pack_archive false (no other host needs the stack) the stack is assembled in place and marked, and
    no archive is made; a later call that packs takes that assembly as it is. A result dict: changed, assembled
    (installed here by this call), archive (the info, or None), check."""
    published = read_published(archive_dir, key)
    if published:
        return {"changed": False, "assembled": False, "archive": published, "check": None}
    stack_dir = os.path.join(stacks_dir, key)
    # A stack this host verified (it is an inference host too) or assembled whole (its mark) is packed as it is;
    # anything else under the key is what an interrupted assembly left, made anew.
    verified_here = os.path.isfile(os.path.join(stack_dir, RECORD))
    in_place = verified_here or read_mark(stack_dir) is not None
    if in_place and not pack_archive:
        return {"changed": False, "assembled": False, "archive": None, "check": None}
    if check_mode:
        return {"changed": True, "assembled": False, "archive": None, "check": None}
    timings = {}
    assembled = not in_place
    if assembled:
        start = time.time()
        assemble(stack_dir, lock_file, pip_args, amdsmi_src, python, compile_bytecode, runner)
        timings["assemble"] = round(time.time() - start, 1)
    found = check_stack(stack_dir, runner)
    wrong = problems(found, platform=False)
    if wrong:
        raise ArchiveError(
            "the stack %s assembled in %s is not a ROCm stack: %s (%s); nothing was published"
            % (key, stack_dir, "; ".join(wrong), json.dumps(found, sort_keys=True))
        )
    info = None
    if pack_archive:
        start = time.time()
        info = pack(stack_dir, archive_dir, key, runner)
        timings["pack"] = round(time.time() - start, 1)
    if not verified_here:
        if assembled:
            # On disk before the mark that lets this host take the stack without downloading it.
            _run(runner, ["sync", "--file-system", stack_dir], "writing the stack to disk")
        mark = {"sha256": info["sha256"], "file": info["file"]} if info else {"sha256": "", "file": ""}
        _write_json(os.path.join(stack_dir, ASSEMBLED), mark)
    return {"changed": True, "assembled": assembled, "archive": info, "check": found, "seconds": timings}


def _download(url, path, expected, opener):
    """url into path; (bytes, sha256) of what arrived."""
    response = opener(url, timeout=TIMEOUT)
    digest = hashlib.sha256()
    size = 0
    with open(path, "wb") as handle:
        for block in iter(lambda: response.read(BLOCK), b""):
            handle.write(block)
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def install(url, sha256, stacks_dir, key, check_mode=False, opener=open_url, runner=subprocess.run):
    """Bring stacks_dir/KEY to the archive at url (of sha256): a result dict (changed, source, downloaded, seconds).

    source: "verified" (the host holds the stack with its record: nothing is downloaded), "assembled" (the build
    host's own, assembled in place for this very archive), "archive" (downloaded, checked, unpacked, published).
    A directory of the key without either mark is what a failed verification or an interrupted assembly left: it is
    replaced. ArchiveError names what went wrong; nothing is then published under the key."""
    target = os.path.join(stacks_dir, key)
    if os.path.isfile(os.path.join(target, RECORD)):
        return {"changed": False, "source": "verified", "downloaded": 0, "path": target}
    mark = read_mark(target) or {}
    if mark.get("sha256") == sha256:
        return {"changed": False, "source": "assembled", "downloaded": 0, "path": target}
    if not sha256:
        raise ArchiveError(
            "no archive of the stack %s was published and this host has no assembly of it in place: the build host "
            "packs one when a host other than it needs the stack; run the rollout again with this host in it" % key
        )
    if check_mode:
        return {"changed": True, "source": "archive", "downloaded": 0, "path": target}
    if not os.path.isdir(stacks_dir):
        os.makedirs(stacks_dir, 0o755)
    archive = os.path.join(stacks_dir, ".%s%s.partial" % (key, SUFFIX))
    staging = os.path.join(stacks_dir, ".%s.partial" % key)
    timings = {}
    try:
        start = time.time()
        try:
            size, digest = _download(url, archive, sha256, opener)
        except HTTPError as exc:
            raise ArchiveError("downloading %s failed: HTTP %s" % (url, exc.code)) from None
        except (URLError, OSError, HTTPException) as exc:
            raise ArchiveError("downloading %s failed: %r" % (url, exc)) from None
        timings["download"] = round(time.time() - start, 1)
        if digest != sha256:
            raise ArchiveError(
                "the stack archive %s (%d bytes) has the sha256 %s, not the %s the build host recorded for it: "
                "the store's copy is damaged or was changed, and nothing was unpacked. Remove it from the build "
                "host's store and rerun: the build host packs it again from its stack." % (url, size, digest, sha256)
            )
        start = time.time()
        for leftover in (staging, target):
            if os.path.lexists(leftover):
                shutil.rmtree(leftover)
        os.makedirs(staging, 0o755)
        _run(runner, ["tar", "--extract", "--zstd", "--file", archive, "--directory", staging], "unpacking " + url)
        if not os.path.isfile(os.path.join(staging, "venv", "bin", "python")):
            raise ArchiveError("the stack archive %s holds no venv/bin/python" % url)
        # On disk before the rename that publishes it: a power cut leaves the whole stack or none.
        _run(runner, ["sync", "--file-system", staging], "writing the stack to disk")
        os.chmod(staging, 0o755)  # noqa: S103 - a stack is programs and libraries every user runs, no secret
        os.rename(staging, target)
        _fsync_dir(stacks_dir)
        timings["unpack"] = round(time.time() - start, 1)
    finally:
        for leftover in (archive, staging):
            if os.path.isdir(leftover):
                shutil.rmtree(leftover, ignore_errors=True)
            elif os.path.lexists(leftover):
                os.unlink(leftover)
    return {"changed": True, "source": "archive", "downloaded": size, "path": target, "seconds": timings}


def record(stack_dir, found, data, runner=subprocess.run):
    """Write stack_dir/.verified: the check's findings and data, after the stack's files reached the disk (a power
    cut may leave a stack without its record, never a record over files that are not there)."""
    _run(runner, ["sync", "--file-system", stack_dir], "writing the stack to disk")
    content = dict(found)
    content.update(data)
    _write_json(os.path.join(stack_dir, RECORD), content)
    return content
