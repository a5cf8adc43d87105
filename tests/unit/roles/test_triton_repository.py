"""The triton role's repository follows the PyTorch source: ROCm's fork (ROCm/pytorch release branches, as AMD's
TheRock builds them) pins Triton commits that exist only in ROCm/triton (TheRock external-builds/pytorch/
pytorch_triton_repo.py clones ROCm/triton for them); upstream PyTorch pins triton-lang/triton commits. Rendered by
ansible-playbook from the role's own defaults."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def triton_git_url(tmp_path, **extra_vars):
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n"
        "  vars_files: [%s, %s]\n"
        % (ROOT / "roles/triton/defaults/main.yml", ROOT / "roles/pytorch/defaults/main.yml")
        + "  tasks:\n    - ansible.builtin.copy: {content: '{{ triton_git_url }}', dest: '%s'}\n" % (tmp_path / "out")
    )
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_LOCALHOST_WARNING="false")
    subprocess.run(
        [
            str(PLAYBOOK),
            "-i",
            "localhost,",
            str(play),
            "-e",
            json.dumps(dict(extra_vars, ansible_python_interpreter=sys.executable)),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return (tmp_path / "out").read_text()


@pytest.mark.parametrize(
    "pytorch_git_url, expected",
    [
        ("https://github.com/pytorch/pytorch.git", "https://github.com/triton-lang/triton.git"),
        ("https://github.com/ROCm/pytorch.git", "https://github.com/ROCm/triton.git"),
        ("git@github.com:ROCm/pytorch.git", "https://github.com/ROCm/triton.git"),
    ],
)
def test_the_triton_repository_follows_the_pytorch_source(tmp_path, pytorch_git_url, expected):
    assert triton_git_url(tmp_path, pytorch_git_url=pytorch_git_url) == expected


def test_the_default_pytorch_source_gets_upstream_triton(tmp_path):
    assert triton_git_url(tmp_path) == "https://github.com/triton-lang/triton.git"
