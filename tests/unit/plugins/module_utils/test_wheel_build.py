import json
import os
import sys

import pytest

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
    assert not os.listdir(staging)
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
