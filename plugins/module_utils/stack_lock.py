# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lock of a stack: every wheel of its runtime closure, with its version and sha256.

The build host resolves the closure once (`pip download` of the built wheels, with their dependencies, from the
same index or mirror the hosts use) and writes a requirements file in pip's hash-checking form. Every inference
host installs exactly that file with `pip install --require-hashes --no-deps`, so all hosts hold byte-identical
stacks and a changed file on the index or mirror stops the install instead of slipping in.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

LOCK_FILE = "stack-lock.txt"
LOCK_INFO = "stack-lock.json"
# {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl (PEP 427)
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class LockError(Exception):
    pass


def canonical_name(name):
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_identity(filename):
    """(project name, version) of a wheel file name; LockError for anything that is not a wheel."""
    match = WHEEL_NAME.match(os.path.basename(filename))
    if not match:
        raise LockError(
            "%s is not a wheel: the stack installs wheels only (--only-binary=:all:); build it into the "
            "mirror's wheelhouse or drop the requirement that pulls it" % os.path.basename(filename)
        )
    return canonical_name(match.group("name")), match.group("version")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def packages_from_files(paths):
    """{name: {"version", "sha256", "file"}} for wheel files; a project that appears twice is an error."""
    packages = {}
    for path in sorted(paths):
        name, version = wheel_identity(path)
        if name in packages:
            raise LockError("two wheels of %s in the closure: %s and %s" % (name, packages[name]["file"], path))
        packages[name] = {"version": version, "sha256": sha256(path), "file": os.path.basename(path)}
    return packages


def lock_text(key, packages, python_abi=None):
    """The requirements file: one pinned, hashed line per wheel, sorted, nothing that varies between runs."""
    lines = [
        "# instinct.stack lock of stack %s: the whole runtime closure, one wheel each." % key,
        "# Install with: pip install --require-hashes --no-deps --only-binary=:all: -r %s" % LOCK_FILE,
    ]
    if python_abi:
        # The closure holds binary wheels of one interpreter, platform and C library (module_utils/python_abi.py).
        lines.append("# For the Python ABI %s only." % python_abi)
    for name in sorted(packages):
        entry = packages[name]
        lines.append("%s==%s --hash=sha256:%s" % (name, entry["version"], entry["sha256"]))
    return "\n".join(lines) + "\n"


def read_lock(lock_dir, key):
    """The published lock of key as {"key", "sha256", "packages", "path"}, or None."""
    info_path = os.path.join(lock_dir, key, LOCK_INFO)
    lock_path = os.path.join(lock_dir, key, LOCK_FILE)
    if not (os.path.isfile(info_path) and os.path.isfile(lock_path)):
        return None
    with open(info_path) as handle:
        info = json.load(handle)
    info["path"] = lock_path
    return info


def resolve(python, wheels, pip_args, workdir, runner=subprocess.run):
    """Download the wheels' runtime closure (the wheels themselves included) into workdir; return the files."""
    argv = (
        [
            python,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--no-input",
            "--only-binary=:all:",
            "--dest",
            workdir,
        ]
        + list(pip_args)
        + list(wheels)
    )
    proc = runner(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise LockError(
            "pip could not resolve the stack's runtime closure (is every requirement in the index or the mirror's "
            "wheelhouse?):\n%s" % "\n".join(proc.stdout.splitlines()[-25:])
        )
    return [os.path.join(workdir, name) for name in os.listdir(workdir) if name.endswith((".whl", ".tar.gz", ".zip"))]


def lock(python, wheels, pip_args, lock_dir, key, runner=subprocess.run, conflicting=(), python_abi=None):
    """Publish the lock of key under lock_dir (atomically) unless it exists for these very wheels; return (info,
    changed). A published lock that pins other files of the built wheels (rebuilt since) is resolved again and replaced.

    conflicting names projects that must come from the built wheels only (torch, triton under both its names ...):
    the closure pulling one of them from the index is an error. python_abi, the build host's Python ABI (the
    python's), is recorded in the lock: the closure's binary wheels install on that ABI only.
    """
    published = read_lock(lock_dir, key)
    missing = [wheel for wheel in wheels if not os.path.isfile(wheel)]
    # A lock published without the ABI, or for another (a key made before the ABI was part of it), is made again.
    same_abi = not python_abi or published and published.get("python_abi") == python_abi
    if published and same_abi and (missing or not rebuilt_wheels(published, wheels)):
        return published, False
    if missing:
        raise LockError("the stack's wheels are missing on the build host: %s" % ", ".join(missing))
    if not os.path.isdir(lock_dir):
        os.makedirs(lock_dir)
    staging = tempfile.mkdtemp(prefix=".%s." % key, dir=lock_dir)
    try:
        downloads = os.path.join(staging, "wheels")
        os.makedirs(downloads)
        packages = packages_from_files(resolve(python, wheels, pip_args, downloads, runner))
        built = {}
        for wheel in wheels:
            name, version = wheel_identity(wheel)
            built[name] = wheel
            if packages.get(name, {}).get("sha256") != sha256(wheel):
                raise LockError("pip resolved %s to another file than the built %s" % (name, os.path.basename(wheel)))
        foreign = sorted(
            name
            for name in packages
            if canonical_name(name) in set(map(canonical_name, conflicting)) and name not in built
        )
        if foreign:
            raise LockError(
                "the closure takes %s from the index beside the stack's own builds (%s): a requirement names it, and "
                "the index's build is CUDA's and installs the same modules. Build it under that name (for Triton: "
                "triton_wheel_name) or drop the requirement."
                % (", ".join("%s %s" % (name, packages[name]["file"]) for name in foreign), ", ".join(sorted(built)))
            )
        text = lock_text(key, packages, python_abi)
        shutil.rmtree(downloads)
        with open(os.path.join(staging, LOCK_FILE), "w") as handle:
            handle.write(text)
        info = {"key": key, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "packages": packages}
        if python_abi:
            info["python_abi"] = python_abi
        with open(os.path.join(staging, LOCK_INFO), "w") as handle:
            json.dump(info, handle, indent=2, sort_keys=True)
        os.chmod(staging, 0o755)  # noqa: S103 - a lock is public: it lists files and hashes, no secret
        target = os.path.join(lock_dir, key)
        if published:
            # The lock of wheels rebuilt since: set aside, replaced, then removed.
            os.rename(target, staging + ".replaced")
        os.rename(staging, target)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(staging + ".replaced", ignore_errors=True)
    return read_lock(lock_dir, key), True


def rebuilt_wheels(published, wheels):
    """The built wheels whose file is not the one the published lock pins: a wheel rebuilt under the same key (after
    its cache entry was removed) is not byte-identical, and pip would refuse it for its hash."""
    rebuilt = []
    for wheel in wheels:
        name, _version = wheel_identity(wheel)
        if published["packages"].get(name, {}).get("sha256") != sha256(wheel):
            rebuilt.append(os.path.basename(wheel))
    return rebuilt
