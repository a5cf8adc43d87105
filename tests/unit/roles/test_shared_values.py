"""The collection's shared values have one home, roles/common/defaults, which every role depends on; no role or
playbook defaults them again inline."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
ROLES = sorted(path.name for path in (ROOT / "roles").iterdir() if path.is_dir() and path.name != "common")
SHARED = yaml.safe_load((ROOT / "roles" / "common" / "defaults" / "main.yml").read_text())


def test_the_shared_values_are_documented_in_the_common_roles_argument_spec():
    spec = yaml.safe_load((ROOT / "roles" / "common" / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    assert {name: options[name]["default"] for name in options} == SHARED


@pytest.mark.parametrize("role", ROLES)
def test_every_role_depends_on_the_common_role(role):
    meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text())
    assert {"role": "instinct.stack.common"} in meta["dependencies"]


def test_no_role_or_playbook_defaults_a_shared_value_again():
    inline = []
    for path in sorted([*(ROOT / "roles").rglob("*.yml"), *(ROOT / "playbooks").rglob("*.yml")]):
        if path.is_relative_to(ROOT / "roles" / "common"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for name, value in SHARED.items():
                # A default for the variable itself, or its value written out as a default.
                if re.search(r"\b%s \| default\((?!.*, true\))" % name, code) or (value and str(value) in code):
                    inline.append("%s:%d: %s" % (path.relative_to(ROOT), number, line.strip()))
    assert inline == []
