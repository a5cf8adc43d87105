"""The fleet filters as the playbooks call them, with their documentation beside them."""

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.instinct.stack.plugins.filter.fleet import FilterModule

FILTERS = FilterModule().filters()


def test_every_filter_has_its_documentation_file():
    here = os.path.dirname(FILTERS["python_abi_problem"].__code__.co_filename)
    assert sorted(name for name in FILTERS if not os.path.isfile(os.path.join(here, name + ".yml"))) == []


def test_python_abi_problem_names_the_hosts_of_each_abi():
    problem = FILTERS["python_abi_problem"](
        {
            "a": {"key": "cp311-linux_x86_64-glibc2.36", "python": "3.11.2"},
            "b": {"key": "cp310-linux_x86_64-glibc2.35", "python": "3.10.12"},
        }
    )
    assert "cp310-linux_x86_64-glibc2.35 (Python 3.10.12): b" in problem and "(Python 3.11.2): a" in problem
    assert FILTERS["python_abi_problem"]({"a": {"key": "k"}}) == ""


def test_python_abi_problem_refuses_what_is_not_a_dict():
    with pytest.raises(AnsibleFilterError, match="takes a dict of host name to instinct_python_abi"):
        FILTERS["python_abi_problem"](["a", "b"])
