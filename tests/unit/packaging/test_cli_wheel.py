"""The instinct-stack CLI as a wheel (python -m build), versioned as the collection is."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def test_the_cli_wheel_carries_the_collections_version(tmp_path):
    with open(ROOT / "galaxy.yml") as handle:
        version = yaml.safe_load(handle)["version"]
    # A copy of what the wheel is built from, so setuptools leaves nothing in the checkout; --no-isolation: the
    # build backend (setuptools) from this virtualenv, nothing downloaded.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src" / "instinct_stack", source / "src" / "instinct_stack")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name == "instinct_stack-%s-py3-none-any.whl" % version
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read("instinct_stack-%s.dist-info/entry_points.txt" % version).decode()
    assert "instinct_stack/cli.py" in names and "instinct-stack = instinct_stack.cli:main" in entry_points
