"""The filters as the roles call them: errors become AnsibleFilterError with the module_utils message."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.instinct.stack.plugins.filter.build import FilterModule

FILTERS = FilterModule().filters()


def test_every_filter_has_its_documentation_file():
    import os

    here = os.path.join(os.path.dirname(FILTERS["rocm_arch"].__code__.co_filename))
    assert sorted(name for name in FILTERS if not os.path.isfile(os.path.join(here, name + ".yml"))) == []


def test_rocm_arch_takes_radeon_only_when_allowed():
    assert FILTERS["rocm_arch"](["gfx942", "gfx90a"]) == "gfx90a;gfx942"
    with pytest.raises(AnsibleFilterError, match="gfx1100.*allow_radeon=true also"):
        FILTERS["rocm_arch"](["gfx942", "gfx1100"])
    assert FILTERS["rocm_arch"](["gfx942", "gfx1100"], allow_radeon=True) == "gfx1100;gfx942"


def test_vllm_instances_errors_name_the_option():
    with pytest.raises(AnsibleFilterError, match="quantization 'fp8' needs fp8 hardware"):
        FILTERS["vllm_instances"]([{"name": "a", "model": "m", "quantization": "fp8"}], 1, "", ["gfx90a"])


def test_git_filters_compose():
    rewrites = FILTERS["git_mirror_rewrites"](["github.com"], "http://mirror/")
    assert FILTERS["git_config_env"](rewrites) == {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "url.http://mirror/git/github.com/.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/",
    }


def test_build_download_filters_fail_as_filter_errors():
    with pytest.raises(AnsibleFilterError, match="llvm-hash.txt"):
        FILTERS["triton_llvm"]("not a commit")
    assert FILTERS["triton_llvm"]("7d5de3033187c8a3", "ubuntu-x64", "")["name"] == "llvm-7d5de303-ubuntu-x64"
    with pytest.raises(AnsibleFilterError, match="cannot read AOTriton"):
        FILTERS["aotriton_downloads"]("", "7.0.2", "gfx942")
    with pytest.raises(AnsibleFilterError, match="not a file URL"):
        FILTERS["mirror_file_url"]("git@github.com:x/y", "http://mirror/")
    assert FILTERS["mirror_file_url"]("https://h/p/f.tar.gz", "http://mirror/") == "http://mirror/files/h/p/f.tar.gz"


def test_build_farm_errors_are_filter_errors():
    assert FILTERS["build_farm"](["gfx90a", "gfx942"], ["b1", "b2"], {}, "b1", ["b1", "b2"]) == {
        "gfx90a": "b1",
        "gfx942": "b2",
    }
    with pytest.raises(AnsibleFilterError, match="add it to build_hosts"):
        FILTERS["build_farm"](["gfx942"], ["b1", "b2"], {"b3": ["gfx942"]}, "b1")
    assert FILTERS["build_waves"]({"gfx90a": "b1", "gfx942": "b2"}, ["b1", "b2"]) == [["gfx90a", "gfx942"]]
