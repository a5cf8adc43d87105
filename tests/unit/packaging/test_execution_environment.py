"""The execution environment: the collection's meta/execution-environment.yml and an ansible-builder definition that
`ansible-builder create` renders into a build context (building the image needs a container engine)."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
DEFINITION = ROOT / "execution-environment" / "execution-environment.yml"


def pins():
    with open(ROOT / "requirements-dev.txt") as handle:
        return dict(line.strip().lower().split("==", 1) for line in handle if "==" in line)


def test_collection_metadata_names_its_dependency_files():
    with open(ROOT / "meta" / "execution-environment.yml") as handle:
        meta = yaml.safe_load(handle)
    assert meta["version"] == 1
    for path in meta["dependencies"].values():
        assert (ROOT / path).is_file(), path
    bindep = (ROOT / meta["dependencies"]["system"]).read_text()
    assert "openssh-client [platform:dpkg]" in bindep and "openssh-clients [platform:rpm]" in bindep


def test_definition_pins_what_the_collection_is_tested_with():
    with open(DEFINITION) as handle:
        definition = yaml.safe_load(handle)
    tested = pins()
    assert definition["dependencies"]["ansible_core"]["package_pip"] == "ansible-core==" + tested["ansible-core"]
    assert definition["dependencies"]["ansible_runner"]["package_pip"] == "ansible-runner==" + tested["ansible-runner"]
    with open(DEFINITION.parent / definition["dependencies"]["galaxy"]) as handle:
        names = [collection["name"] for collection in yaml.safe_load(handle)["collections"]]
    assert names == ["community.general", "instinct.stack"]


def test_ansible_builder_renders_the_build_context(tmp_path):
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-builder"), "create", "-f", str(DEFINITION), "-c", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (containerfile,) = [path for path in tmp_path.iterdir() if path.name in ("Containerfile", "Dockerfile")]
    text = containerfile.read_text()
    assert re.search(r"ansible-core==2\.19\.\d+", text) and "ansible-runner==" in text
    assert "instinct.stack" in (tmp_path / "_build" / "requirements.yml").read_text()
