"""The stack's builds against the releases the pinned vLLM's requirements/rocm-build.txt pins."""

from ansible_collections.instinct.stack.plugins.filter.sources import FilterModule
from ansible_collections.instinct.stack.plugins.module_utils.release_pairing import (
    pairing_problems,
    pinned_versions,
    release,
)

# Shaped like vllm-project/vllm requirements/rocm-build.txt at v0.11.1 (names, pins, options and comments).
V0_11_1 = """# Common dependencies
-r common.txt

--extra-index-url https://download.pytorch.invalid/whl/rocm6.4
torch==2.9.0
torchvision==0.24.0
torchaudio==2.9.0
triton==3.5.0
cmake>=3.26.1,<4
setuptools>=77.0.3,<80.0.0
amdsmi==6.4.3
"""
# v0.11.0 pinned the torch 2.8 line.
V0_11_0 = V0_11_1.replace("torch==2.9.0", "torch==2.8.0").replace("torchvision==0.24.0", "torchvision==0.23.0")
V0_11_0 = V0_11_0.replace("triton==3.5.0", "triton==3.3.0")


def test_releases_drop_pre_release_local_and_tag_parts():
    assert release("2.9.0a0") == release("2.9.0+rocm7.0.2") == release("v2.9.0") == release("2.9") == (2, 9)
    assert release("v0.24.0-fixture") == (0, 24)
    assert release("3.5.0+git5f40dc89") == (3, 5)
    assert release("main") is None


def test_pins_are_the_exact_ones_only():
    pins = pinned_versions(V0_11_1)
    assert pins["torch"] == "2.9.0" and pins["triton"] == "3.5.0" and pins["amdsmi"] == "6.4.3"
    assert "cmake" not in pins and "setuptools" not in pins


def test_a_released_pairing_has_no_problem():
    built = {"torch": "2.9.0a0", "torchvision": "v0.24.0", "triton": "3.5.0+git5f40dc89"}
    assert pairing_problems(V0_11_1, built) == []


def test_torch_2_9_with_vllm_0_11_0_is_named():
    problems = pairing_problems(V0_11_0, {"torch": "2.9.0a0", "torchvision": "v0.24.0"})
    assert problems == [
        "requirements/rocm-build.txt pins torch==2.8.0, but the stack builds torch 2.9.0a0",
        "requirements/rocm-build.txt pins torchvision==0.23.0, but the stack builds torchvision v0.24.0",
    ]


def test_a_component_not_built_yet_or_not_a_release_is_not_compared():
    assert pairing_problems(V0_11_0, {"torch": "", "torchvision": "main"}) == []
    assert pairing_problems(V0_11_0, {"triton": "3.5.0"}) == [
        "requirements/rocm-build.txt pins triton==3.3.0, but the stack builds triton 3.5.0"
    ]


def test_the_filter_names_the_source_it_was_given():
    release_pairing = FilterModule().filters()["release_pairing"]
    assert release_pairing(V0_11_0, {"torch": "2.9.0"}, "vllm v0.11.0 rocm-build.txt") == [
        "vllm v0.11.0 rocm-build.txt pins torch==2.8.0, but the stack builds torch 2.9.0"
    ]
