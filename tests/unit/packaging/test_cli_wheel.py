"""The instinct-stack CLI as a wheel (python -m build), versioned as the collection is."""

import zipfile
from pathlib import Path

import yaml
from cli_wheel import build_cli_wheel

ROOT = Path(__file__).resolve().parents[3]


def test_the_cli_wheel_carries_the_collections_version(tmp_path):
    with open(ROOT / "galaxy.yml") as handle:
        version = yaml.safe_load(handle)["version"]
    wheel = build_cli_wheel(tmp_path)
    assert wheel.name == "instinct_stack-%s-py3-none-any.whl" % version
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read("instinct_stack-%s.dist-info/entry_points.txt" % version).decode()
    assert "instinct_stack/cli.py" in names and "instinct-stack = instinct_stack.cli:main" in entry_points
