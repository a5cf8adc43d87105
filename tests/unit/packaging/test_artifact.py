"""The collection artifact as a Galaxy user gets it: built, installed into an empty collections path, documented by
ansible-doc and playable from outside the checkout."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from cli_wheel import build_cli_wheel

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
# What users run, and what the repository keeps for its own development.
SHIPPED = [
    "README.md",
    "LICENSE",
    "CHANGELOG.rst",
    "meta/runtime.yml",
    "playbooks/site.yml",
    "docs/docsite/extra-docs.yml",
]
SHIPPED_DIRS = ["roles/", "plugins/modules/", "plugins/module_utils/", "plugins/filter/", "docs/docsite/rst/"]
NOT_SHIPPED = [
    "tests/",
    "molecule/",
    "benchmarks/",
    "scripts/",
    "src/",
    "build/",
    "collections/",
    ".venv/",
    "inventories/",
    "CONTRIBUTING.md",
]


def tool(name):
    return str(BIN / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("artifact")
    outside = work / "outside"  # no ansible.cfg of the checkout applies here, and no checkout on sys.path
    outside.mkdir()
    collections = work / "collections"
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_") and key != "PYTHONPATH"}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    subprocess.run(
        [tool("ansible-galaxy"), "collection", "build", "--output-path", str(work), str(ROOT)],
        check=True,
        capture_output=True,
        cwd=outside,
        env=env,
    )
    (tarball,) = work.glob("instinct-stack-*.tar.gz")
    # --no-deps: community.general comes from the environment (the ansible package), as on a controller.
    install = subprocess.run(
        [tool("ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(collections), str(tarball)],
        check=True,
        capture_output=True,
        text=True,
        cwd=outside,
        env=env,
    )
    assert "was installed successfully" in install.stdout, install.stdout
    return tarball, collections / "ansible_collections" / "instinct" / "stack", outside, env


def test_the_tarball_holds_what_users_run_and_none_of_the_harness(installed):
    tarball, _installed, _outside, _env = installed
    with tarfile.open(tarball) as artifact:
        names = artifact.getnames()
        manifest = json.loads(artifact.extractfile("MANIFEST.json").read())
    for name in SHIPPED:
        assert name in names, name
    for prefix in SHIPPED_DIRS:
        assert any(name.startswith(prefix) for name in names), prefix
    leaked = [name for name in names if any(name.startswith(prefix) for prefix in NOT_SHIPPED)]
    leaked += [name for name in names if "__pycache__" in name or name.startswith((".", "changelogs/fragments"))]
    assert leaked == []
    with open(ROOT / "galaxy.yml") as handle:
        galaxy = yaml.safe_load(handle)
    assert manifest["collection_info"]["version"] == galaxy["version"]
    assert manifest["collection_info"]["license"] == ["GPL-3.0-or-later"]


def plugins(kind, suffix):
    return sorted(
        "instinct.stack." + path.name[: -len(suffix)]
        for path in (ROOT / "plugins" / kind).iterdir()
        if path.name.endswith(suffix) and not path.name.startswith("_")
    )


@pytest.mark.parametrize(
    "kind, names",
    [
        ("module", plugins("modules", ".py")),
        ("filter", plugins("filter", ".yml")),
        ("role", sorted("instinct.stack." + path.name for path in (ROOT / "roles").iterdir())),
    ],
)
def test_ansible_doc_documents_every_plugin_and_role_of_the_installed_copy(installed, kind, names):
    _tarball, copy, outside, env = installed
    run = subprocess.run(
        [tool("ansible-doc"), "-t", kind, "--json", *names],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    docs = json.loads(run.stdout)
    assert sorted(docs) == names, run.stderr
    for name, doc in docs.items():
        if kind == "role":
            assert doc["entry_points"]["main"]["options"], name
        else:
            assert doc["doc"]["short_description"] and doc["doc"].get("options") is not None, name
        # Documented from the installed copy, not from the checkout.
        path = doc.get("path") or doc["doc"].get("filename", "")
        assert str(ROOT) not in path or str(copy) in path, (name, path)


def test_the_site_playbook_resolves_from_the_installed_collection(installed):
    _tarball, copy, outside, env = installed
    run = subprocess.run(
        [tool("ansible-playbook"), "-i", "localhost,", "instinct.stack.site", "--syntax-check"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "playbook: %s/playbooks/site.yml" % copy in run.stdout


def test_the_pip_installed_cli_runs_the_galaxy_installed_collection(installed, tmp_path):
    """The CLI from its wheel (not the editable checkout) finds the collection where ansible-galaxy put it."""
    _tarball, copy, outside, env = installed
    wheel = build_cli_wheel(tmp_path)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    inventory = outside / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "captured-mi300x": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "rocm_gfx_source": "kfd",
                            "instinct_sysfs_root": str(ROOT / "tests" / "fixtures" / "kfd" / "mi300x-8gpu"),
                        }
                    }
                }
            }
        )
    )
    run_dir = tmp_path / "run"
    cli_env = dict(env, PYTHONPATH=str(site))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "instinct_stack.cli",
            "detect",
            "-i",
            str(inventory),
            "--json",
            "--run-dir",
            str(run_dir),
        ],
        cwd=outside,
        env=cli_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (row,) = json.loads(run.stdout)
    assert row["pytorch_rocm_arch"] == "gfx942" and len(row["gpus"]) == 8
    (command,) = run_dir.glob("artifacts/*/command")
    assert str(copy / "playbooks" / "detect.yml") in json.loads(command.read_text())["command"]
    # The module ran from the wheel, not from the checkout.
    where = subprocess.run(
        [sys.executable, "-c", "import instinct_stack; print(instinct_stack.__file__)"],
        env=cli_env,
        cwd=outside,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(site))
