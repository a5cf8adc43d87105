"""benchmarks/ccache_hits.py's pure parts: the compile units of a ccache log, named relative to their staging tree."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("ccache_hits", os.path.join(ROOT, "benchmarks", "ccache_hits.py"))
ccache_hits = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ccache_hits)

# Lines of a real ccache 4.7.5 log (CCACHE_LOGFILE) of the benchmark's second build, paths shortened: CMake's compiler
# probe, then two units compiled at once (their lines interleave), the first with base_dir's relative source path.
TREE = "/w/staging/pytorch-bcc9147a167e35f8/src"
LOG = """\
[2026-12-05T18:40:23.395943 10929] === CCACHE 4.7.5 STARTED =========================================
[2026-12-05T18:40:23.396012 10929] Working directory: {tree}/build/CMakeFiles/CMakeScratch/TryCompile-1ZefuZ
[2026-12-05T18:40:23.396057 10929] Source file: /w/venv/share/cmake-3.31/Modules/CMakeCXXCompilerABI.cpp
[2026-12-05T18:40:23.397538 10929] Result: direct_cache_hit
[2026-12-05T18:40:23.397539 10929] Result: local_storage_hit
[2026-12-05T18:40:23.677993 10943] === CCACHE 4.7.5 STARTED =========================================
[2026-12-05T18:40:23.678073 10943] Working directory: {tree}/build
[2026-12-05T18:40:23.678127 10943] Source file: ops.cpp
[2026-12-05T18:40:23.679172 10944] === CCACHE 4.7.5 STARTED =========================================
[2026-12-05T18:40:23.679231 10944] Working directory: {tree}/build
[2026-12-05T18:40:23.679277 10944] Source file: ../torch/csrc/host_ops.cpp
[2026-12-05T18:40:23.686862 10944] Result: direct_cache_hit
[2026-12-05T18:40:23.686863 10944] Result: local_storage_hit
[2026-12-05T18:40:23.750032 10943] Result: cache_miss
[2026-12-05T18:40:23.750034 10943] Result: direct_cache_miss
[2026-12-05T18:40:23.750035 10943] Result: local_storage_miss
[2026-12-05T18:40:23.750042 10943] Result: preprocessed_cache_miss
""".format(tree=TREE)


def test_units_of_an_interleaved_log_get_their_own_results_and_absolute_sources():
    units = ccache_hits.parse_ccache_log(LOG)
    assert [(unit["pid"], unit["source"], unit["result"]) for unit in units] == [
        (10929, "/w/venv/share/cmake-3.31/Modules/CMakeCXXCompilerABI.cpp", "hit"),
        (10943, TREE + "/build/ops.cpp", "miss"),
        (10944, TREE + "/torch/csrc/host_ops.cpp", "hit"),
    ]


def test_a_run_that_compiled_nothing_keeps_ccaches_counter():
    log = (
        "[2026-12-05T18:40:24.000001 11000] === CCACHE 4.7.5 STARTED ====\n"
        "[2026-12-05T18:40:24.000002 11000] Working directory: /w\n"
        "[2026-12-05T18:40:24.000003 11000] Result: called_for_link\n"
    )
    assert ccache_hits.parse_ccache_log(log) == [{"pid": 11000, "source": None, "result": "called_for_link"}]


def test_the_checkouts_units_are_named_in_their_tree_and_the_probe_is_left_out_of_their_rate():
    other_tree = "/w/staging/pytorch-30ddf7d256efc5b4/src"
    units = ccache_hits.parse_ccache_log(LOG)
    for unit in units:
        unit["source"], unit["in_tree"] = ccache_hits.unit_name(unit["source"], [other_tree, TREE])
    assert [(unit["source"], unit["in_tree"]) for unit in units] == [
        ("/w/venv/share/cmake-3.31/Modules/CMakeCXXCompilerABI.cpp", False),
        ("build/ops.cpp", True),
        ("torch/csrc/host_ops.cpp", True),
    ]
    assert ccache_hits.tree_units(units) == {
        "hit": ["torch/csrc/host_ops.cpp"],
        "miss": ["build/ops.cpp"],
        "hit_rate": 0.5,
    }
    assert ccache_hits.tree_units([])["hit_rate"] is None
