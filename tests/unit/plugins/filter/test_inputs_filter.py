"""instinct.stack.given_inputs_spec, the first play's merge of the roles' argument specs, on the roles' own specs and as
ansible-core templates it (its data in lazy template containers)."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.instinct.stack.plugins.filter.inputs import FilterModule

given_inputs_spec = FilterModule().filters()["given_inputs_spec"]
ROOT = Path(__file__).resolve().parents[4]
# ansible-playbook of the interpreter running the tests (.venv).
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
ROLES = sorted(path.parent.parent.name for path in ROOT.glob("roles/*/meta/argument_specs.yml"))


def spec(options):
    return {"argument_specs": {"main": {"options": options}}}


def test_defaults_go_at_every_level_and_the_input_is_left_as_it_was():
    given = spec(
        {
            "a_port": {"type": "int", "default": 8000},
            "a_instances": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"name": {"type": "str", "required": True}, "port": {"type": "int", "default": 1}},
            },
        }
    )
    before = copy.deepcopy(given)
    merged = given_inputs_spec([given])
    assert merged == {
        "a_port": {"type": "int"},
        "a_instances": {
            "type": "list",
            "elements": "dict",
            "options": {"name": {"type": "str", "required": True}, "port": {"type": "int"}},
        },
    }
    assert given == before


def test_two_roles_declaring_one_option_differently_is_a_defect_of_the_specs():
    with pytest.raises(AnsibleFilterError, match="'x_mode' is declared differently"):
        given_inputs_spec([spec({"x_mode": {"type": "str"}}), spec({"x_mode": {"type": "int"}})])
    # The same declaration twice is one option.
    assert given_inputs_spec([spec({"x_mode": {"type": "str"}})] * 2) == {"x_mode": {"type": "str"}}


def test_a_spec_without_the_entry_point_is_named():
    with pytest.raises(AnsibleFilterError, match="no options for entry point 'main'"):
        given_inputs_spec([{"argument_specs": {"other": {}}}])


def test_the_roles_specs_merge_as_ansible_templates_them(tmp_path):
    # As check_inputs.yml reads them, in ansible-playbook: each file through from_yaml and the merge inside a template,
    # so the filter gets ansible-core's lazy containers (a deep copy of those made this task take 20 s per rollout).
    paths = [str(ROOT / "roles" / role / "meta" / "argument_specs.yml") for role in ROLES]
    playbook = tmp_path / "merge.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "ansible.builtin.copy": {
                                "content": "{{ query('ansible.builtin.file', *paths) | map('from_yaml')"
                                " | instinct.stack.given_inputs_spec | to_json }}",
                                "dest": str(tmp_path / "merged.json"),
                                "mode": "0644",
                            }
                        }
                    ],
                }
            ]
        )
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    extra = {"paths": paths, "ansible_python_interpreter": sys.executable}
    argv = [str(PLAYBOOK), "-i", "localhost,", "-c", "local", str(playbook), "-e", json.dumps(extra)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False)  # noqa: S603
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    expected = {}
    for role in ROLES:
        options = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        expected.update(options["argument_specs"]["main"]["options"])
    assert set(merged) == set(expected) and len(merged) > 50
    assert not [name for name, option in merged.items() if "default" in option]
    assert merged["vllm_service_instances"]["elements"] == "dict"
