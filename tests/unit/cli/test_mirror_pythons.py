"""mirror build's wheelhouse for the hosts' Pythons (`pythons`: CPython version, glibc, machine): the configuration
checked, the pip download options built for each target, a real download for two targets, and mirror verify naming a
requirement that has no wheel for a target."""

import json
import platform
import sys

import pytest

from instinct_stack import mirror
from instinct_stack.collection import BadInput

BASE = (
    "rocm_version: '7.0.2'\namdgpu_version: '30.10.2'\nsuite: jammy\n"
    "repo_base_url: http://127.0.0.1:9\npackages: [rocm]\n"
)
DEBIAN12 = {"version": "3.11", "glibc": "2.36", "machine": "x86_64"}
JAMMY = {"version": "3.10", "glibc": "2.35", "machine": "x86_64"}
TRIXIE = {"version": "3.13", "glibc": "2.41", "machine": "x86_64"}


def load(tmp_path, pythons):
    path = tmp_path / "mirror.yml"
    path.write_text(BASE + pythons)
    return mirror.load_config(path)


def refused(tmp_path, pythons):
    with pytest.raises(BadInput) as error:
        load(tmp_path, pythons)
    return str(error.value)


def test_pythons_are_read_with_the_machine_defaulting_to_x86_64(tmp_path):
    config = load(tmp_path, 'pythons:\n  - {version: "3.11", glibc: "2.36"}\n  - {version: "3.10", glibc: "2.35"}\n')
    assert config["pythons"] == [DEBIAN12, JAMMY]
    assert load(tmp_path, "")["pythons"] == []


@pytest.mark.parametrize(
    ("pythons", "message"),
    [
        ("pythons: {version: '3.11'}\n", "pythons must be a list of mappings such as {version: "),
        ("pythons: ['3.11']\n", "pythons[0]: expected a mapping such as {version: "),
        ("pythons:\n  - {version: '3.11', glibc: '2.36', abi: cp311}\n", "pythons[0]: unknown key abi (known: "),
        ("pythons:\n  - {version: '3.11'}\n", "pythons[0]: missing 'glibc', as in {version: "),
        # YAML reads an unquoted 3.10 as the number 3.1: refused, not taken for CPython 3.1.
        (
            "pythons:\n  - {version: 3.10, glibc: '2.35'}\n",
            'pythons[0]: version 3.1 is not a string: quote it (version: "3.11"); YAML reads 3.10 unquoted',
        ),
        (
            "pythons:\n  - {version: '3.11', glibc: 2.40}\n",
            'pythons[0]: glibc 2.4 is not a string: quote it (glibc: "2.36"); YAML reads 2.40 unquoted',
        ),
        ("pythons:\n  - {version: '3.11.2', glibc: '2.36'}\n", "pythons[0]: version '3.11.2' is not a CPython 3"),
        ("pythons:\n  - {version: '2.7', glibc: '2.36'}\n", "pythons[0]: version '2.7' is not a CPython 3"),
        ("pythons:\n  - {version: '3.11', glibc: '2.12'}\n", "pythons[0]: glibc '2.12' is not a glibc release"),
        ("pythons:\n  - {version: '3.11', glibc: 'bookworm'}\n", "pythons[0]: glibc 'bookworm' is not a glibc"),
        (
            "pythons:\n  - {version: '3.11', glibc: '2.36', machine: amd64}\n",
            "pythons[0]: machine 'amd64' is not one manylinux wheels are built for (aarch64, ",
        ),
        (
            "pythons:\n  - {version: '3.11', glibc: '2.36'}\n  - {version: '3.11', glibc: '2.36', machine: x86_64}\n",
            "pythons[1]: a second entry for CPython 3.11 (glibc 2.36, x86_64)",
        ),
    ],
)
def test_a_bad_pythons_entry_is_named_with_what_to_fix(tmp_path, pythons, message):
    error = refused(tmp_path, pythons)
    assert error.startswith(str(tmp_path / "mirror.yml") + ": ")
    assert message in error


def test_the_pip_download_command_for_a_target_python():
    argv = mirror.pip_download_argv(
        "python3", "/m/wheels", ["six", "vllm==0.11.1"], ["--no-index"], ["--find-links", "/p", "torch==2.9.0"], JAMMY
    )
    options = argv[: argv.index("--python-version")]
    assert options == [
        "python3",
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--quiet",
        "--only-binary=:all:",
        "-d",
        "/m/wheels",
    ]
    target = argv[len(options) : argv.index("--no-index")]
    assert target[:10] == [
        "--python-version",
        "3.10",
        "--implementation",
        "cp",
        # CPython's own ABI first: pip reads a free-threaded build from the first --abi.
        "--abi",
        "cp310",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]
    platforms = target[10:]
    assert platforms[::2] == ["--platform"] * (len(platforms) // 2)
    # pip takes a manylinux_2_N platform as given, so each glibc from 2.35 down is named; manylinux2014 widens to
    # manylinux2010 and manylinux1 in pip, and they are named as well. No linux_x86_64: built for one machine.
    assert platforms[1::2] == [
        *("manylinux_2_%d_x86_64" % minor for minor in range(35, 4, -1)),
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
    ]
    assert argv[len(options) + len(target) :] == [
        "--no-index",
        "--find-links",
        "/p",
        "torch==2.9.0",
        "six",
        "vllm==0.11.1",
    ]
    # Without a target: the Python that runs pip, as before.
    assert mirror.pip_download_argv("python3", "/m/wheels", ["six"], [], []) == [*options, "six"]


def test_machines_other_than_x86_64_start_at_manylinux2014():
    tags = mirror.platform_tags({"version": "3.12", "glibc": "2.39", "machine": "aarch64"})
    assert tags == [*("manylinux_2_%d_aarch64" % minor for minor in range(39, 16, -1)), "manylinux2014_aarch64"]


def test_top_level_markers_are_evaluated_for_the_target_not_for_the_python_running_pip():
    requirements = ['async-timeout>=4; python_version < "3.11"', "six", 'tomli; python_version < "3.11"', "--pre"]
    assert mirror.requirements_for(requirements, JAMMY) == ["async-timeout>=4", "six", "tomli", "--pre"]
    assert mirror.requirements_for(requirements, TRIXIE) == ["six", "--pre"]


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or platform.machine() not in mirror.MANYLINUX_MACHINES,
    reason="compares with the tags of a glibc host",
)
def test_the_platforms_are_those_a_host_with_that_glibc_installs():
    from packaging import tags

    here = {"version": "3.11", "glibc": platform.libc_ver()[1], "machine": platform.machine()}
    host = [tag for tag in tags.platform_tags() if not tag.startswith("linux_")]
    assert sorted(mirror.platform_tags(here)) == sorted(host)


def test_the_tags_verify_checks_are_the_tags_pip_downloads_for():
    from pip._internal.utils.compatibility_tags import get_supported

    for target in (JAMMY, TRIXIE):
        pip_tags = get_supported(
            version=target["version"].replace(".", ""),
            platforms=mirror.platform_tags(target),
            impl="cp",
            abis=["cp" + target["version"].replace(".", ""), "abi3", "none"],
        )
        assert {str(tag) for tag in mirror.target_tags(target)} == {str(tag) for tag in pip_tags}


def test_a_failed_download_names_the_target(tmp_path):
    with pytest.raises(mirror.MirrorError) as error:
        mirror.download_wheels(
            tmp_path / "wheels",
            ["instinct-no-such-package"],
            ["--no-index", "--find-links", str(tmp_path)],
            python=sys.executable,
            pythons=[JAMMY],
        )
    assert str(error.value).startswith("wheels for CPython 3.10 (glibc 2.35, x86_64): ")
    assert "instinct-no-such-package" in str(error.value)


def test_without_pythons_the_manifest_says_which_python_the_wheels_are_for(tmp_path, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(mirror, "download_wheels", lambda *args, **kwargs: asked.append(kwargs) or ["six.whl"])
    recorded = mirror.wheelhouse(load(tmp_path, "wheels: [six]\n"), tmp_path / "m", python=sys.executable)
    assert asked == [{"python": sys.executable, "pythons": []}]
    own = "%s: %s %d.%d, %s, %s" % (
        sys.executable,
        sys.implementation.name,
        *sys.version_info[:2],
        " ".join(platform.libc_ver()) or "no glibc",
        platform.machine(),
    )
    assert recorded["wheels_for"] == (
        "only the Python that built the mirror (%s): declare the hosts' Pythons under pythons" % own
    )
    assert "warning: wheels for only the Python that built the mirror" in capsys.readouterr().err
    assert recorded["pythons"] == [] and recorded["wheel_requirements"] == ["six"]


def fake_mirror(tmp_path, wheels, requirements, pythons, built=()):
    """A mirror holding only wheels/ (file names are all verify reads of a wheel) and its manifest."""
    dest = tmp_path / "mirror"
    (dest / "wheels").mkdir(parents=True)
    for name in wheels:
        (dest / "wheels" / name).write_bytes(b"zip")
    mirror.write_manifest(
        dest,
        {
            "wheels": sorted(wheels),
            "pythons": pythons,
            "wheel_requirements": requirements,
            "built_by_the_stack": list(built),
        },
    )
    return dest


def test_verify_names_each_requirement_without_a_wheel_for_a_target(tmp_path):
    dest = fake_mirror(
        tmp_path,
        [
            "markupsafe-3.0.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
            "pyyaml-6.0.3-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "cryptography-46.0.3-cp311-abi3-manylinux_2_34_x86_64.whl",  # abi3: CPython 3.11 and later
            "six-1.17.0-py2.py3-none-any.whl",
            "numpy-2.3.4-cp311-cp311-musllinux_1_2_x86_64.whl",  # musl: no glibc host installs it
            "tomli-2.3.0-py3-none-any.whl",
        ],
        [
            "markupsafe",
            "PyYAML>=6",
            "cryptography",
            "six",
            "numpy",
            'tomli; python_version < "3.11"',
            'async-timeout; python_version < "3.11"',
            "torch==2.9.0",  # built by the stack: never in the wheelhouse
            "./local/thing.whl",  # not PEP 508: not checked
        ],
        [DEBIAN12, JAMMY],
        built=["torch==2.9.0"],
    )
    assert mirror.verify(dest) == [
        "missing wheel: PyYAML>=6 for CPython 3.11 (glibc 2.36, x86_64)",
        "missing wheel: numpy for CPython 3.11 (glibc 2.36, x86_64)",
        "missing wheel: markupsafe for CPython 3.10 (glibc 2.35, x86_64)",
        "missing wheel: cryptography for CPython 3.10 (glibc 2.35, x86_64)",
        "missing wheel: numpy for CPython 3.10 (glibc 2.35, x86_64)",
        'missing wheel: async-timeout; python_version < "3.11" for CPython 3.10 (glibc 2.35, x86_64)',
    ]


def test_verify_needs_a_wheel_newer_glibcs_only_where_the_target_has_them(tmp_path):
    dest = fake_mirror(
        tmp_path,
        ["cryptography-46.0.3-cp311-abi3-manylinux_2_34_x86_64.whl", "six-1.16.0-py2.py3-none-any.whl", "six.whl"],
        ["cryptography", "six>=1.17"],
        [{"version": "3.12", "glibc": "2.31", "machine": "x86_64"}],
    )
    assert mirror.verify(dest) == [
        "not a wheel's file name: wheels/six.whl",
        "missing wheel: cryptography for CPython 3.12 (glibc 2.31, x86_64)",
        "missing wheel: six>=1.17 for CPython 3.12 (glibc 2.31, x86_64)",
    ]


def test_verify_does_not_check_wheels_without_declared_pythons(tmp_path):
    assert mirror.verify(fake_mirror(tmp_path, [], ["six"], [])) == []


@pytest.fixture(scope="module")
def downloaded(tmp_path_factory):
    """A real wheelhouse for Ubuntu 22.04's and Debian 13's Pythons, from the machine's configured index: a binary
    wheel (markupsafe) and a pure-Python one (six)."""
    tmp_path = tmp_path_factory.mktemp("wheelhouse")
    config = load(
        tmp_path,
        'wheels: [markupsafe, six]\npythons:\n  - {version: "3.10", glibc: "2.35"}\n'
        '  - {version: "3.13", glibc: "2.41", machine: x86_64}\n',
    )
    dest = tmp_path / "mirror"
    recorded = mirror.wheelhouse(config, dest, python=sys.executable)
    mirror.write_manifest(dest, recorded)
    return dest, recorded


def test_a_real_download_holds_a_wheel_for_each_target(downloaded):
    from packaging.utils import parse_wheel_filename

    dest, recorded = downloaded
    assert recorded["pythons"] == [JAMMY, TRIXIE]
    assert recorded["wheels_for"] == "CPython 3.10 (glibc 2.35, x86_64); CPython 3.13 (glibc 2.41, x86_64)"
    assert recorded["wheels"] == sorted(path.name for path in (dest / "wheels").iterdir())
    markupsafe = [parse_wheel_filename(name) for name in recorded["wheels"] if name.startswith("markupsafe-")]
    interpreters = {tag.interpreter for wheel in markupsafe for tag in wheel[3]}
    assert {"cp310", "cp313"} <= interpreters
    for target in (JAMMY, TRIXIE):
        fitting = [wheel for wheel in markupsafe if wheel[3] & mirror.target_tags(target)]
        assert fitting and all(tag.abi != "none" for wheel in fitting for tag in wheel[3])
    assert [name for name in recorded["wheels"] if name.startswith("six-")] == ["six-1.17.0-py2.py3-none-any.whl"]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["pythons"] == [JAMMY, TRIXIE] and manifest["wheel_requirements"] == ["markupsafe", "six"]
    assert mirror.verify(dest) == []


def test_verify_names_the_target_whose_wheel_was_deleted(downloaded, tmp_path):
    dest, recorded = downloaded
    copy = tmp_path / "mirror"
    (copy / "wheels").mkdir(parents=True)
    for name in recorded["wheels"]:
        if "-cp313-" not in name:
            (copy / "wheels" / name).write_bytes((dest / "wheels" / name).read_bytes())
    mirror.write_manifest(copy, recorded)
    assert mirror.verify(copy) == ["missing wheel: markupsafe for CPython 3.13 (glibc 2.41, x86_64)"]
    # And removed after the manifest was written: both the file and the target's gap are named.
    cp310 = next(name for name in recorded["wheels"] if "-cp310-" in name)
    (copy / "wheels" / cp310).unlink()
    assert mirror.verify(copy) == [
        "missing: wheels/%s" % cp310,
        "missing wheel: markupsafe for CPython 3.10 (glibc 2.35, x86_64)",
        "missing wheel: markupsafe for CPython 3.13 (glibc 2.41, x86_64)",
    ]
