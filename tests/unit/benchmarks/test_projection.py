"""benchmarks/projection.py: the model's arithmetic on small inputs, and the report it prints."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("projection", os.path.join(ROOT, "benchmarks", "projection.py"))
projection = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(projection)

# Round numbers: one host 30 s with 6 s of controller CPU, 2 s of CPU per added host (6 + 10 x 2 = 26 at 11 hosts);
# the script 9 s at 1 host and 110 s for 11 hosts at once; builds 10 + 5 + 5 (low) and
# 100 + 5 + 15 (high) minutes.
SMALL = {
    "measured": {
        "source": "small inputs",
        "forks": 5,
        "script_fanout": 11,
        "collection": {
            "first": {1: (30.0, 6.0), 11: (130.0, 26.0)},
            "rerun": {1: (12.0, 4.0), 11: (52.0, 14.0)},
        },
        "script": {
            "first": {1: (9.0, 0.1), 11: (110.0, 1.1)},
            "rerun": {1: (6.0, 0.1), 11: (66.0, 1.1)},
        },
    },
    "builds": {
        "torch": {"low_min": 10, "high_min": 100, "sources": [dict.fromkeys(("used", "figure"), "x")]},
        "triton": {"low_min": 5, "high_min": 5, "sources": []},
        "vllm": {"low_min": 5, "high_min": 15, "sources": []},
    },
    # 1 GB (low) to 2 GB (high) of stack, 0.5 GB of closure, one store at 1000 MB/s.
    "bytes": {
        "stack_archive_gb": {"low": 1.0, "high": 2.0, "sources": [{"used": "low", "figure": "f", "url": "u"}]},
        "script_closure_gb": 0.5,
        "store_mb_s": 1000,
        "store_source": "a store",
    },
    "assumptions": ["an assumption"],
    "not_shown": ["a thing not shown"],
}
for _source in SMALL["builds"]["torch"]["sources"]:
    _source.update(machine="m", version="v", url="https://example.invalid/build")


def test_measured_model_takes_the_one_host_run_and_the_growth_to_the_largest():
    model = projection.measured_model(SMALL, "collection", "first")
    assert model == {
        "one_host_s": 30.0,
        "cpu_one_host_s": 6.0,
        "cpu_per_added_host_s": 2.0,
        "wall_per_added_host_s": 10.0,
    }
    # On a cluster every host runs the script on its own CPU: the one-host run is any host's cost.
    assert projection.measured_model(SMALL, "script", "first")["one_host_s"] == 9.0


def test_build_seconds_add_the_three_builds():
    assert projection.build_seconds(SMALL, "low") == 1200
    assert projection.build_seconds(SMALL, "high") == 7200


def test_the_script_builds_on_every_host_fanout_hosts_at_a_time():
    model = projection.measured_model(SMALL, "script", "first")
    assert projection.script_seconds(1, 1200, model, 1) == 1209
    # One host after another: 7 x (9 + 1200).
    assert projection.script_seconds(7, 1200, model, 1) == 8463
    # Five at a time: two waves.
    assert projection.script_seconds(7, 1200, model, 5) == 2418
    assert projection.script_seconds(5, 1200, model, 5) == 1209


def test_the_collection_builds_once_then_waves_of_forks():
    model = projection.measured_model(SMALL, "collection", "first")
    # 1 host: 1200 + max(30, 6 / 2).
    assert projection.collection_seconds(1, 1200, model, forks=5, controller_cores=2) == 1230
    # 11 hosts: three waves of 30 s (90) against (6 + 10 x 2) / 2 = 13 s of controller time.
    assert projection.collection_seconds(11, 1200, model, forks=5, controller_cores=2) == 1290


def test_the_controller_paces_the_collection_when_its_cpu_is_the_slower_side():
    model = projection.measured_model(SMALL, "collection", "first")
    # 101 hosts at forks 100: two waves (60 s) against (6 + 100 x 2) / 2 = 103 s.
    assert projection.collection_seconds(101, 0, model, forks=100, controller_cores=2) == 103
    # Eight cores: 206 / 8 = 25.75 s, so the waves pace it again.
    assert projection.collection_seconds(101, 0, model, forks=100, controller_cores=8) == 60
    # Forks cap the cores the controller can use.
    assert projection.collection_seconds(101, 0, model, forks=1, controller_cores=8) == 101 * 30


def test_one_stores_uplink_paces_the_collection_when_the_bytes_are_the_slower_side():
    model = projection.measured_model(SMALL, "collection", "first")
    assert projection.store_mb_s(SMALL) == 1000
    # A 4 Gb/s uplink sends 500 MB/s, below the store's measured 1000; a 100 Gb/s one does not raise it.
    assert projection.store_mb_s(SMALL, 4) == 500 and projection.store_mb_s(SMALL, 100) == 1000
    # 11 hosts x 2 GB at 1000 MB/s: 22 s, under three waves of 30 s; with a 10 GB model, 132 s sets the pace.
    assert projection.transfer_seconds(11, 2.0, 1000) == 22
    waves = projection.collection_seconds(11, 0, model, forks=5, transfer_s=22)
    assert waves == 90
    assert (
        projection.collection_seconds(11, 0, model, forks=5, transfer_s=projection.transfer_seconds(11, 12, 1000))
        == 132
    )
    # The threshold: a host's share of the rollout, max(30 / 5, 2 / 2) = 6 s, at 1000 MB/s is 6 GB per host.
    assert projection.uplink_limit(SMALL, 1000, forks=5, controller_cores=2) == 6.0
    # The script's mirror carries every host's downloads too.
    script = projection.measured_model(SMALL, "script", "first")
    assert projection.script_seconds(11, 0, script, 11, transfer_s=50) == 50


def test_arch_lists_build_one_after_another_per_build_host():
    model = projection.measured_model(SMALL, "collection", "first")
    one = projection.collection_seconds(11, 1200, model, archs=1, forks=5)
    assert projection.collection_seconds(11, 1200, model, archs=3, forks=5) == one + 2 * 1200
    assert projection.collection_seconds(11, 1200, model, archs=3, build_hosts=2, forks=5) == one + 1200
    assert projection.collection_seconds(11, 1200, model, archs=3, build_hosts=3, forks=5) == one
    # No more arch lists than hosts.
    assert projection.collection_seconds(1, 1200, model, archs=4, forks=5) == 1230


def test_compile_hours_every_host_against_once_per_arch_list():
    assert projection.compile_hours(100, 3600, 1) == (100, 1)
    assert projection.compile_hours(100, 1800, 2) == (50, 1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(17, "17 s"), (89.6, "90 s"), (120, "2 min"), (5340, "89 min"), (5400, "1.5 h"), (172800, "2.0 d")],
)
def test_duration_picks_a_readable_unit(seconds, text):
    assert projection.duration(seconds) == text


def test_the_tables_give_low_to_high_for_each_host_count():
    first, rerun = projection.projection_tables(SMALL, [1, 11], forks=5, script_fanout=5, controller_cores=2)
    rows = first.splitlines()
    assert "5 hosts at a time" in rows[0] and "forks 5" in rows[0]
    # 11 hosts, low (1200 s) and high (7200 s) builds: the script 11 x 1209 = 13299 s and 11 x 7209 s one at a
    # time, 3 x 1209 (60.5 min) and 3 x 7209 five at a time; the collection 1200 + 90 and 7200 + 90; compiling
    # 11 x 1/3 h against 1/3 h.
    assert [cell.strip() for cell in rows[3].strip("|").split("|")] == [
        "11",
        "3.7 h to 22.0 h",
        "60 min to 6.0 h",
        "22 min to 2.0 h",
        "3.7 h to 22 h / 0.3 h to 2.0 h",
    ]
    # The rerun: the script builds again (11 x (6 + 1200)), the collection does not: max(3 x 12, (4 + 10) / 2).
    assert [cell.strip() for cell in rerun.splitlines()[3].strip("|").split("|")] == [
        "11",
        "3.7 h to 22.0 h",
        "60 min to 6.0 h",
        "36 s",
    ]


def test_the_report_says_it_is_a_projection_and_names_its_inputs():
    text = projection.report(SMALL, [1, 31], forks=5, script_fanout=5, controller_cores=2)
    assert text.startswith("**A projection, not a measurement.**")
    assert "- an assumption" in text and "- a thing not shown" in text
    assert "- torch, x: x. Machine: m. Version: v. <https://example.invalid/build>" in text
    # The model against its own inputs: 11 hosts measured 130 s, modelled 3 waves of 30 s; the script's 11 hosts
    # ran at once (script_fanout 11), modelled as one host's 9 s.
    assert "| 11 | 130.0 s | 90.0 s | 110.0 s | 9.0 s |" in text
    # The measuring machine's own growth, 10 s per added host: 30 + 30 x 10 = 330 s at 31 hosts, where the model
    # gives 7 waves of 30 s.
    assert "would be 6 min at 31 hosts, not 4 min" in text
    assert "above 6.0 GB per host at 1000 MB/s" in text and "- low: f. <u>" in text


def test_main_refuses_nonsense_and_prints_the_default_projection(capsys):
    with pytest.raises(SystemExit):
        projection.main(["--build-hosts", "0"])
    assert projection.main(["--archs", "2", "--build-hosts", "2"]) == 0
    out = capsys.readouterr().out
    assert "| 1000 |" in out and "(2 arch lists, 2 build hosts, forks 20)" in out
    with pytest.raises(SystemExit):
        projection.main(["--uplink-gbps", "0"])
    assert projection.main(["--model-gb", "140", "--uplink-gbps", "10"]) == 0
    assert "one store sends 1250 MB/s (a 10 Gb/s uplink)" in capsys.readouterr().out
