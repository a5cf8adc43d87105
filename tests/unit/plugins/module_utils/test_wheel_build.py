import errno
import json
import os
import sys
import threading
import time

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import wheel_build
from ansible_collections.instinct.stack.plugins.module_utils.wheel_build import BuildError, build, cached_build

SETUP = """
import os, sys
from setuptools import setup
if os.environ.get("FIXTURE_FAIL"):
    sys.exit("error: asked to fail")
setup(name="probe", version="1.0", py_modules=["probe"])
"""


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "setup.py").write_text(SETUP)
    (src / "probe.py").write_text("VALUE = 1\n")
    return src


def steps(tag="wheel"):
    return [
        {"name": "stamp", "argv": [sys.executable, "-c", "open('stamp', 'w').write('x')"]},
        {"name": tag, "argv": [sys.executable, "setup.py", "-q", "bdist_wheel"]},
    ]


def test_build_publishes_once_and_leaves_source_untouched(source, tmp_path):
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    info = build("probe", str(source), "k1", str(cache), str(staging), steps(), metadata={"arch": "gfx942"})
    assert [os.path.basename(w) for w in info["wheels"]] == ["probe-1.0-py3-none-any.whl"]
    assert os.path.isfile(info["wheels"][0])
    assert info["metadata"] == {"arch": "gfx942"} and info["steps"] == ["stamp", "wheel"]
    assert json.loads((cache / "k1" / "build-info.json").read_text())["key"] == "k1"
    assert not (source / "stamp").exists() and not (source / "dist").exists()
    assert os.listdir(staging) == [".build.lock"]
    mtime = os.path.getmtime(info["wheels"][0])
    again = build("probe", str(source), "k1", str(cache), str(staging), [{"name": "never", "argv": ["false"]}])
    assert again["wheels"] == info["wheels"] and os.path.getmtime(again["wheels"][0]) == mtime


def test_failed_step_publishes_nothing_and_names_the_step(source, tmp_path):
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    with pytest.raises(BuildError) as info:
        build("probe", str(source), "k2", str(cache), str(staging), steps("wheel"), environment={"FIXTURE_FAIL": "1"})
    assert info.value.step == "wheel"
    assert "asked to fail" in info.value.tail
    assert "build failed at step 'wheel'" in str(info.value) and "previous stack stays" in str(info.value)
    assert cached_build(str(cache), "k2") is None
    assert os.path.isfile(info.value.log_path)


def test_missing_command_and_missing_wheels(source, tmp_path):
    with pytest.raises(BuildError) as info:
        build(
            "probe",
            str(source),
            "k3",
            str(tmp_path / "c"),
            str(tmp_path / "s"),
            [{"name": "hipify", "argv": [str(tmp_path / "no-such-tool")]}],
        )
    assert info.value.step == "hipify"
    with pytest.raises(BuildError) as info:
        build(
            "probe", str(source), "k4", str(tmp_path / "c"), str(tmp_path / "s"), [{"name": "noop", "argv": ["true"]}]
        )
    assert info.value.step == "collect wheels"


def test_a_killed_step_is_named_with_its_signal_and_publishes_nothing(source, tmp_path):
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    killed = [{"name": "compile", "argv": [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), 9)"]}]
    with pytest.raises(BuildError) as info:
        build("probe", str(source), "k5", str(cache), str(staging), killed)
    message = str(info.value)
    assert "at step 'compile' (killed by SIGKILL; the kernel's out-of-memory killer" in message
    assert "lower build_max_jobs" in message
    assert cached_build(str(cache), "k5") is None and not (cache / ".k5.tmp").exists()
    # The staging copy and its log stay for inspection; a rerun starts them afresh and publishes.
    assert os.path.isfile(info.value.log_path)
    assert build("probe", str(source), "k5", str(cache), str(staging), steps())["key"] == "k5"


def test_a_full_staging_filesystem_is_named_with_its_free_space(source, tmp_path, monkeypatch):
    monkeypatch.setattr(wheel_build, "_free_bytes", lambda path: 3 * 1024 * 1024)
    with pytest.raises(BuildError) as info:
        build("probe", str(source), "k6", str(tmp_path / "c"), str(tmp_path / "s"), steps(), {"FIXTURE_FAIL": "1"})
    assert "The filesystem of %s is full (3 MiB free)" % (tmp_path / "s") in str(info.value)
    assert "point build_staging_dir" in str(info.value)
    # With room, a failure says nothing about space.
    monkeypatch.setattr(wheel_build, "_free_bytes", lambda path: 10 * 1024**3)
    with pytest.raises(BuildError) as info:
        build("probe", str(source), "k6", str(tmp_path / "c"), str(tmp_path / "s"), steps(), {"FIXTURE_FAIL": "1"})
    assert "is full" not in str(info.value)


def test_a_publish_that_fails_leaves_no_key_and_no_partial_directory(source, tmp_path, monkeypatch):
    cache = tmp_path / "cache"

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(wheel_build.shutil, "copy2", no_space)
    with pytest.raises(BuildError) as info:
        build("probe", str(source), "k7", str(cache), str(tmp_path / "s"), steps())
    assert info.value.step == "publish" and "No space left on device" in str(info.value)
    assert "The filesystem of %s is full" % cache in str(info.value)
    assert os.listdir(cache) == []


def test_a_second_build_of_a_key_waits_for_the_first_and_reuses_its_wheels(source, tmp_path):
    cache, staging, gate = tmp_path / "cache", tmp_path / "staging", tmp_path / "gate"
    held = [
        {
            "name": "held",
            "argv": [
                sys.executable,
                "-c",
                "import os, time\nwhile not os.path.exists(%r): time.sleep(0.05)" % str(gate),
            ],
        }
    ]
    results = {}
    first = threading.Thread(
        target=lambda: results.setdefault(
            "first", build("probe", str(source), "k8", str(cache), str(staging), held + steps())
        )
    )
    first.start()
    while not (staging / "probe-k8" / "build.log").exists():
        time.sleep(0.05)
    second = threading.Thread(
        target=lambda: results.setdefault(
            "second", build("probe", str(source), "k8", str(cache), str(staging), steps())
        )
    )
    second.start()
    time.sleep(0.5)
    # The second waits on the key's lock: it has not removed the first's staging tree.
    assert second.is_alive() and (staging / "probe-k8" / "src").is_dir()
    gate.write_text("go")
    first.join(30)
    second.join(30)
    assert results["second"].get("reused") is True and "reused" not in results["first"]
    assert results["second"]["wheels"] == results["first"]["wheels"]


FAKE_CCACHE = """#!/bin/sh
# Stands in for ccache: --zero-stats is logged, --print-stats prints the real output of ccache 4.7.5 (Debian 12).
echo "$1 CCACHE_DIR=$CCACHE_DIR" >> "$FAKE_CCACHE_LOG"
[ "$1" = --print-stats ] && cat "$FAKE_CCACHE_STATS"
exit 0
"""


def test_a_ccache_build_records_its_hits_and_misses(source, tmp_path, monkeypatch):
    fixture = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "ccache")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ccache").write_text(FAKE_CCACHE)
    (bin_dir / "ccache").chmod(0o755)
    log = tmp_path / "ccache.log"
    monkeypatch.setenv("FAKE_CCACHE_LOG", str(log))
    monkeypatch.setenv("FAKE_CCACHE_STATS", os.path.join(fixture, "print-stats-4.7.5-mixed.txt"))
    env = {"PATH": "%s:%s" % (bin_dir, os.environ["PATH"]), "CCACHE_DIR": str(tmp_path / "cc")}
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    monkeypatch.setenv("PATH", env["PATH"])
    info = build("probe", str(source), "k9", str(cache), str(staging), steps(), environment=env, ccache=True)
    assert info["ccache"] == {"hits": 1, "misses": 2, "hit_rate": 0.3333}
    assert json.loads((cache / "k9" / "build-info.json").read_text())["ccache"] == info["ccache"]
    # Zeroed before the steps and read after them, in the build's cache directory.
    assert log.read_text().splitlines() == [
        "--zero-stats CCACHE_DIR=%s" % env["CCACHE_DIR"],
        "--print-stats CCACHE_DIR=%s" % env["CCACHE_DIR"],
    ]


def test_a_build_without_ccache_records_none_and_a_missing_ccache_records_null(source, tmp_path, monkeypatch):
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    assert "ccache" not in build("probe", str(source), "k10", str(cache), str(staging), steps())
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere") + ":" + os.path.dirname(sys.executable))
    info = build("probe", str(source), "k11", str(cache), str(staging), steps(), ccache=True)
    assert info["ccache"] is None


def test_a_ccache_build_compiles_relative_to_its_staging_tree(source, tmp_path, monkeypatch):
    # Two keys, two staging trees: with CCACHE_BASEDIR at each tree the compiler sees the same relative paths, so the
    # second key's units hit the first's objects.
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere") + ":" + os.path.dirname(sys.executable))
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    record = [
        {
            "name": "env",
            "argv": [
                sys.executable,
                "-c",
                "import os, json; json.dump({k: os.environ.get(k) for k in ('CCACHE_BASEDIR', 'CCACHE_NOHASHDIR')},"
                " open(os.path.join(%r, os.path.basename(os.path.dirname(os.getcwd())) + '.json'), 'w'))"
                % str(tmp_path),
            ],
        }
    ] + steps()
    build("probe", str(source), "k12", str(cache), str(staging), record, ccache=True)
    build("probe", str(source), "k13", str(cache), str(staging), record)
    seen = json.loads((tmp_path / "probe-k12.json").read_text())
    assert seen == {"CCACHE_BASEDIR": str(staging / "probe-k12" / "src"), "CCACHE_NOHASHDIR": "1"}
    assert json.loads((tmp_path / "probe-k13.json").read_text()) == {"CCACHE_BASEDIR": None, "CCACHE_NOHASHDIR": None}
