"""The fixture sources are a released pairing, as the roles' defaults are: the fixture vLLM's
requirements/rocm-build.txt pins what the fixture PyTorch, torchvision and Triton build (vLLM v0.11.1 pins torch 2.9.0,
torchvision 0.24.0, triton 3.5.0), and the roles' default refs are that pairing's upstream tags."""

import os
import re

import yaml

from ansible_collections.instinct.stack.plugins.module_utils.release_pairing import pairing_problems, pinned_versions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = os.path.join(ROOT, "molecule", "shared", "mirror", "sources")


def read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


def defaults(role):
    return yaml.safe_load(read(ROOT, "roles", role, "defaults", "main.yml"))


def test_the_fixture_sources_are_the_pairing_their_vllm_pins():
    triton = re.search(r'__version__ = "([^"]+)"', read(SOURCES, "triton", "triton", "__init__.py")).group(1)
    built = {
        "torch": read(SOURCES, "pytorch", "version.txt").strip(),
        "torchvision": "v0.24.0-fixture",
        "triton": triton,
    }
    assert pairing_problems(read(SOURCES, "vllm", "requirements", "rocm-build.txt"), built) == []


def test_the_roles_defaults_are_the_pairing_vllm_v0_11_1_released():
    pytorch, vllm = defaults("pytorch"), defaults("vllm")
    assert vllm["vllm_version"] == "v0.11.1"
    # vllm-project/vllm requirements/rocm-build.txt at v0.11.1 (the fixture carries its pins).
    pins = pinned_versions(read(SOURCES, "vllm", "requirements", "rocm-build.txt"))
    assert (pins["torch"], pins["torchvision"], pins["triton"]) == ("2.9.0", "0.24.0", "3.5.0")
    built = {"torch": pytorch["pytorch_version"], "torchvision": pytorch["pytorch_vision_version"]}
    assert pairing_problems(read(SOURCES, "vllm", "requirements", "rocm-build.txt"), built) == []


def test_the_old_default_pairing_is_refused():
    # torch 2.9.0 beside vLLM v0.11.0, whose rocm-build.txt pinned torch 2.8.0: the pairing this check exists for.
    v0_11_0 = read(SOURCES, "vllm", "requirements", "rocm-build.txt").replace("torch==2.9.0", "torch==2.8.0")
    assert pairing_problems(v0_11_0, {"torch": "v2.9.0"}) == [
        "requirements/rocm-build.txt pins torch==2.8.0, but the stack builds torch v2.9.0"
    ]
