"""Gather everything one air-gapped rollout needs into a directory, and check it later.

`instinct-stack mirror build CONFIG DEST` runs on a connected machine and uses the maintained tools
for each kind of content: apt (its own download and dependency resolution, in a private apt root that
leaves the machine's apt untouched) for the ROCm and amdgpu packages, `git clone --mirror` for the
sources and every submodule they reference, `pip download` for the wheelhouse, and the files the source
builds would download at build time (Triton's prebuilt LLVM, PyTorch's AOTriton), named from the mirrored
sources at their pinned commits. The apt indexes are regenerated with apt-ftparchive and signed with the
mirror's own key. A manifest lists every file with its SHA-256; `instinct-stack mirror verify DEST` checks
it and names any build-time download the mirrored sources need that the mirror lacks.

Layout (what the roles expect under instinct_mirror_url):
    rocm/rocm.gpg.key, rocm/apt/ROCM/dists/SUITE, amdgpu/AMDGPU/ubuntu/dists/SUITE,
    git/HOST/PATH.git (upstream URLs rewritten with git's url.<base>.insteadOf), wheels/,
    files/HOST/PATH (build-time downloads), manifest.json
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from instinct_stack.collection import BadInput, collection_module

mirror_path = collection_module("mirror_layout").mirror_path
mirror_file_path = collection_module("mirror_layout").mirror_file_path
build_downloads = collection_module("build_downloads")
git_config_env = collection_module("mirror_layout").git_config_env
sha256 = collection_module("stack_lock").sha256

MANIFEST = "manifest.json"


class MirrorError(Exception):
    pass


def run(argv, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise MirrorError(
            "%s failed (%d): %s" % (" ".join(argv[:3]), proc.returncode, (proc.stderr or proc.stdout)[-2000:])
        )
    return proc.stdout


def load_config(path):
    import yaml  # ansible-core's dependency

    try:
        with open(path) as handle:
            config = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        raise BadInput("mirror configuration %s: %s" % (path, exc)) from exc
    if not isinstance(config, dict):
        raise BadInput("mirror configuration %s: expected a mapping of settings" % path)
    for key in ("rocm_version", "amdgpu_version", "suite", "repo_base_url", "packages"):
        if key not in config:
            raise BadInput("%s: missing %r" % (path, key))
    config.setdefault("key_url", config["repo_base_url"].rstrip("/") + "/rocm/rocm.gpg.key")
    config.setdefault("git", {})
    # url.<replacement>.insteadOf rules for fetching upstream (a proxy or another mirror in front of github.com);
    # repositories are still stored under their upstream URL's git/HOST/PATH.git.
    config.setdefault("git_rewrites", {})
    config.setdefault("wheels", [])
    # "name==version" of what the stack builds from source (torch, torchvision, triton): the wheelhouse holds the
    # closure around them, never a prebuilt copy (PyPI's torch is a CUDA build).
    config.setdefault("built_by_the_stack", [])
    config.setdefault("pip_args", [])
    # URL prefix -> replacement for fetching build-time downloads (a proxy, or another mirror's files/); each file is
    # still stored under its upstream URL's files/HOST/PATH.
    config.setdefault("download_rewrites", {})
    config.update(download_settings(config))
    return config


def download_settings(source):
    """What decides the build-time downloads, from a configuration or a manifest (one written before they existed
    included), with the defaults filled in."""
    return {
        # The archs whose AOTriton kernel images the mirror holds: every Instinct arch of the collection's table.
        "gpu_archs": source.get("gpu_archs", sorted(collection_module("gfx_targets").GFX_ARCHS)),
        "triton_llvm_system_suffix": source.get("triton_llvm_system_suffix", build_downloads.TRITON_LLVM_SYSTEM_SUFFIX),
        # false for a cluster that builds PyTorch with pytorch_aotriton: false (no flash attention): no AOTriton files.
        "aotriton": source.get("aotriton", True),
    }


def repo_paths(config):
    return {
        "rocm": "rocm/apt/%s" % config["rocm_version"],
        "amdgpu": "amdgpu/%s/ubuntu" % config["amdgpu_version"],
    }


def apt_packages(config, dest, work):
    """Download the requested packages and their dependencies that the ROCm/amdgpu repositories serve."""
    base = config["repo_base_url"].rstrip("/")
    root = work / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    key = root / "upstream.asc"
    with urllib.request.urlopen(config["key_url"], timeout=60) as response:  # noqa: S310 - the configured key URL
        key.write_bytes(response.read())
    paths = repo_paths(config)
    sources = "".join(
        "deb [arch=amd64 signed-by=%s] %s/%s %s main\n" % (key, base, path, config["suite"]) for path in paths.values()
    )
    (root / "etc" / "sources.list").write_text(sources)
    options = [
        "-o",
        "Dir::Etc::SourceList=%s" % (root / "etc" / "sources.list"),
        "-o",
        "Dir::Etc::SourceParts=%s" % (root / "etc" / "sources.list.d"),
        "-o",
        "Dir::Etc::Preferences=%s" % (root / "etc" / "preferences"),
        "-o",
        "Dir::Etc::PreferencesParts=%s" % (root / "etc" / "preferences.d"),
        "-o",
        "Dir::State::Lists=%s" % (root / "lists"),
        "-o",
        "Dir::Cache=%s" % (root / "cache"),
        "-o",
        "APT::Architecture=amd64",
        "-o",
        "APT::Architectures=amd64",
        "-o",
        "Debug::NoLocking=1",
    ]
    run(["apt-get", *options, "update"])
    # Only the ROCm and amdgpu repositories are configured in this apt root, so every package it knows is theirs.
    served = {
        line.split(": ", 1)[1]
        for line in run(["apt-cache", *options, "dumpavail"]).splitlines()
        if line.startswith("Package: ")
    }
    closure = dependency_closure(options, config["packages"])
    missing = sorted(set(config["packages"]) - served)
    if missing:
        raise MirrorError("the repositories at %s serve no package named %s" % (base, ", ".join(missing)))
    wanted = sorted(name for name in closure if name in served)
    # apt says where each file comes from, which tells the two repositories apart.
    origin = {}
    for line in run(["apt-get", *options, "--print-uris", "download", *wanted]).splitlines():
        uri, filename = line.split()[0].strip("'"), line.split()[1]
        origin[filename] = next(name for name, path in paths.items() if "/%s/" % path in uri)
    downloads = work / "debs"
    downloads.mkdir()
    run(["apt-get", *options, "download", *wanted], cwd=downloads)
    result = {}
    for name, path in paths.items():
        pool = dest / path / "pool" / "main"
        pool.mkdir(parents=True, exist_ok=True)
        for deb in downloads.iterdir():
            if origin.get(deb.name) == name:
                # apt-get download keeps the epoch as "1%3a"; pools name files without it, as upstream does.
                shutil.copy2(deb, pool / re.sub(r"_\d+%3a", "_", deb.name))
        result[name] = sorted(p.name for p in pool.iterdir())
    return result


def dependency_closure(apt_options, packages):
    """The packages and everything they depend on, recursively, as apt resolves it (recommends left out)."""
    depends = run(
        [
            "apt-cache",
            *apt_options,
            "depends",
            "--recurse",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            *packages,
        ]
    )
    return {line.strip() for line in depends.splitlines() if line and not line.startswith(" ") and "<" not in line}


def write_signed_index(repo, suite, pool, gpg_argv, origin="instinct.stack mirror"):
    """dists/SUITE/main/binary-amd64/Packages for the .debs under repo/pool, and a Release signed as InRelease
    and Release.gpg with gpg_argv (gpg with its home directory and --local-user)."""
    repo = Path(repo)
    binary = repo / "dists" / suite / "main" / "binary-amd64"
    binary.mkdir(parents=True, exist_ok=True)
    (binary / "Packages").write_text(run(["apt-ftparchive", "packages", pool], cwd=repo))
    dist = repo / "dists" / suite
    release = run(
        [
            "apt-ftparchive",
            "-o",
            "APT::FTPArchive::Release::Origin=" + origin,
            "-o",
            "APT::FTPArchive::Release::Suite=" + suite,
            "-o",
            "APT::FTPArchive::Release::Codename=" + suite,
            "-o",
            "APT::FTPArchive::Release::Components=main",
            "-o",
            "APT::FTPArchive::Release::Architectures=amd64",
            "release",
            ".",
        ],
        cwd=dist,
    )
    (dist / "Release").write_text(release)
    signer = [*gpg_argv, "--batch", "--yes"]
    run([*signer, "--clearsign", "-o", "InRelease", "Release"], cwd=dist)
    run([*signer, "--armor", "--detach-sign", "-o", "Release.gpg", "Release"], cwd=dist)


def new_signing_key(gnupg, uid):
    """A passphrase-less ed25519 signing key in the gpg home gnupg; returns (gpg argv, armored public key)."""
    gnupg.mkdir(mode=0o700, parents=True)
    run(
        [
            "gpg",
            "--homedir",
            str(gnupg),
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            uid,
            "ed25519",
            "sign",
            "never",
        ]
    )
    return (
        ["gpg", "--homedir", str(gnupg), "--local-user", uid],
        run(["gpg", "--homedir", str(gnupg), "--armor", "--export", uid]),
    )


def sign_repositories(config, dest, work):
    """Regenerate Packages/Release for each repository and sign them with a key made for this mirror."""
    gpg_argv, public_key = new_signing_key(work / "gnupg", "instinct.stack mirror %s" % dest.name)
    (dest / "rocm").mkdir(exist_ok=True)
    (dest / "rocm" / "rocm.gpg.key").write_text(public_key)
    for path in repo_paths(config).values():
        write_signed_index(dest / path, config["suite"], "pool", gpg_argv)


def git_file(bare, commit, path):
    """A file of a mirrored repository at a commit, or None when it has none."""
    shown = subprocess.run(
        ["git", "show", "%s:%s" % (commit, path)], cwd=bare, capture_output=True, text=True, check=False
    )
    return shown.stdout if shown.returncode == 0 else None


def git_repositories(config, dest, work):
    """git clone --mirror each source, then every submodule its pinned ref names, recursively."""
    mirrored = {}
    fetch_env = dict(os.environ, **git_config_env(config["git_rewrites"]))

    def mirror(url):
        if url in mirrored:
            return mirrored[url]
        target = dest / mirror_path(url)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            try:
                run(["git", "clone", "--quiet", "--mirror", url, str(target)], env=fetch_env)
            except MirrorError as error:
                raise MirrorError(
                    "cannot mirror %s (git_rewrites: %s): %s" % (url, config["git_rewrites"], error)
                ) from None
        run(["git", "update-server-info"], cwd=target)
        mirrored[url] = target
        return target

    def submodules(url, ref):
        bare = mirror(url)
        gitmodules = git_file(bare, ref, ".gitmodules")
        if gitmodules is None:
            return
        config_lines = run(["git", "config", "-f", "-", "--get-regexp", r"submodule\..*\.(url|path)"], input=gitmodules)
        entries = {}
        for line in config_lines.splitlines():
            key, value = line.split(" ", 1)
            name, field = key[len("submodule.") :].rsplit(".", 1)
            entries.setdefault(name, {})[field] = value
        for entry in entries.values():
            sub_url = (
                urllib.parse.urljoin(url.rstrip("/") + "/", entry["url"])
                if entry["url"].startswith("../")
                else entry["url"]
            )
            tree = run(["git", "ls-tree", ref, entry["path"]], cwd=bare).split()
            if len(tree) >= 3 and tree[1] == "commit":
                submodules(sub_url, tree[2])

    refs = {}
    for name, source in config["git"].items():
        if "ref_from" in source:
            continue
        bare = mirror(source["url"])
        refs[name] = run(["git", "rev-parse", "%s^{commit}" % source["ref"]], cwd=bare).strip()
        submodules(source["url"], refs[name])
    for name, source in config["git"].items():
        if "ref_from" not in source:
            continue
        owner, path = source["ref_from"].split(":", 1)
        pinned = run(["git", "show", "%s:%s" % (refs[owner], path)], cwd=mirror(config["git"][owner]["url"])).strip()
        bare = mirror(source["url"])
        try:
            refs[name] = run(["git", "rev-parse", "%s^{commit}" % pinned], cwd=bare).strip()
        except MirrorError:
            raise MirrorError(
                "%s pins %s commit %s, which %s does not have" % (owner, name, pinned, source["url"])
            ) from None
        submodules(source["url"], refs[name])
    return {
        name: {"commit": commit, "mirror": mirror_path(config["git"][name]["url"])} for name, commit in refs.items()
    }


PLACEHOLDER = "instinct.placeholder"


def needed_downloads(config, dest, refs):
    """{upstream URL: why} for what the mirrored sources download at build time, read at their pinned commits."""
    needed = {}
    for name, ref in sorted(refs.items()):
        bare = dest / ref["mirror"]
        llvm_hash = git_file(bare, ref["commit"], build_downloads.TRITON_LLVM_HASH_FILE)
        if llvm_hash is not None:
            llvm = build_downloads.triton_llvm(llvm_hash, config["triton_llvm_system_suffix"])
            needed[llvm["url"]] = "%s %s: %s" % (name, ref["commit"][:12], build_downloads.TRITON_LLVM_HASH_FILE)
        cmake = git_file(bare, ref["commit"], build_downloads.AOTRITON_CMAKE_FILE) if config["aotriton"] else None
        if cmake is not None:
            try:
                plan = build_downloads.aotriton(cmake, config["rocm_version"], config["gpu_archs"])
            except build_downloads.BuildDownloadError as error:
                raise MirrorError(
                    "%s %s: %s (or set aotriton: false in the mirror's configuration)"
                    % (name, ref["commit"][:12], error)
                ) from None
            for url in plan["urls"]:
                needed[url] = "%s %s: %s" % (name, ref["commit"][:12], build_downloads.AOTRITON_CMAKE_FILE)
    return needed


def fetch_downloads(config, dest, needed):
    """Each build-time download into files/HOST/PATH, fetched through download_rewrites."""
    for url in sorted(needed):
        source = url
        for prefix, replacement in sorted(config["download_rewrites"].items(), key=lambda item: -len(item[0])):
            if url.startswith(prefix):
                source = replacement + url[len(prefix) :]
                break
        target = dest / mirror_file_path(url)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        try:
            with urllib.request.urlopen(source, timeout=120) as response, open(partial, "wb") as handle:  # noqa: S310
                shutil.copyfileobj(response, handle)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise MirrorError(
                "cannot fetch %s (needed by %s) from %s: %s" % (url, needed[url], source, error)
            ) from None
        partial.rename(target)
    return {url: mirror_file_path(url) for url in sorted(needed)}


def placeholder_wheels(built, directory):
    """An empty wheel for each "name==version" the stack builds itself, at version+instinct.placeholder, and the
    requirements that make pip take them. With them on --find-links, pip resolves a closure (timm needs torch and
    torchvision, xgrammar needs triton) around the source builds instead of downloading PyPI's CUDA ones."""
    from wheel.wheelfile import WheelFile  # maintained by the PyPA; writes the RECORD

    pins = []
    for requirement in built:
        name, version = requirement.split("==", 1)
        version = "%s+%s" % (version, PLACEHOLDER)
        stem = "%s-%s" % (re.sub(r"[-_.]+", "_", name), version)
        with WheelFile(str(Path(directory) / ("%s-py3-none-any.whl" % stem)), "w") as wheel:
            wheel.writestr(
                "%s.dist-info/METADATA" % stem, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
            )
            wheel.writestr(
                "%s.dist-info/WHEEL" % stem,
                "Wheel-Version: 1.0\nGenerator: instinct-stack\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            )
        pins.append("%s==%s" % (name, version))
    return pins


def download_wheels(target, requirements, pip_args, built=(), python="python3"):
    """pip download of requirements with their closure into target, wheels only; the stack's own builds stand in
    as placeholders during the resolution and are removed after it."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="instinct-placeholders-") as placeholders:
        pins = placeholder_wheels(built, placeholders)
        extra = ["--find-links", placeholders, *pins] if pins else []
        run(
            [
                python,
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--quiet",
                "--only-binary=:all:",
                "-d",
                str(target),
                *pip_args,
                *extra,
                *requirements,
            ]
        )
    for path in target.glob("*%s*" % PLACEHOLDER):
        path.unlink()
    return sorted(p.name for p in target.iterdir())


def wheelhouse(config, dest):
    if not config["wheels"]:
        return []
    return download_wheels(dest / "wheels", config["wheels"], config["pip_args"], config["built_by_the_stack"])


def write_manifest(dest, summary):
    files = {}
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and p.name != MANIFEST):
        files[str(path.relative_to(dest))] = {"sha256": sha256(path), "size": path.stat().st_size}
    manifest = dict(summary, files=files)
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def build(config_path, dest):
    config = load_config(config_path)
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise BadInput("%s is not empty; build a mirror into a new directory" % dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="instinct-mirror-") as tmp:
        work = Path(tmp)
        debs = apt_packages(config, dest, work)
        sign_repositories(config, dest, work)
        refs = git_repositories(config, dest, work)
        downloads = fetch_downloads(config, dest, needed_downloads(config, dest, refs))
        wheels = wheelhouse(config, dest)
    summary = {
        "rocm_version": config["rocm_version"],
        "amdgpu_version": config["amdgpu_version"],
        "suite": config["suite"],
        "packages": debs,
        "git": refs,
        "wheels": wheels,
        "downloads": downloads,
        **download_settings(config),
    }
    return write_manifest(dest, summary)


def verify(dest):
    """Problems found: files missing, changed, or not in the manifest. Empty when the mirror is intact."""
    dest = Path(dest)
    manifest_path = dest / MANIFEST
    if not manifest_path.is_file():
        return ["%s has no %s" % (dest, MANIFEST)]
    manifest = json.loads(manifest_path.read_text())
    problems = []
    for name, entry in sorted(manifest["files"].items()):
        path = dest / name
        if not path.is_file():
            problems.append("missing: %s" % name)
        elif path.stat().st_size != entry["size"] or sha256(path) != entry["sha256"]:
            problems.append("changed: %s" % name)
    listed = set(manifest["files"])
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and p.name != MANIFEST):
        if str(path.relative_to(dest)) not in listed:
            problems.append("not in the manifest: %s" % path.relative_to(dest))
    # What the mirrored sources download at build time, read again from them: a mirror made before a source pinned
    # a new LLVM, or without the build-time downloads, is named here instead of failing a build on the hosts.
    if manifest.get("git"):
        config = dict(download_settings(manifest), rocm_version=manifest["rocm_version"])
        try:
            needed = needed_downloads(config, dest, manifest["git"])
        except MirrorError as error:
            return problems + ["build-time download: %s" % error]
        for url, why in sorted(needed.items()):
            if not (dest / mirror_file_path(url)).is_file():
                problems.append("missing build-time download: %s (needed by %s)" % (url, why))
    return problems
