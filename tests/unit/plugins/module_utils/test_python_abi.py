"""module_utils/python_abi.py: the probe run by real interpreters on this machine (the distribution's python3 and
pyenv's builds, when present), and the fleet check's sentence."""

import glob
import re
import subprocess
import sys

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import python_abi

# The interpreters that can answer here: the one running the tests, /usr/bin/python3, and pyenv's builds of the
# versions ansible-core runs modules with (3.8 on; before 3.8 platform.libc_ver() scanned the binary for a version).
INTERPRETERS = sorted(
    {sys.executable, "/usr/bin/python3"}
    | {path for path in glob.glob("/root/.pyenv/versions/3.*/bin/python3") if not re.search(r"/3\.[67]\.", path)}
)


def probe(python):
    return python_abi.describe(
        subprocess.run([python, "-c", python_abi.PROBE], capture_output=True, check=True, text=True).stdout
    )


@pytest.mark.parametrize("python", [path for path in INTERPRETERS if glob.glob(path)])
def test_the_probe_names_the_interpreter_platform_and_libc(python):
    abi = probe(python)
    version = subprocess.run(
        [python, "-c", "import sys; print('%d%d' % sys.version_info[:2])"], capture_output=True, check=True, text=True
    ).stdout.strip()
    assert abi["interpreter"] == "cp" + version
    assert abi["platform"] == "linux_x86_64"
    assert abi["libc"].startswith("glibc2.")
    assert abi["key"] == "%s-%s-%s" % (abi["interpreter"], abi["platform"], abi["libc"])
    assert abi["soabi"].startswith("cpython-%s-" % version)


def test_two_interpreters_of_one_machine_differ_only_in_the_interpreter_tag():
    keys = {probe(python)["key"] for python in INTERPRETERS if glob.glob(python)}
    assert len({key.split("-", 1)[1] for key in keys}) == 1


def test_the_output_of_another_release_reads_as_its_abi():
    # What Ubuntu 22.04's python3 prints: CPython 3.10.12 on glibc 2.35.
    abi = python_abi.describe(
        '{"implementation": "cpython", "version": "3.10.12", "version_info": [3, 10], '
        '"soabi": "cpython-310-x86_64-linux-gnu", "platform": "linux-x86_64", "libc": ["glibc", "2.35"]}'
    )
    assert abi == {
        "key": "cp310-linux_x86_64-glibc2.35",
        "python": "3.10.12",
        "interpreter": "cp310",
        "platform": "linux_x86_64",
        "libc": "glibc2.35",
        "soabi": "cpython-310-x86_64-linux-gnu",
    }


@pytest.mark.parametrize("output", ["", "Traceback", '{"implementation": "cpython"}', "[1, 2]"])
def test_unexpected_output_is_an_error_that_shows_it(output):
    with pytest.raises(ValueError, match="unexpected output from the Python ABI probe"):
        python_abi.describe(output)


DEBIAN12 = {"key": "cp311-linux_x86_64-glibc2.36", "python": "3.11.2"}
DEBIAN13 = {"key": "cp313-linux_x86_64-glibc2.41", "python": "3.13.5"}


def test_one_abi_is_no_problem():
    assert python_abi.fleet_problem({"node1": DEBIAN12, "node2": dict(DEBIAN12)}) == ""
    assert python_abi.fleet_problem({}) == ""


def test_two_abis_are_named_with_their_hosts_the_larger_group_first():
    problem = python_abi.fleet_problem({"node1": DEBIAN12, "node2": DEBIAN12, "node3": DEBIAN13})
    assert problem.startswith("the hosts run Pythons of 2 ABIs")
    groups = "cp311-linux_x86_64-glibc2.36 (Python 3.11.2): node1, node2; "
    assert groups + "cp313-linux_x86_64-glibc2.41 (Python 3.13.5): node3" in problem
    assert "as a run of their own" in problem


def test_a_large_group_is_counted_after_five_names():
    fleet = {"gpu%02d" % number: DEBIAN12 for number in range(12)}
    fleet["new"] = DEBIAN13
    problem = python_abi.fleet_problem(fleet)
    assert "gpu00, gpu01, gpu02, gpu03, gpu04 and 7 more" in problem


def test_a_host_without_the_fact_is_named_as_unknown():
    problem = python_abi.fleet_problem({"node1": DEBIAN12, "node2": None, "node3": {}})
    assert problem == "the Python ABI of node2, node3 is unknown: run instinct.stack.python_abi on it first"
