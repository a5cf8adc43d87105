import json

from instinct_stack import mirror
from instinct_stack.cli import main


def make_mirror(tmp_path):
    dest = tmp_path / "mirror"
    (dest / "rocm").mkdir(parents=True)
    (dest / "rocm" / "rocm.gpg.key").write_text("key\n")
    (dest / "wheels").mkdir()
    (dest / "wheels" / "wheel-0.45.1-py3-none-any.whl").write_bytes(b"zip")
    mirror.write_manifest(dest, {"rocm_version": "7.0.2"})
    return dest


def test_intact_mirror_verifies(tmp_path, capsys):
    dest = make_mirror(tmp_path)
    manifest = json.loads((dest / "manifest.json").read_text())
    assert set(manifest["files"]) == {"rocm/rocm.gpg.key", "wheels/wheel-0.45.1-py3-none-any.whl"}
    assert main(["mirror", "verify", str(dest)]) == 0
    assert "every file matches" in capsys.readouterr().out


def test_changed_missing_and_extra_files_are_named(tmp_path, capsys):
    dest = make_mirror(tmp_path)
    (dest / "rocm" / "rocm.gpg.key").write_text("tampered\n")
    (dest / "wheels" / "wheel-0.45.1-py3-none-any.whl").unlink()
    (dest / "stray.deb").write_bytes(b"x")
    assert mirror.verify(dest) == [
        "changed: rocm/rocm.gpg.key",
        "missing: wheels/wheel-0.45.1-py3-none-any.whl",
        "not in the manifest: stray.deb",
    ]
    assert main(["mirror", "verify", str(dest)]) == 1
    assert "3 problem(s)" in capsys.readouterr().out


def test_no_manifest(tmp_path):
    assert mirror.verify(tmp_path) == ["%s has no manifest.json" % tmp_path]


def test_build_refuses_a_non_empty_destination(tmp_path, capsys):
    config = tmp_path / "mirror.yml"
    config.write_text(
        "rocm_version: '7.0.2'\namdgpu_version: '30.10.2'\nsuite: jammy\n"
        "repo_base_url: http://127.0.0.1:9\npackages: [rocm]\n"
    )
    dest = make_mirror(tmp_path)
    assert main(["mirror", "build", str(config), str(dest)]) == 2  # bad input: nothing ran
    assert "is not empty" in capsys.readouterr().err


def test_build_names_what_the_configuration_lacks(tmp_path, capsys):
    config = tmp_path / "mirror.yml"
    config.write_text("rocm_version: '7.0.2'\n")
    assert main(["mirror", "build", str(config), str(tmp_path / "new")]) == 2
    assert "missing 'amdgpu_version'" in capsys.readouterr().err
    assert main(["mirror", "build", str(tmp_path / "absent.yml"), str(tmp_path / "new")]) == 2
    assert "absent.yml" in capsys.readouterr().err
