"""mirror build's distribution packages against real repositories built here: .debs made with dpkg-deb, indexes
signed with gpg, served over HTTP from a local server (and as file:// URLs). apt resolves the closure of a
distribution's packages and of the ROCm packages in one private apt root; the mirror keeps what the distribution
serves, signed with the mirror's own key, and mirror verify names a requested package its index lacks."""

import functools
import http.server
import shutil
import subprocess
import threading

import pytest
import yaml

from instinct_stack import mirror
from instinct_stack.cli import main

DPKG_DEB = shutil.which("dpkg-deb")
GPG = shutil.which("gpg")
GPGV = shutil.which("gpgv")
APT_GET = shutil.which("apt-get")

ROCM_REPO = "rocm/apt/7.0.2"
AMDGPU_REPO = "amdgpu/30.10.2/ubuntu"
# (name, version, depends) per repository. The distribution's toolc needs libtoolc (with an epoch, which the pool's
# file names drop); the fixture rocm-llvm needs the distribution's clang-16, amdgpu-dkms its dkms.
DISTRIBUTION = [
    ("toolc", "1.0-1", ["libtoolc (>= 1:2.0)"]),
    ("libtoolc", "1:2.0-1", []),
    ("clang-16", "1:16.0.6-15", ["libclang-cpp16"]),
    ("libclang-cpp16", "1:16.0.6-15", []),
    ("dkms", "3.0.10-8", []),
    ("unrelated", "1.0-1", []),
]
ROCM = [
    ("rocm-core", "7.0.2.70002-56~22.04", []),
    ("rocm-llvm", "20.0.0.25314.70002-56~22.04", ["rocm-core", "clang-16"]),
    ("rocm", "7.0.2.70002-56~22.04", ["rocm-llvm"]),
]
AMDGPU = [("amdgpu-dkms", "1:6.14.14.30100200-2212064.22.04", ["dkms"])]
DISTRIBUTION_FILES = [
    "clang-16_16.0.6-15_amd64.deb",
    "dkms_3.0.10-8_amd64.deb",
    "libclang-cpp16_16.0.6-15_amd64.deb",
    "libtoolc_2.0-1_amd64.deb",
    "toolc_1.0-1_amd64.deb",
]
PACKAGES_INDEX = "distribution/debian/dists/bookworm/main/binary-amd64/Packages"


def build_deb(work, pool, name, version, depends):
    root = work / ("%s_%s" % (name, version.replace(":", "_")))
    (root / "DEBIAN").mkdir(parents=True)
    control = [
        "Package: " + name,
        "Version: " + version,
        "Architecture: amd64",
        "Maintainer: instinct.stack tests <tests@instinct-stack.invalid>",
        "Description: instinct.stack test package " + name,
    ]
    if depends:
        control.append("Depends: " + ", ".join(depends))
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    pool.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [DPKG_DEB, "--root-owner-group", "-Zgzip", "--build", str(root), str(pool / ("%s.deb" % root.name))],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def publish(work, repo, suite, packages, gpg_argv):
    for package in packages:
        build_deb(work, repo / "pool" / "main", *package)
    mirror.write_signed_index(repo, suite, "pool", gpg_argv, origin="instinct.stack tests")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """The upstream repositories: AMD's (ROCm, amdgpu, signed with one key, served with it at rocm/rocm.gpg.key) and
    a distribution's archive (signed with another key, the archive keyring a local file)."""
    base = tmp_path_factory.mktemp("upstream")
    work = tmp_path_factory.mktemp("work")
    tree = base / "site"
    amd_argv, amd_key = mirror.new_signing_key(work / "amd-gnupg", "AMD stand-in <amd@instinct-stack.invalid>")
    archive_argv, _archive_key = mirror.new_signing_key(
        work / "archive-gnupg", "archive stand-in <archive@instinct-stack.invalid>"
    )
    (tree / "rocm").mkdir(parents=True)
    (tree / "rocm" / "rocm.gpg.key").write_text(amd_key)
    publish(work / "build", tree / ROCM_REPO, "jammy", ROCM, amd_argv)
    publish(work / "build", tree / AMDGPU_REPO, "jammy", AMDGPU, amd_argv)
    publish(work / "build", tree / "debian", "bookworm", DISTRIBUTION, archive_argv)
    # A binary keyring file, as distributions install theirs under /usr/share/keyrings/.
    keyring = base / "archive-keyring.gpg"
    gpg_home = archive_argv[:3]  # gpg --homedir HOME
    keyring.write_bytes(subprocess.run([*gpg_home, "--export"], check=True, capture_output=True).stdout)
    assert keyring.stat().st_size > 0
    handler = functools.partial(QuietHandler, directory=str(tree))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {
        "http": "http://127.0.0.1:%d" % server.server_address[1],
        "file": "file://%s" % tree,
        "keyring": keyring,
        "amd_key": tree / "rocm" / "rocm.gpg.key",
    }
    server.shutdown()
    thread.join()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def write_config(path, url, distributions):
    path.write_text(
        yaml.safe_dump(
            {
                "rocm_version": "7.0.2",
                "amdgpu_version": "30.10.2",
                "suite": "jammy",
                "repo_base_url": url,
                "packages": ["rocm", "amdgpu-dkms"],
                "distributions": distributions,
            }
        )
    )
    return path


def debian(upstream, url, **overrides):
    entry = {
        "name": "debian",
        "url": url + "/debian",
        "suite": "bookworm",
        "keyring": str(upstream["keyring"]),
        "packages": ["toolc"],
    }
    entry.update(overrides)
    return entry


@pytest.fixture(scope="module")
def built(upstream, tmp_path_factory):
    """A mirror built over HTTP with one distribution; tests that change it work on a copy."""
    base = tmp_path_factory.mktemp("built")
    config = write_config(base / "mirror.yml", upstream["http"], [debian(upstream, upstream["http"])])
    dest = base / "mirror"
    assert main(["mirror", "build", str(config), str(dest)]) == 0
    return dest


def names_in(packages_index):
    return sorted(line.split(": ", 1)[1] for line in packages_index.splitlines() if line.startswith("Package: "))


def test_the_closure_the_distribution_serves_is_mirrored(built):
    manifest = (built / mirror.MANIFEST).read_text()
    distributions = yaml.safe_load(manifest)["distributions"]
    # toolc and libtoolc for the requested package; clang-16 (and its library) for ROCm's rocm-llvm, dkms for
    # amdgpu-dkms; nothing the closure does not reach, nothing the ROCm repositories serve.
    assert distributions == {"debian": {"suite": "bookworm", "packages": ["toolc"], "files": DISTRIBUTION_FILES}}
    assert sorted(p.name for p in (built / "distribution/debian/pool/main").iterdir()) == DISTRIBUTION_FILES
    assert names_in((built / PACKAGES_INDEX).read_text()) == [
        "clang-16",
        "dkms",
        "libclang-cpp16",
        "libtoolc",
        "toolc",
    ]
    assert "Filename: pool/main/toolc_1.0-1_amd64.deb" in (built / PACKAGES_INDEX).read_text()
    assert sorted(p.name for p in (built / ROCM_REPO / "pool/main").iterdir()) == [
        "rocm-core_7.0.2.70002-56~22.04_amd64.deb",
        "rocm-llvm_20.0.0.25314.70002-56~22.04_amd64.deb",
        "rocm_7.0.2.70002-56~22.04_amd64.deb",
    ]
    assert sorted(p.name for p in (built / AMDGPU_REPO / "pool/main").iterdir()) == [
        "amdgpu-dkms_6.14.14.30100200-2212064.22.04_amd64.deb"
    ]
    assert mirror.verify(built) == []


def test_the_distribution_is_signed_with_the_mirror_key_the_hosts_trust(built, upstream, tmp_path):
    keyring = tmp_path / "mirror.gpg"
    subprocess.run(
        [GPG, "--batch", "--yes", "--dearmor", "-o", str(keyring), str(built / "rocm" / "rocm.gpg.key")], check=True
    )
    for repo, suite in (("distribution/debian", "bookworm"), (ROCM_REPO, "jammy"), (AMDGPU_REPO, "jammy")):
        dist = built / repo / "dists" / suite
        checked = subprocess.run(
            [GPGV, "--keyring", str(keyring), str(dist / "InRelease")], capture_output=True, text=True, check=False
        )
        assert checked.returncode == 0, (repo, checked.stderr)
        checked = subprocess.run(
            [GPGV, "--keyring", str(keyring), str(dist / "Release.gpg"), str(dist / "Release")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, (repo, checked.stderr)
    # The archive's own key signs nothing in the mirror: the hosts need only the mirror's.
    checked = subprocess.run(
        [GPGV, "--keyring", str(upstream["keyring"]), str(built / "distribution/debian/dists/bookworm/InRelease")],
        capture_output=True,
        check=False,
    )
    assert checked.returncode != 0


def test_a_host_with_nothing_installed_resolves_everything_from_the_mirror(built, tmp_path):
    """What a minimal air-gapped host does: apt with only the mirror's sources (the mirror key trusted) and an empty
    dpkg status installs the ROCm packages and the distribution's packages."""
    key = built / "rocm" / "rocm.gpg.key"
    repositories = {
        "rocm": {"url": "file://%s/%s" % (built, ROCM_REPO), "suite": "jammy", "components": ["main"], "key": key},
        "amdgpu": {"url": "file://%s/%s" % (built, AMDGPU_REPO), "suite": "jammy", "components": ["main"], "key": key},
        "debian": {
            "url": "file://%s/distribution/debian" % built,
            "suite": "bookworm",
            "components": ["main"],
            "key": key,
        },
    }
    options = mirror.private_apt_root(tmp_path / "host", repositories)
    status = tmp_path / "status"
    status.write_text("")
    simulated = subprocess.run(
        [APT_GET, *options, "-o", "Dir::State::status=%s" % status, "--simulate", "install", "rocm", "amdgpu-dkms"]
        + ["toolc"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr
    installed = sorted(line.split()[1] for line in simulated.stdout.splitlines() if line.startswith("Inst "))
    assert installed == sorted(
        ["rocm", "rocm-core", "rocm-llvm", "amdgpu-dkms", *(entry[0] for entry in DISTRIBUTION[:5])]
    )


def test_verify_names_a_requested_package_missing_from_the_index_or_the_pool(built, tmp_path):
    dest = tmp_path / "mirror"
    shutil.copytree(built, dest)
    index = dest / PACKAGES_INDEX
    stanzas = index.read_text().strip().split("\n\n")
    index.write_text("\n\n".join(s for s in stanzas if not s.startswith("Package: toolc\n")) + "\n")
    assert mirror.verify(dest) == [
        "changed: " + PACKAGES_INDEX,
        "missing distribution package: toolc (debian bookworm)",
    ]
    shutil.copy2(built / PACKAGES_INDEX, index)
    (dest / "distribution/debian/pool/main/libtoolc_2.0-1_amd64.deb").unlink()
    assert mirror.verify(dest) == ["missing: distribution/debian/pool/main/libtoolc_2.0-1_amd64.deb"]
    assert main(["mirror", "verify", str(dest)]) == 1


def test_verify_names_every_requested_package_when_the_index_is_gone(tmp_path):
    dest = tmp_path / "mirror"
    (dest / "rocm").mkdir(parents=True)
    (dest / "rocm" / "rocm.gpg.key").write_text("key\n")
    mirror.write_manifest(
        dest,
        {
            "rocm_version": "7.0.2",
            "distributions": {"ubuntu": {"suite": "noble", "packages": ["git", "gcc"], "files": []}},
        },
    )
    assert mirror.verify(dest) == [
        "missing distribution package: git (ubuntu noble)",
        "missing distribution package: gcc (ubuntu noble)",
    ]


def test_a_requested_package_the_distribution_lacks_is_named(upstream, tmp_path, capsys):
    url = upstream["file"]
    config = write_config(
        tmp_path / "mirror.yml", url, [debian(upstream, url, packages=["toolc", "python3-nonesuch", "gcc-nonesuch"])]
    )
    assert main(["mirror", "build", str(config), str(tmp_path / "mirror")]) == 1
    err = capsys.readouterr().err
    assert (
        "distribution debian (%s/debian bookworm) serves no package named gcc-nonesuch, python3-nonesuch" % url in err
    )


def test_a_requested_package_that_only_rocm_serves_is_named(upstream, tmp_path):
    url = upstream["file"]
    config = write_config(tmp_path / "mirror.yml", url, [debian(upstream, url, packages=["toolc", "rocm-core"])])
    with pytest.raises(mirror.MirrorError, match="apt takes rocm-core from the ROCm/amdgpu repositories"):
        mirror.build(config, tmp_path / "mirror")


def test_a_key_that_does_not_sign_the_archive_stops_the_build(upstream, tmp_path):
    url = upstream["file"]
    entry = debian(upstream, url, key_url=url + "/rocm/rocm.gpg.key")
    del entry["keyring"]
    config = write_config(tmp_path / "mirror.yml", url, [entry])
    with pytest.raises(mirror.MirrorError, match=r"^distribution debian \(file://\S+/debian bookworm\): apt-get"):
        mirror.build(config, tmp_path / "mirror")


def entry(**overrides):
    result = {
        "name": "debian",
        "url": "http://HOST/debian",
        "suite": "bookworm",
        "key_url": "http://HOST/debian/archive-key.asc",
        "packages": ["git"],
    }
    result.update(overrides)
    return {key: value for key, value in result.items() if value is not None}


@pytest.mark.parametrize(
    ("distributions", "message"),
    [
        ({"name": "debian"}, "distributions must be a list of mappings"),
        (["debian"], "distributions[0]: expected a mapping"),
        ([entry(name=None)], "distributions[0]: missing 'name'"),
        ([entry(url=None)], "distributions[0] (debian): missing 'url'"),
        ([entry(suite=None)], "distributions[0] (debian): missing 'suite'"),
        ([entry(packages=None)], "distributions[0] (debian): missing 'packages'"),
        ([entry(packages=[])], "packages must be a non-empty list of package names"),
        ([entry(packages="git")], "packages must be a non-empty list of package names"),
        ([entry(name="Debian")], "name 'Debian' is not a plain identifier"),
        ([entry(name="../debian")], "name '../debian' is not a plain identifier"),
        ([entry(), entry(suite="trixie")], "distributions[1] (debian): a second distribution named 'debian'"),
        ([entry(url="HOST/debian")], "url 'HOST/debian' is not an absolute URL"),
        ([entry(suite="bookworm/updates")], "suite 'bookworm/updates' is not a suite name"),
        ([entry(key_url=None)], "give exactly one of keyring"),
        ([entry(keyring="/etc/keyring.gpg")], "give exactly one of keyring (a local keyring file"),
        ([entry(key_url=None, keyring="absent-keyring.gpg")], "keyring %(dir)s/absent-keyring.gpg is not a file"),
        ([entry(key_url="archive-key.asc")], "key_url 'archive-key.asc' is not an absolute URL"),
        ([entry(keyurl="http://HOST/key")], "unknown key keyurl"),
        ([entry(components=[])], "components must be a non-empty list"),
    ],
)
def test_bad_distribution_entries_are_named(tmp_path, capsys, distributions, message):
    config = write_config(tmp_path / "mirror.yml", "http://127.0.0.1:9", distributions)
    assert main(["mirror", "build", str(config), str(tmp_path / "mirror")]) == 2  # bad input: nothing ran
    err = capsys.readouterr().err
    assert "%s: " % config in err
    assert message % {"dir": tmp_path} in err
    assert not (tmp_path / "mirror").exists()


def test_both_keys_are_refused_with_a_reason(tmp_path):
    config = write_config(tmp_path / "mirror.yml", "http://127.0.0.1:9", [entry(keyring="/etc/keyring.gpg")])
    with pytest.raises(mirror.BadInput, match="not both"):
        mirror.load_config(config)


def test_a_relative_keyring_is_read_beside_the_configuration_and_components_default_to_main(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "archive.gpg").write_bytes(b"\x99")
    config = write_config(
        tmp_path / "mirror.yml",
        "http://127.0.0.1:9",
        [entry(key_url=None, keyring="keys/archive.gpg"), entry(name="ubuntu", components=["main", "universe"])],
    )
    loaded = mirror.load_config(config)["distributions"]
    assert loaded[0]["keyring"] == str(tmp_path / "keys" / "archive.gpg")
    assert [d["components"] for d in loaded] == [["main"], ["main", "universe"]]
