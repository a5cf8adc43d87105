"""benchmarks/stack_install.py's parts that need no lock: the compressors compared on a real (small) tree with the real
tar, zstd, gzip and xz, and the table the results print as."""

import os

from benchmarks import stack_install


def small_stack(root):
    """A tree shaped like a stack: a venv's text and a few binary-ish files, compressible as real ones are."""
    site = root / "venv" / "lib" / "python3.11" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    for number in range(20):
        (site / ("module_%d.py" % number)).write_text("def f%d(x):\n    return x * %d\n" % (number, number) * 200)
    (site / "lib.so").write_bytes(bytes(range(256)) * 400)
    (root / "stack-lock.txt").write_text("torch==2.9.0 --hash=sha256:%s\n" % ("0" * 64))
    return root


def test_each_format_packs_and_unpacks_the_same_tree_and_leaves_nothing(tmp_path):
    stack = small_stack(tmp_path / "stack")
    work = tmp_path / "work"
    work.mkdir()
    rows = stack_install.compare_formats(str(stack), str(work))
    assert [row["name"] for row in rows] == [name for name, _pack, _unpack in stack_install.FORMATS]
    raw = stack_install.tree_bytes(str(stack))
    for row in rows:
        assert 0 < row["bytes"] < raw, row
        assert row["pack"] >= 0 and row["unpack"] >= 0
    assert os.listdir(str(work)) == []


def test_the_table_states_the_ratios_the_targets_are_set_against():
    def spread(value):
        return {"min": value, "median": value, "max": value, "runs": [value]}

    result = {
        "locked_files": 180,
        "stack_bytes": 2.1e9,
        "archive_bytes": 0.64e9,
        "compile_bytecode": False,
        "page_cache_dropped": True,
        "date": "2026-12-06 17:00 UTC",
        "machine": "m, 2 cores",
        "command": "python -m benchmarks.stack_install",
        "pip": "pip 25.3",
        "uv": "uv 0.9",
        "seconds": {
            "pip": spread(120.0),
            "uv": spread(110.0),
            "pack": spread(10.0),
            "archive": spread(24.0),
            "download": spread(4.0),
            "unpack_in_install": spread(18.0),
            "unpack": spread(16.0),
        },
        "formats": [{"name": "zstd -3 (the archive's)", "pack": 10.0, "bytes": 0.64e9, "unpack": 16.0}],
    }
    text = stack_install.table(result)
    assert "per-host install against the limit: 1.50x" in text
    assert "pip 5.0x and uv 4.6x slower than the archive" in text
    assert "zstd -3 (the archive's)" in text and "0.64" in text
    assert "stack 2.10 GB, archive 0.64 GB" in text
