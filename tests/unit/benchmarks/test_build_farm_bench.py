"""benchmarks/build_farm.py's pure parts: when the builds ran relative to the run, their span and overlap, the table."""

from benchmarks import build_farm


def build(arch, start, end, host="ibench-1"):
    return {"host": host, "arch": arch, "seconds": end - start, "start": start, "end": end, "ccache": None}


def test_builds_one_after_another_do_not_overlap():
    builds, span, overlap = build_farm.schedule([build("gfx942", 1100, 1160), build("gfx90a", 1030, 1090)], 1000)
    assert [(b["arch"], b["start"], b["end"]) for b in builds] == [("gfx90a", 30, 90), ("gfx942", 100, 160)]
    assert span == 130 and overlap == 0


def test_builds_at_once_overlap_by_their_common_time():
    builds, span, overlap = build_farm.schedule(
        [build("gfx90a", 1030, 1090), build("gfx942", 1035, 1096, host="ibench-2")], 1000
    )
    assert span == 66 and overlap == 55
    assert {b["host"] for b in builds} == {"ibench-1", "ibench-2"}


def test_no_builds_is_no_span():
    assert build_farm.schedule([], 0) == ([], 0, 0)


def test_the_table_gives_the_ratio_of_two_build_hosts_to_one():
    one = {
        "build_hosts": 1,
        "wall": 200.0,
        "controller_cpu": 20.0,
        "tasks": 150,
        "changed": 60,
        "build_span": 130,
        "overlap": 0,
        "builds": [build("gfx90a", 30, 90), build("gfx942", 100, 160)],
    }
    two = dict(
        one,
        build_hosts=2,
        wall=140.0,
        build_span=66,
        overlap=55,
        builds=[build("gfx90a", 30, 90), build("gfx942", 35, 96, host="ibench-2")],
    )
    text = build_farm.table([one, two], 60)
    assert "stretched to 60 s" in text
    assert "gfx942@ibench-2 35-96" in text
    assert "two build hosts / one: wall 0.70, build span 0.51" in text
