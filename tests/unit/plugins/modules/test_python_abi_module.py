"""instinct.stack.python_abi as Ansible runs it, with this machine's real interpreters."""

import json
import sys

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import python_abi


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        python_abi.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_the_fact_names_the_interpreter_and_its_abi(capsys):
    code, result = run_module({"python": sys.executable}, capsys)
    assert code == 0 and result["changed"] is False
    abi = result["ansible_facts"]["instinct_python_abi"]
    assert abi["executable"] == sys.executable
    assert abi["interpreter"] == "cp%d%d" % sys.version_info[:2]
    assert abi["key"].startswith(abi["interpreter"] + "-linux_x86_64-glibc2.")


def test_a_name_is_looked_up_in_the_path(capsys):
    code, result = run_module({}, capsys)
    assert code == 0
    assert result["ansible_facts"]["instinct_python_abi"]["executable"].endswith("/python3")


def test_a_missing_interpreter_says_what_to_install(capsys):
    code, result = run_module({"python": "python2.99"}, capsys)
    assert code == 1 and result["msg"].startswith("no python2.99 on the host: install the distribution's python3")


def test_an_interpreter_that_fails_is_named(tmp_path, capsys):
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\necho 'cannot run' >&2\nexit 3\n")
    broken.chmod(0o755)
    code, result = run_module({"python": str(broken)}, capsys)
    assert code == 1 and result["msg"] == "%s could not report its ABI: cannot run" % broken and result["rc"] == 3
