"""Gather everything one air-gapped rollout needs into a directory, and check it later.

`instinct-stack mirror build CONFIG DEST` runs on a connected machine and uses the maintained tools
for each kind of content: apt (its own download and dependency resolution, in a private apt root that
leaves the machine's apt untouched) for the ROCm and amdgpu packages, `git clone --mirror` for the
sources and every submodule they reference, `pip download` for the wheelhouse (once per target Python of `pythons`: the
hosts' CPython version, glibc and machine), and the files the source
builds would download at build time (Triton's prebuilt LLVM, PyTorch's AOTriton), named from the mirrored
sources at their pinned commits and checked against the SHA-256 those sources list (AOTriton's; upstream names none
for the LLVM). The apt indexes are regenerated with apt-ftparchive and signed with the
mirror's own key. The distribution packages a minimal host needs (`distributions`: python3-venv, compilers, git,
and whatever the ROCm packages depend on) come from each distribution's archive the same way: apt resolves them
in a private apt root that holds the distribution and the ROCm/amdgpu repositories together, and the mirror keeps
what the distribution serves, in a repository of its own signed with the same key. A manifest lists every file
with its SHA-256; `instinct-stack mirror verify DEST` checks it and names any build-time download the mirrored
sources need that the mirror lacks or holds unlike its SHA-256, and any requested distribution package its index
does not list. The models (`models`: a Hub repository, its revision and the files to take) are fetched with
huggingface_hub from the Hub or `hub_endpoint`, each file checked against the hash the Hub publishes, into the
layout the hosts pull from; `mirror verify` checks each against its revision's manifest.

Layout (what the roles expect under instinct_mirror_url):
    rocm/rocm.gpg.key, rocm/apt/ROCM/dists/SUITE, amdgpu/AMDGPU/ubuntu/dists/SUITE,
    distribution/NAME/dists/SUITE (NAME: the host's distribution in lower case, debian or ubuntu),
    git/HOST/PATH.git (upstream URLs rewritten with git's url.<base>.insteadOf), wheels/,
    files/HOST/PATH (build-time downloads), models/ORG--NAME/COMMIT/ with models/ORG--NAME/COMMIT.json,
    manifest.json
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instinct_stack.collection import BadInput, collection_module

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.tags import Tag
    from packaging.version import Version

mirror_path = collection_module("mirror_layout").mirror_path
mirror_file_path = collection_module("mirror_layout").mirror_file_path
build_downloads = collection_module("build_downloads")
git_config_env = collection_module("mirror_layout").git_config_env
sha256 = collection_module("stack_lock").sha256
models = collection_module("models")

MANIFEST = "manifest.json"


class MirrorError(Exception):
    pass


def run(argv: Sequence[str], **kwargs: Any) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise MirrorError(
            "%s failed (%d): %s" % (" ".join(argv[:3]), proc.returncode, (proc.stderr or proc.stdout)[-2000:])
        )
    return proc.stdout


def load_config(path: str | Path) -> dict[str, Any]:
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
    config["distributions"] = distribution_settings(path, config.get("distributions", []))
    config["pythons"] = python_settings(path, config.get("pythons", []))
    config["models"] = model_settings(path, config.get("models", []))
    # The Hub the models come from: a site's own Hub or mirror (HF_ENDPOINT), empty for the public one. A token for
    # gated models is read from HF_TOKEN in the environment, never from this file or the command line.
    config.setdefault("hub_endpoint", "")
    return config


def model_settings(path: str | Path, entries: Any) -> list[dict[str, Any]]:
    """The `models` entries of a configuration, checked: each {repo, revision, files, ignore} with the collection's
    defaults (module_utils/models.py), the revision a commit or a branch or tag resolved when the mirror is built."""
    if not isinstance(entries, list):
        raise BadInput("%s: models must be a list of mappings such as {repo: ORG/NAME, revision: COMMIT}" % path)
    checked = []
    for index, entry in enumerate(entries):
        try:
            checked.append(models.check_spec(entry))
        except models.ModelError as exc:
            raise BadInput("%s: models[%d]: %s" % (path, index, exc)) from None
    repos = [entry["repo"] for entry in checked]
    doubled = sorted({repo for repo in repos if repos.count(repo) > 1})
    if doubled:
        raise BadInput("%s: models: %s listed twice; list each repository once" % (path, ", ".join(doubled)))
    return checked


def mirror_models(config: Mapping[str, Any], dest: Path) -> dict[str, dict[str, Any]]:
    """Fetch each model of the configuration into dest/models in the layout the hosts pull from (ORG--NAME/COMMIT
    and its manifest beside it), every file checked against the Hub's hashes; {repo: what was mirrored}."""
    if not config["models"]:
        return {}
    model_hub = collection_module("model_hub")
    root = dest / "models"
    root.mkdir(parents=True, exist_ok=True)
    mirrored = {}
    for spec in config["models"]:
        print("mirror: model %s@%s" % (spec["repo"], spec["revision"]), file=sys.stderr, flush=True)
        try:
            result = model_hub.fetch(
                str(root), spec, endpoint=config["hub_endpoint"] or None, token=os.environ.get("HF_TOKEN") or None
            )
        except models.ModelError as exc:
            raise MirrorError("model %s: %s" % (spec["repo"], exc)) from None
        mirrored[spec["repo"]] = {
            "revision": spec["revision"],
            "commit": result["commit"],
            "files": spec["files"],
            "ignore": spec["ignore"],
            "size": result["size"],
        }
    return mirrored


def model_problems(dest: Path, manifest: Mapping[str, Any]) -> list[str]:
    """Each mirrored model's revision against its own manifest (every file's size and sha256), by name."""
    problems = []
    for repo, entry in sorted((manifest.get("models") or {}).items()):
        root = str(dest / "models")
        path = models.manifest_path(root, repo, entry["commit"])
        try:
            data = models.check_manifest(models.read_json(path), repo, entry["commit"])
        except (OSError, ValueError, models.ModelError) as exc:
            problems.append("model %s@%s: its manifest %s cannot be used: %s" % (repo, entry["commit"], path, exc))
            continue
        directory = models.revision_dir(root, repo, entry["commit"])
        for problem in models.manifest_problems(directory, data):
            problems.append("model %s@%s: %s" % (repo, entry["commit"], problem))
    return problems


# A distribution's name is a directory of the mirror and what a host looks for (ansible_facts.distribution | lower).
DISTRIBUTION_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
# A suite is a directory under dists/.
DISTRIBUTION_SUITE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ABSOLUTE_URL = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$")
DISTRIBUTION_KEYS = {"name", "url", "suite", "keyring", "key_url", "packages", "components"}


def distribution_settings(path: str | Path, entries: Any) -> list[dict[str, Any]]:
    """The `distributions` entries of a configuration, checked, with components defaulting to [main] and a relative
    keyring resolved against the configuration's directory."""
    if not isinstance(entries, list):
        raise BadInput(
            "%s: distributions must be a list of mappings (name, url, suite, keyring or key_url, packages)" % path
        )
    checked, names = [], set()
    for index, entry in enumerate(entries):
        where = "%s: distributions[%d]" % (path, index)
        if not isinstance(entry, dict):
            raise BadInput("%s: expected a mapping (name, url, suite, keyring or key_url, packages)" % where)
        if isinstance(entry.get("name"), str):
            where = "%s (%s)" % (where, entry["name"])
        unknown = sorted(str(key) for key in set(entry) - DISTRIBUTION_KEYS)
        if unknown:
            raise BadInput(
                "%s: unknown key %s (known: %s)" % (where, ", ".join(unknown), ", ".join(sorted(DISTRIBUTION_KEYS)))
            )
        for key in ("name", "url", "suite", "packages"):
            if key not in entry:
                raise BadInput("%s: missing %r" % (where, key))
        name = entry["name"]
        if not isinstance(name, str) or not DISTRIBUTION_NAME.match(name):
            raise BadInput(
                "%s: name %r is not a plain identifier (lower-case letters, digits, - and _, starting with a letter); "
                "hosts look for their distribution in lower case: debian or ubuntu" % (where, name)
            )
        if name in names:
            raise BadInput("%s: a second distribution named %r" % (where, name))
        names.add(name)
        if not isinstance(entry["url"], str) or not ABSOLUTE_URL.match(entry["url"]):
            raise BadInput("%s: url %r is not an absolute URL such as http://HOST/debian" % (where, entry["url"]))
        if not isinstance(entry["suite"], str) or not DISTRIBUTION_SUITE.match(entry["suite"]):
            raise BadInput("%s: suite %r is not a suite name such as bookworm or noble" % (where, entry["suite"]))
        packages = entry["packages"]
        if not isinstance(packages, list) or not packages or not all(isinstance(p, str) and p for p in packages):
            raise BadInput("%s: packages must be a non-empty list of package names" % where)
        components = entry.get("components", ["main"])
        if not isinstance(components, list) or not components or not all(isinstance(c, str) and c for c in components):
            raise BadInput("%s: components must be a non-empty list such as [main, universe]" % where)
        if ("keyring" in entry) == ("key_url" in entry):
            raise BadInput(
                "%s: give exactly one of keyring (a local keyring file that signs the archive's Release) or key_url "
                "(an armored key's URL)%s" % (where, ", not both" if "keyring" in entry else "")
            )
        settings = {
            "name": name,
            "url": entry["url"].rstrip("/"),
            "suite": entry["suite"],
            "components": components,
            "packages": packages,
        }
        if "keyring" in entry:
            keyring = Path(path).parent / Path(str(entry["keyring"])).expanduser()
            if not keyring.is_file():
                raise BadInput("%s: keyring %s is not a file" % (where, keyring))
            settings["keyring"] = str(keyring)
        elif isinstance(entry["key_url"], str) and ABSOLUTE_URL.match(entry["key_url"]):
            settings["key_url"] = entry["key_url"]
        else:
            raise BadInput("%s: key_url %r is not an absolute URL of an armored key" % (where, entry["key_url"]))
        checked.append(settings)
    return checked


PYTHON_KEYS = {"version", "glibc", "machine"}
MAJOR_MINOR = re.compile(r"^([0-9]+)\.([0-9]+)$")
# The machines manylinux wheels are built for, with the oldest glibc minor a manylinux_2_K tag of theirs names (what
# packaging's tags compute on such a host: manylinux1 is glibc 2.5, manylinux2014 2.17).
MANYLINUX_MACHINES = {"x86_64": 5, "i686": 5, "aarch64": 17, "armv7l": 17, "ppc64": 17, "ppc64le": 17, "s390x": 17}


def python_settings(path: str | Path, entries: Any) -> list[dict[str, str]]:
    """The `pythons` entries of a configuration, checked: each target Python of the wheelhouse as {version "X.Y",
    glibc "2.N", machine (x86_64)}, all CPython on a glibc Linux."""
    example = '{version: "3.11", glibc: "2.36", machine: x86_64}'
    if not isinstance(entries, list):
        raise BadInput("%s: pythons must be a list of mappings such as %s" % (path, example))
    checked = []
    for index, entry in enumerate(entries):
        where = "%s: pythons[%d]" % (path, index)
        if not isinstance(entry, dict):
            raise BadInput("%s: expected a mapping such as %s" % (where, example))
        unknown = sorted(str(key) for key in set(entry) - PYTHON_KEYS)
        if unknown:
            raise BadInput(
                "%s: unknown key %s (known: %s)" % (where, ", ".join(unknown), ", ".join(sorted(PYTHON_KEYS)))
            )
        for key in ("version", "glibc"):
            if key not in entry:
                raise BadInput("%s: missing %r, as in %s" % (where, key, example))
        for key, example_value, pitfall in (
            ("version", "3.11", "3.10 unquoted as the number 3.1"),
            ("glibc", "2.36", "2.40 unquoted as the number 2.4"),
        ):
            value = entry[key]
            if not isinstance(value, str):
                raise BadInput(
                    '%s: %s %r is not a string: quote it (%s: "%s"); YAML reads %s'
                    % (where, key, value, key, example_value, pitfall)
                )
        version = MAJOR_MINOR.match(entry["version"])
        if not version or version.group(1) != "3":
            raise BadInput(
                '%s: version %r is not a CPython 3 release as "3.Y" ("3.11" for Debian 12)' % (where, entry["version"])
            )
        glibc = MAJOR_MINOR.match(entry["glibc"])
        if not glibc or glibc.group(1) != "2" or int(glibc.group(2)) < 17:
            raise BadInput(
                '%s: glibc %r is not a glibc release as "2.N" from 2.17 on ("2.36" for Debian 12; '
                "ldd --version on a host prints it)" % (where, entry["glibc"])
            )
        machine = entry.get("machine", "x86_64")
        if machine not in MANYLINUX_MACHINES:
            raise BadInput(
                "%s: machine %r is not one manylinux wheels are built for (%s; uname -m on a host prints it)"
                % (where, machine, ", ".join(sorted(MANYLINUX_MACHINES)))
            )
        target = {
            "version": "%d.%d" % (int(version.group(1)), int(version.group(2))),
            "glibc": "2.%d" % int(glibc.group(2)),
            "machine": machine,
        }
        if target in checked:
            raise BadInput("%s: a second entry for %s" % (where, describe_python(target)))
        checked.append(target)
    return checked


def download_settings(source: Mapping[str, Any]) -> dict[str, Any]:
    """What decides the build-time downloads, from a configuration or a manifest (one written before they existed
    included), with the defaults filled in."""
    return {
        # The archs whose AOTriton kernel images the mirror holds: every Instinct arch of the collection's table.
        "gpu_archs": source.get("gpu_archs", sorted(collection_module("gfx_targets").GFX_ARCHS)),
        "triton_llvm_system_suffix": source.get("triton_llvm_system_suffix", build_downloads.TRITON_LLVM_SYSTEM_SUFFIX),
        # false for a cluster that builds PyTorch with pytorch_aotriton: false (no flash attention): no AOTriton files.
        "aotriton": source.get("aotriton", True),
    }


def repo_paths(config: Mapping[str, Any]) -> dict[str, str]:
    return {
        "rocm": "rocm/apt/%s" % config["rocm_version"],
        "amdgpu": "amdgpu/%s/ubuntu" % config["amdgpu_version"],
    }


def distribution_path(name: str) -> str:
    return "distribution/%s" % name


def upstream_key(work: Path, name: str, url: str | None = None, keyring: str | Path | None = None) -> Path:
    """A repository's signing key (fetched from url, or copied from a local keyring file) under work/keys/, named as
    apt's signed-by needs it: .asc for an armored key, .gpg for a binary keyring."""
    keys = work / "keys"
    for stored in keys.glob(name + ".*"):
        return stored
    if url is not None:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - the configured key URL
            data = response.read()
    else:
        # The callers give a url or a keyring.
        data = Path(keyring).read_bytes()  # type: ignore[arg-type]
    keys.mkdir(parents=True, exist_ok=True)
    stored = keys / (name + (".asc" if data.lstrip().startswith(b"-----BEGIN PGP") else ".gpg"))
    stored.write_bytes(data)
    return stored


def rocm_repositories(config: Mapping[str, Any], work: Path) -> dict[str, dict[str, Any]]:
    """The ROCm and amdgpu repositories of the configuration: {name: {url, suite, components, key}}."""
    base = config["repo_base_url"].rstrip("/")
    key = upstream_key(work, "rocm", url=config["key_url"])
    return {
        name: {"url": "%s/%s" % (base, path), "suite": config["suite"], "components": ["main"], "key": key}
        for name, path in repo_paths(config).items()
    }


def private_apt_root(root: Path, repositories: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """An apt root under root whose only sources are repositories ({name: {url, suite, components, key}}), its lists
    read (apt-get update); returns the apt options that use it. The machine's own apt is untouched."""
    for sub in ("lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "sources.list").write_text(
        "".join(
            "deb [arch=amd64 signed-by=%s] %s %s %s\n"
            % (repo["key"], repo["url"], repo["suite"], " ".join(repo["components"]))
            for repo in repositories.values()
        )
    )
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
    return options


def available(apt_options: Sequence[str]) -> set[str]:
    """The names of every package the apt root's repositories serve."""
    return {
        line.split(": ", 1)[1]
        for line in run(["apt-cache", *apt_options, "dumpavail"]).splitlines()
        if line.startswith("Package: ")
    }


def apt_uri(url: str) -> str:
    """A URL as apt prints it: file:///x becomes file:/x."""
    return re.sub(r"^file:/+", "file:/", url.rstrip("/"))


def locate(
    apt_options: Sequence[str], packages: Iterable[str], repositories: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """{file name: repository name} of what apt-get download would fetch for packages: apt says where each file comes
    from (--print-uris), which tells the repositories apart (the longest repository URL the file's URI starts with)."""
    prefixes = {name: apt_uri(repo["url"]) + "/" for name, repo in repositories.items()}
    origin = {}
    for line in run(["apt-get", *apt_options, "--print-uris", "download", *packages]).splitlines():
        if not line.strip():
            continue
        uri, filename = apt_uri(line.split()[0].strip("'")), line.split()[1]
        matches = [(len(prefix), name) for name, prefix in prefixes.items() if uri.startswith(prefix)]
        if not matches:
            raise MirrorError(
                "apt fetches %s from %s, under none of %s" % (filename, uri, ", ".join(sorted(prefixes.values())))
            )
        origin[filename] = max(matches)[1]
    return origin


def package_of(filename: str) -> str:
    """The package name of an apt-get download file name (NAME_VERSION_ARCH.deb)."""
    return filename.split("_", 1)[0]


def download_to_pools(
    apt_options: Sequence[str], origin: Mapping[str, str], pools: Mapping[str, Path], downloads: Path
) -> dict[str, list[str]]:
    """apt-get download of the files of origin ({file name: repository name}) whose repository has a pool in pools
    ({repository name: pool directory}), each copied into its pool; returns {repository name: [file names]}."""
    wanted = sorted(package_of(filename) for filename, name in origin.items() if name in pools)
    downloads.mkdir(parents=True)
    if wanted:
        run(["apt-get", *apt_options, "download", *wanted], cwd=downloads)
    result = {}
    for name, pool in pools.items():
        pool.mkdir(parents=True, exist_ok=True)
        for deb in downloads.iterdir():
            if origin.get(deb.name) == name:
                # apt-get download keeps the epoch as "1%3a"; pools name files without it, as upstream does.
                shutil.copy2(deb, pool / re.sub(r"_\d+%3a", "_", deb.name))
        result[name] = sorted(p.name for p in pool.iterdir())
    return result


def apt_packages(config: Mapping[str, Any], dest: Path, work: Path) -> dict[str, list[str]]:
    """Download the requested packages and their dependencies that the ROCm/amdgpu repositories serve."""
    repositories = rocm_repositories(config, work)
    options = private_apt_root(work / "apt", repositories)
    # Only the ROCm and amdgpu repositories are configured in this apt root, so every package it knows is theirs.
    served = available(options)
    missing = sorted(set(config["packages"]) - served)
    if missing:
        raise MirrorError(
            "the repositories at %s serve no package named %s"
            % (config["repo_base_url"].rstrip("/"), ", ".join(missing))
        )
    closure = dependency_closure(options, config["packages"])
    origin = locate(options, sorted(name for name in closure if name in served), repositories)
    paths = repo_paths(config)
    return download_to_pools(
        options, origin, {name: dest / path / "pool" / "main" for name, path in paths.items()}, work / "debs"
    )


def distribution_packages(
    config: Mapping[str, Any], distribution: Mapping[str, Any], dest: Path, work: Path
) -> list[str]:
    """The distribution's requested packages and everything they and the ROCm packages depend on that the
    distribution serves, resolved by apt in an apt root holding the distribution and the ROCm/amdgpu repositories,
    into distribution/NAME/pool/main/; returns the file names."""
    name = distribution["name"]
    where = "distribution %s (%s %s)" % (name, distribution["url"], distribution["suite"])
    key = upstream_key(
        work, "distribution-" + name, url=distribution.get("key_url"), keyring=distribution.get("keyring")
    )
    repositories = dict(
        rocm_repositories(config, work),
        distribution={
            "url": distribution["url"],
            "suite": distribution["suite"],
            "components": distribution["components"],
            "key": key,
        },
    )
    try:
        options = private_apt_root(work / ("apt-distribution-" + name), repositories)
    except MirrorError as error:
        raise MirrorError("%s: %s" % (where, error)) from None
    served = available(options)
    unknown = sorted(set(distribution["packages"]) - served)
    if unknown:
        raise MirrorError("%s serves no package named %s" % (where, ", ".join(unknown)))
    closure = dependency_closure(options, [*distribution["packages"], *config["packages"]])
    origin = locate(options, sorted(package for package in closure if package in served), repositories)
    from_distribution = {package_of(filename) for filename, repo in origin.items() if repo == "distribution"}
    elsewhere = sorted(set(distribution["packages"]) - from_distribution)
    if elsewhere:
        raise MirrorError(
            "%s: apt takes %s from the ROCm/amdgpu repositories, not from the distribution; "
            "list them under the top-level packages" % (where, ", ".join(elsewhere))
        )
    pool = dest / distribution_path(name) / "pool" / "main"
    return download_to_pools(options, origin, {"distribution": pool}, work / ("debs-distribution-" + name))[
        "distribution"
    ]


def dependency_closure(apt_options: Sequence[str], packages: Iterable[str]) -> set[str]:
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


def write_signed_index(
    repo: str | Path, suite: str, pool: str, gpg_argv: Sequence[str], origin: str = "instinct.stack mirror"
) -> None:
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


def new_signing_key(gnupg: Path, uid: str) -> tuple[list[str], str]:
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


def mirror_signing_key(dest: Path, work: Path) -> list[str]:
    """The key made for this mirror, its public half at rocm/rocm.gpg.key (what the hosts trust for every repository
    of the mirror); returns the gpg argv that signs with it."""
    gpg_argv, public_key = new_signing_key(work / "gnupg", "instinct.stack mirror %s" % dest.name)
    (dest / "rocm").mkdir(exist_ok=True)
    (dest / "rocm" / "rocm.gpg.key").write_text(public_key)
    return gpg_argv


def sign_repositories(config: Mapping[str, Any], dest: Path, gpg_argv: Sequence[str]) -> None:
    """Regenerate Packages/Release for each repository, the ROCm/amdgpu ones and each distribution's, and sign them
    with the mirror's key (gpg_argv, from mirror_signing_key)."""
    for path in repo_paths(config).values():
        write_signed_index(dest / path, config["suite"], "pool", gpg_argv)
    for distribution in config["distributions"]:
        write_signed_index(dest / distribution_path(distribution["name"]), distribution["suite"], "pool", gpg_argv)


def git_file(bare: Path, commit: str, path: str) -> str | None:
    """A file of a mirrored repository at a commit, or None when it has none."""
    shown = subprocess.run(
        ["git", "show", "%s:%s" % (commit, path)], cwd=bare, capture_output=True, text=True, check=False
    )
    return shown.stdout if shown.returncode == 0 else None


def git_repositories(config: Mapping[str, Any], dest: Path, work: Path) -> dict[str, dict[str, str]]:
    """git clone --mirror each source, then every submodule its pinned ref names, recursively."""
    mirrored: dict[str, Path] = {}
    fetch_env = dict(os.environ, **git_config_env(config["git_rewrites"]))

    def mirror(url: str) -> Path:
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

    def submodules(url: str, ref: str) -> None:
        bare = mirror(url)
        gitmodules = git_file(bare, ref, ".gitmodules")
        if gitmodules is None:
            return
        config_lines = run(["git", "config", "-f", "-", "--get-regexp", r"submodule\..*\.(url|path)"], input=gitmodules)
        entries: dict[str, dict[str, str]] = {}
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


def needed_downloads(
    config: Mapping[str, Any], dest: Path, refs: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    """{upstream URL: {"why": what needs it, "sha256": the hash its source names}} for what the mirrored sources
    download at build time, read at their pinned commits. sha256 is what PyTorch's aotriton.cmake lists for the
    tarball (upstream's URL_HASH), "" where no source names one: always for Triton's LLVM (its setup.py checks no
    hash and the release publishes none, triton-lang/triton#1103), and for an AOTriton tarball whose entry is empty."""
    needed = {}
    for name, ref in sorted(refs.items()):
        bare = dest / ref["mirror"]
        llvm_hash = git_file(bare, ref["commit"], build_downloads.TRITON_LLVM_HASH_FILE)
        if llvm_hash is not None:
            llvm = build_downloads.triton_llvm(llvm_hash, config["triton_llvm_system_suffix"])
            needed[llvm["url"]] = {
                "why": "%s %s: %s" % (name, ref["commit"][:12], build_downloads.TRITON_LLVM_HASH_FILE),
                "sha256": "",
            }
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
                needed[url] = {
                    "why": "%s %s: %s" % (name, ref["commit"][:12], build_downloads.AOTRITON_CMAKE_FILE),
                    "sha256": plan["sha256"][url],
                }
    return needed


def fetch_downloads(config: Mapping[str, Any], dest: Path, needed: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Each build-time download into files/HOST/PATH, fetched through download_rewrites and checked against the
    SHA-256 its source names: a file that does not match is not stored and stops the build, naming it. One whose
    source names no hash is stored with a warning on stderr; the manifest's sha256 then records what was fetched."""
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
                "cannot fetch %s (needed by %s) from %s: %s" % (url, needed[url]["why"], source, error)
            ) from None
        expected = needed[url]["sha256"]
        if expected:
            actual = sha256(partial)
            if actual != expected:
                partial.unlink()
                raise MirrorError(
                    "%s (fetched from %s) has SHA-256 %s, not the %s that %s names for it: a corrupted or tampered "
                    "file; nothing was stored" % (url, source, actual, expected, needed[url]["why"])
                )
        else:
            print(
                "warning: no upstream SHA-256 for %s (needed by %s): stored unchecked" % (url, needed[url]["why"]),
                file=sys.stderr,
            )
        partial.rename(target)
    return {url: mirror_file_path(url) for url in sorted(needed)}


def placeholder_wheels(built: Iterable[str], directory: str | Path) -> list[str]:
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


def describe_python(target: Mapping[str, str]) -> str:
    """A target Python as the messages name it: CPython 3.11 (glibc 2.36, x86_64)."""
    return "CPython %s (glibc %s, %s)" % (target["version"], target["glibc"], target["machine"])


def platform_tags(target: Mapping[str, str]) -> list[str]:
    """The platform tags of the wheels a target's glibc and machine can install, newest first: every
    manylinux_2_K_MACHINE from its glibc down to the machine's oldest, and the legacy aliases. pip's --platform takes
    each tag as given: it widens manylinux2014 to manylinux2010 and manylinux1, and manylinux2010 to manylinux1, but
    never a manylinux_2_N to older glibcs (pip/_internal/utils/compatibility_tags.py), so each is named. No
    linux_MACHINE: such a wheel is built for one machine's libraries, not for a glibc."""
    machine = target["machine"]
    glibc = int(target["glibc"].split(".")[1])
    tags = ["manylinux_2_%d_%s" % (minor, machine) for minor in range(glibc, MANYLINUX_MACHINES[machine] - 1, -1)]
    legacy = [("manylinux2014", 17, set(MANYLINUX_MACHINES)), ("manylinux2010", 12, {"x86_64", "i686"})]
    legacy.append(("manylinux1", 5, {"x86_64", "i686"}))
    tags += ["%s_%s" % (alias, machine) for alias, minor, machines in legacy if machine in machines and glibc >= minor]
    return tags


def target_pip_args(target: Mapping[str, str]) -> list[str]:
    """pip download's options for the wheels a target Python installs: CPython X.Y's own ABI first (pip reads a
    free-threaded build from the first --abi), then abi3 and none, which pip's tags for CPython add anyway."""
    abi = "cp" + target["version"].replace(".", "")
    args = ["--python-version", target["version"], "--implementation", "cp"]
    args += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in platform_tags(target):
        args += ["--platform", platform]
    return args


def target_tags(target: Mapping[str, str]) -> set["Tag"]:
    """Every wheel tag a target Python installs, as pip computes them for --python-version, --implementation cp,
    --abi and --platform: packaging's CPython tags, then the pure-Python and interpreter-generic ones."""
    from packaging import tags  # ansible-core's dependency, as pip's vendored copy

    version = tuple(int(part) for part in target["version"].split("."))
    platforms = platform_tags(target)
    interpreter = "cp%d%d" % version
    return {
        *tags.cpython_tags(python_version=version, abis=[interpreter], platforms=platforms),
        *tags.compatible_tags(python_version=version, interpreter=interpreter, platforms=platforms),
    }


def marker_environment(target: Mapping[str, str]) -> dict[str, str]:
    """The environment markers of a target Python on Linux. Only X.Y is known: python_full_version is X.Y.0."""
    return {
        "implementation_name": "cpython",
        "implementation_version": target["version"] + ".0",
        "platform_python_implementation": "CPython",
        "python_version": target["version"],
        "python_full_version": target["version"] + ".0",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": target["machine"],
    }


def parsed_requirement(line: str) -> "Requirement | None":
    """A requirement line as a packaging Requirement, or None for what pip reads but PEP 508 does not (a path, an
    option)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(line)
    except InvalidRequirement:
        return None


def requirements_for(requirements: Iterable[str], target: Mapping[str, str]) -> list[str]:
    """The requirements a target Python asks for: pip evaluates environment markers with the Python it runs on,
    not with --python-version (pypa/pip#11198), so a top-level requirement's marker is evaluated here for the target,
    and the requirement is given without it, or left out. Markers in the dependencies' metadata remain pip's."""
    kept = []
    for line in requirements:
        requirement = parsed_requirement(line)
        if requirement is None or requirement.marker is None:
            kept.append(line)
        elif requirement.marker.evaluate(marker_environment(target)):
            requirement.marker = None
            kept.append(str(requirement))
    return kept


def pip_download_argv(
    python: str,
    target_dir: str | Path,
    requirements: Iterable[str],
    pip_args: Iterable[str],
    extra: Iterable[str] = (),
    target: Mapping[str, str] | None = None,
) -> list[str]:
    """The pip download command of a wheelhouse: wheels only, for target (a `pythons` entry), or for python itself
    when target is None."""
    return [
        python,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--quiet",
        "--only-binary=:all:",
        "-d",
        str(target_dir),
        *(target_pip_args(target) if target is not None else []),
        *pip_args,
        *extra,
        *(requirements_for(requirements, target) if target is not None else requirements),
    ]


def download_wheels(
    target: str | Path,
    requirements: Iterable[str],
    pip_args: Iterable[str],
    built: Iterable[str] = (),
    python: str = "python3",
    pythons: Sequence[Mapping[str, str]] = (),
) -> list[str]:
    """pip download of requirements with their closure into target, wheels only, once for each target Python of
    pythons (the union of their closures; pip on each host takes what fits it from --find-links), or for python
    itself when there are none; the stack's own builds stand in as placeholders during the resolution and are
    removed after it."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="instinct-placeholders-") as placeholders:
        pins = placeholder_wheels(built, placeholders)
        extra = ["--find-links", placeholders, *pins] if pins else []
        # None: for python itself.
        for wanted in pythons or [None]:  # type: ignore[list-item]
            try:
                run(pip_download_argv(python, target, requirements, pip_args, extra, wanted))
            except MirrorError as error:
                if wanted is None:
                    raise
                raise MirrorError("wheels for %s: %s" % (describe_python(wanted), error)) from None
    for path in target.glob("*%s*" % PLACEHOLDER):
        path.unlink()
    return sorted(p.name for p in target.iterdir())


INTERPRETER = (
    "import json, platform, sys; print(json.dumps({'implementation': sys.implementation.name, "
    "'version': '%d.%d' % sys.version_info[:2], 'libc': ' '.join(platform.libc_ver()), 'machine': platform.machine()}))"
)


def wheelhouse(config: Mapping[str, Any], dest: Path, python: str = "python3") -> dict[str, Any]:
    """The wheelhouse under dest/wheels, and what the manifest records of it: the wheels, what was asked for, and
    the Pythons they are for."""
    recorded = {
        "wheels": [],
        "pythons": config["pythons"],
        "wheel_requirements": config["wheels"],
        "built_by_the_stack": config["built_by_the_stack"],
    }
    if not config["wheels"]:
        recorded["wheels_for"] = "no wheelhouse: wheels is empty"
        return recorded
    if config["pythons"]:
        recorded["wheels_for"] = "; ".join(describe_python(target) for target in config["pythons"])
    else:
        own = json.loads(run([python, "-c", INTERPRETER]))
        recorded["wheels_for"] = (
            "only the Python that built the mirror (%s: %s %s, %s, %s): declare the hosts' Pythons under pythons"
            % (python, own["implementation"], own["version"], own["libc"] or "no glibc", own["machine"])
        )
        print("warning: wheels for %s" % recorded["wheels_for"], file=sys.stderr)
    recorded["wheels"] = download_wheels(
        dest / "wheels",
        config["wheels"],
        config["pip_args"],
        config["built_by_the_stack"],
        python=python,
        pythons=config["pythons"],
    )
    return recorded


def wheel_problems(dest: Path, manifest: Mapping[str, Any]) -> list[str]:
    """For each target Python the manifest declares, each requirement asked for (its marker evaluated for the
    target) that wheels/ holds no wheel for that the target installs at a version the requirement allows, and any
    .whl whose name is not a wheel's. Not a resolution: only the top-level requirements are checked, by name,
    version and tags; their dependencies are not resolved again here (pip download did, per target, at build
    time)."""
    targets = manifest.get("pythons") or []
    requirements = manifest.get("wheel_requirements") or []
    if not targets or not requirements:
        return []
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    # built_by_the_stack holds "name==version" pins, which always parse.
    built = {canonicalize_name(parsed_requirement(line).name) for line in manifest.get("built_by_the_stack", [])}  # type: ignore[union-attr]
    held: dict[str, list[tuple[Version, frozenset[Tag]]]]
    problems, held = [], {}
    for path in sorted((dest / "wheels").glob("*.whl")):
        try:
            parsed = parse_wheel_filename(path.name)  # name, version, build tag, tags
        except InvalidWheelFilename:
            problems.append("not a wheel's file name: wheels/%s" % path.name)
            continue
        held.setdefault(parsed[0], []).append((parsed[1], parsed[3]))
    for target in targets:
        supported = target_tags(target)
        for line in requirements:
            requirement = parsed_requirement(line)
            # A path or an option (pip reads them, PEP 508 does not) is not checked.
            if requirement is None or canonicalize_name(requirement.name) in built:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate(marker_environment(target)):
                continue
            if not any(
                tags & supported and requirement.specifier.contains(version, prereleases=True)
                for version, tags in held.get(canonicalize_name(requirement.name), [])
            ):
                problems.append("missing wheel: %s for %s" % (line, describe_python(target)))
    return problems


def write_manifest(dest: Path, summary: Mapping[str, Any]) -> dict[str, Any]:
    files = {}
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and p.name != MANIFEST):
        files[str(path.relative_to(dest))] = {"sha256": sha256(path), "size": path.stat().st_size}
    manifest = dict(summary, files=files)
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def build(config_path: str | Path, dest: str | Path) -> dict[str, Any]:
    config = load_config(config_path)
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise BadInput("%s is not empty; build a mirror into a new directory" % dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="instinct-mirror-") as tmp:
        work = Path(tmp)
        debs = apt_packages(config, dest, work)
        distributions = {
            distribution["name"]: {
                "suite": distribution["suite"],
                "packages": list(distribution["packages"]),
                "files": distribution_packages(config, distribution, dest, work),
            }
            for distribution in config["distributions"]
        }
        sign_repositories(config, dest, mirror_signing_key(dest, work))
        refs = git_repositories(config, dest, work)
        downloads = fetch_downloads(config, dest, needed_downloads(config, dest, refs))
        wheels = wheelhouse(config, dest)
    mirrored = mirror_models(config, dest)
    summary = {
        "rocm_version": config["rocm_version"],
        "amdgpu_version": config["amdgpu_version"],
        "suite": config["suite"],
        "packages": debs,
        "distributions": distributions,
        "git": refs,
        **wheels,
        "downloads": downloads,
        **download_settings(config),
        "models": mirrored,
    }
    return write_manifest(dest, summary)


def verify(dest: str | Path) -> list[str]:
    """Problems found: files missing, changed, or not in the manifest, requested wheels missing for a declared target
    Python, requested distribution packages missing from their index, build-time downloads missing or unlike the
    SHA-256 their source names. Empty when the mirror is intact."""
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
    # A wheel for every requirement asked for, for each Python the hosts run.
    problems += wheel_problems(dest, manifest)
    # Each model against its revision's manifest, which the hosts check every file with.
    problems += model_problems(dest, manifest)
    # Each distribution's requested packages, in its index: the hosts install them by name from it.
    for name, distribution in sorted(manifest.get("distributions", {}).items()):
        index = dest / distribution_path(name) / "dists" / distribution["suite"] / "main" / "binary-amd64" / "Packages"
        listed = (
            {line.split(": ", 1)[1] for line in index.read_text().splitlines() if line.startswith("Package: ")}
            if index.is_file()
            else set()
        )
        for package in distribution["packages"]:
            if package not in listed:
                problems.append("missing distribution package: %s (%s %s)" % (package, name, distribution["suite"]))
    # What the mirrored sources download at build time, read again from them: a mirror made before a source pinned
    # a new LLVM, or without the build-time downloads, is named here instead of failing a build on the hosts.
    if manifest.get("git"):
        config = dict(download_settings(manifest), rocm_version=manifest["rocm_version"])
        try:
            needed = needed_downloads(config, dest, manifest["git"])
        except MirrorError as error:
            return problems + ["build-time download: %s" % error]
        # And each against the SHA-256 its source names (upstream's own hash): a file changed together with the
        # manifest still differs from it.
        for url, entry in sorted(needed.items()):
            path = dest / mirror_file_path(url)
            if not path.is_file():
                problems.append("missing build-time download: %s (needed by %s)" % (url, entry["why"]))
            elif entry["sha256"] and sha256(path) != entry["sha256"]:
                problems.append(
                    "build-time download does not match its SHA-256: %s (%s) has %s, %s names %s"
                    % (url, mirror_file_path(url), sha256(path), entry["why"], entry["sha256"])
                )
    return problems
