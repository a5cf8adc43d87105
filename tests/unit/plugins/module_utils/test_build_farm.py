"""The build farm's assignment of arch lists to build hosts, its waves, and the ccache statistics a build records."""

from pathlib import Path

import pytest

from ansible_collections.instinct.stack.plugins.module_utils.build_farm import (
    BuildFarmError,
    assign,
    ccache_stats,
    waves,
)

FIXTURES = Path(__file__).resolve().parents[2].parent / "fixtures" / "ccache"
ARCHS = ["gfx942", "gfx90a", "gfx1100;gfx942"]


@pytest.mark.parametrize("build_hosts", [[], ["b1"]])
def test_zero_or_one_build_host_builds_everything_on_the_default(build_hosts):
    expected = "b1" if build_hosts else "node1"
    assert assign(ARCHS, build_hosts, {}, "node1") == dict.fromkeys(ARCHS, expected)


def test_one_build_host_ignores_pins_to_it():
    assert assign(["gfx942"], ["b1"], {"b1": ["gfx942"]}, "b1") == {"gfx942": "b1"}


def test_several_build_hosts_take_the_sorted_arch_lists_round_robin_in_inventory_order():
    assert assign(ARCHS, ["b2", "b1"], {}, "b2") == {"gfx1100;gfx942": "b2", "gfx90a": "b1", "gfx942": "b2"}
    # Stable: the same arch lists in another order, or repeated, give the same assignment.
    assert assign(list(reversed(ARCHS)) + ARCHS, ["b2", "b1"], None, "b2") == assign(ARCHS, ["b2", "b1"], {}, "b2")


def test_more_build_hosts_than_arch_lists_leaves_the_last_idle():
    assert assign(["gfx942"], ["b1", "b2"], {}, "b1") == {"gfx942": "b1"}


def test_pins_take_precedence_and_the_rest_fill_the_least_loaded_hosts():
    # gfx90a pinned to b1: the unpinned two go to b2 (no arch list yet), then to b1 and b2 tie, b1 first.
    pinned = {"b1": ["gfx90a"]}
    assert assign(ARCHS, ["b1", "b2"], pinned, "b1") == {"gfx90a": "b1", "gfx1100;gfx942": "b2", "gfx942": "b1"}
    # An arch list matches whatever the order of its archs; a single string is one arch list; a pin that no host of
    # the play needs is ignored.
    pinned = {"b2": "gfx942;gfx1100", "b1": ["gfx908"]}
    assert assign(ARCHS, ["b1", "b2"], pinned, "b1") == {"gfx1100;gfx942": "b2", "gfx90a": "b1", "gfx942": "b1"}


def test_pin_on_a_host_outside_build_hosts_says_what_to_fix():
    with pytest.raises(BuildFarmError, match="pins arch lists to b3, which is not in the build_hosts group.*add it"):
        assign(ARCHS, ["b1", "b2"], {"b3": ["gfx942"]}, "b1")
    with pytest.raises(BuildFarmError, match="not in the build_hosts group \\(empty\\)"):
        assign(ARCHS, [], {"b3": ["gfx942"]}, "node1")


def test_an_arch_list_pinned_twice_is_refused():
    with pytest.raises(BuildFarmError, match="pins the arch list gfx90a;gfx942 to both b1 and b2"):
        assign(ARCHS, ["b1", "b2"], {"b1": ["gfx942;gfx90a"], "b2": ["gfx90a;gfx942"]}, "b1")


@pytest.mark.parametrize("entry", ["", "  ", None])
def test_an_empty_build_host_is_refused(entry):
    with pytest.raises(BuildFarmError, match="build_hosts group has an empty entry"):
        assign(ARCHS, ["b1", entry], {}, "b1")


def test_build_hosts_must_be_in_the_inventory():
    with pytest.raises(BuildFarmError, match="build host\\(s\\) b9 are not in the inventory"):
        assign(ARCHS, ["b1", "b9"], {}, "b1", inventory_hosts=["b1", "b2", "node1"])
    assert assign(ARCHS, ["b1"], {}, "b1", inventory_hosts=["b1"]) == dict.fromkeys(ARCHS, "b1")


def test_pins_must_be_a_mapping():
    with pytest.raises(BuildFarmError, match="must map build hosts to lists of arch lists"):
        assign(ARCHS, ["b1", "b2"], ["gfx942"], "b1")


def test_no_build_host_at_all_is_refused():
    with pytest.raises(BuildFarmError, match="no build host"):
        assign(ARCHS, [], {}, "")


def test_waves_run_at_most_one_build_per_build_host():
    assignment = assign(ARCHS + ["gfx908"], ["b2", "b1"], {}, "b2")
    # Sorted gfx1100;gfx942, gfx908, gfx90a, gfx942 go to b2, b1, b2, b1; b2 comes first in each wave.
    assert waves(assignment, ["b2", "b1"]) == [["gfx1100;gfx942", "gfx908"], ["gfx90a", "gfx942"]]


def test_one_build_host_builds_one_arch_list_per_wave_in_sorted_order():
    assert waves(assign(ARCHS, [], {}, "node1")) == [["gfx1100;gfx942"], ["gfx90a"], ["gfx942"]]
    assert waves({}) == []


def test_ccache_statistics_of_a_build_with_hits_and_misses():
    # `ccache --print-stats` of ccache 4.7.5 (Debian 12) after three compiles: two misses, then one direct hit.
    text = (FIXTURES / "print-stats-4.7.5-mixed.txt").read_text()
    assert ccache_stats(text) == {"hits": 1, "misses": 2, "hit_rate": 0.3333}


def test_ccache_statistics_right_after_zeroing_have_no_rate():
    text = (FIXTURES / "print-stats-4.7.5-zeroed.txt").read_text()
    assert ccache_stats(text) == {"hits": 0, "misses": 0, "hit_rate": None}


@pytest.mark.parametrize("text", [None, "", "ccache: invalid option -- '-print-stats'\n"])
def test_ccache_statistics_unreadable_are_none(text):
    assert ccache_stats(text) is None
