"""The harness scripts whose stdout is read whole as a path print that path and nothing else.

scripts/test.sh reads build-image.sh's stdout as the guest image's directory and hands it to build_mirror.py; a
tool's chatter on stdout (mke2fs: "Creating regular file ...") once became part of that path on a machine with no
cached image, and only a fresh machine showed it. Here the tools the recipe runs are stand-ins that chatter on stdout
as the real ones do, so the recipe's own redirection is what is tested.
"""

import os
import shutil
import stat
import subprocess
import sys
import textwrap

from tests import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_IMAGE = os.path.join(ROOT, "molecule", "shared", "vm", "build-image.sh")
BASH = shutil.which("bash") or "/bin/bash"

# debootstrap ROOTFS is its 4th argument; chroot ROOTFS COMMAND...; mkfs.ext4 ... -d ROOTFS IMAGE SIZE.
STAND_INS = {
    "debootstrap": """
        echo "I: Retrieving InRelease"
        echo "$3" >>"${DEBOOTSTRAP_SUITES:-/dev/null}"
        rootfs=$4
        mkdir -p "$rootfs"/etc/systemd/network "$rootfs"/etc/systemd/system/multi-user.target.wants \\
          "$rootfs"/usr/local/sbin "$rootfs"/etc/apt/sources.list.d "$rootfs"/etc/sudoers.d "$rootfs"/etc/ssh
        echo kernel >"$rootfs"/vmlinuz; echo initrd >"$rootfs"/initrd.img
    """,
    "chroot": """
        echo "chroot chatter: $*"
        [[ $2 != dpkg-query ]] || echo python3
    """,
    "mkfs.ext4": """
        image=${@: -2:1}
        echo "mke2fs 1.47.0 (5-Feb-2023)"
        echo "Creating regular file $image"
        echo disk >"$image"
    """,
}


def stand_in_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STAND_INS.items():
        tool = bin_dir / name
        tool.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body))
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return "%s:%s" % (bin_dir, os.environ["PATH"])


def test_build_image_prints_only_the_image_directory_when_it_builds_and_when_cached(tmp_path):
    env = dict(os.environ, PATH=stand_in_path(tmp_path), INSTINCT_DEBIAN_MIRROR="http://mirror.invalid/debian")
    cache = tmp_path / "cache"
    for run in ("build", "cached"):
        done = subprocess.run([BASH, BUILD_IMAGE, str(cache)], env=env, capture_output=True, text=True, check=True)
        lines = done.stdout.splitlines()
        assert len(lines) == 1, (run, done.stdout)
        image = lines[0]
        assert os.path.isfile(os.path.join(image, "disk.img")), (run, image)
        assert os.path.isfile(os.path.join(image, "packages.txt")), (run, image)
    # The chatter was not lost: it went to stderr, where a failing build's reader finds it.
    assert (
        "Creating regular file"
        in subprocess.run(
            [BASH, BUILD_IMAGE, str(tmp_path / "other-cache")], env=env, capture_output=True, text=True, check=True
        ).stderr
    )


def test_another_suite_is_debootstrapped_into_an_image_of_its_own(tmp_path):
    suites = tmp_path / "suites"
    env = dict(os.environ, PATH=stand_in_path(tmp_path), INSTINCT_DEBIAN_MIRROR="http://mirror.invalid/debian")
    env["DEBOOTSTRAP_SUITES"] = str(suites)
    cache = tmp_path / "cache"
    images = {}
    for suite in ("bookworm", "trixie", "trixie"):
        env["INSTINCT_GUEST_SUITE"] = suite
        done = subprocess.run([BASH, BUILD_IMAGE, str(cache)], env=env, capture_output=True, text=True, check=True)
        images.setdefault(suite, set()).add(done.stdout.strip())
    # One image per suite, named for it; the second trixie run took the cached one.
    assert {suite: [os.path.basename(path).split("-")[0] for path in paths] for suite, paths in images.items()} == {
        "bookworm": ["bookworm"],
        "trixie": ["trixie"],
    }
    assert suites.read_text().split() == ["bookworm", "trixie"]


def test_build_mirror_sends_child_processes_stdout_to_stderr_and_prints_only_its_result(tmp_path):
    script = textwrap.dedent(
        """
        import subprocess
        from tests.harness import build_mirror
        with build_mirror.stdout_for_result_only() as result:
            print("python chatter")
            subprocess.run(["echo", "child chatter"], check=True)
            result("/the/mirror")
        """
    )
    # The checkout's root on the child's PYTHONPATH, as the harness's callers put it (tests/harness/__init__.py).
    env = harness.env()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    assert done.stdout == "/the/mirror\n"
    assert "python chatter" in done.stderr and "child chatter" in done.stderr


def test_build_mirror_keeps_its_mirrors_under_the_xdg_cache_home(monkeypatch, tmp_path):
    from tests.harness import build_mirror

    monkeypatch.delenv("INSTINCT_MIRROR_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build_mirror.default_cache() == os.path.join(str(tmp_path), "instinct-stack", "mirror")
    monkeypatch.setenv("INSTINCT_MIRROR_CACHE", "/elsewhere")
    assert build_mirror.default_cache() == "/elsewhere"
