import pytest

from ansible_collections.instinct.stack.plugins.module_utils.build_plan import build_key, max_jobs


@pytest.mark.parametrize(
    "cores, mem_mb, per_job, limit, expected",
    [
        (2, 24 * 1024, 4096, 0, 2),  # this CI machine: cores bound
        (192, 512 * 1024, 4096, 0, 127),  # MI300X node: memory bound, nproc would OOM
        (64, 16 * 1024, 4096, 0, 3),
        (8, 2048, 4096, 0, 1),  # never below one job
        (64, 512 * 1024, 4096, 16, 16),  # user cap
    ],
)
def test_max_jobs(cores, mem_mb, per_job, limit, expected):
    assert max_jobs(cores, mem_mb, per_job, limit=limit) == expected


@pytest.mark.parametrize("bad", [(0, 1024), (4, 0), (4, 1024, 0)])
def test_max_jobs_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        max_jobs(*bad)


def test_build_key_is_stable_and_sensitive():
    key = build_key("gfx942", {"pytorch": "abc", "rocm": "7.0.2"}, {"USE_ROCM": "1"})
    assert key == build_key("gfx942", {"rocm": "7.0.2", "pytorch": "abc"}, {"USE_ROCM": "1"})
    assert len(key) == 16 and int(key, 16) >= 0
    assert key != build_key("gfx90a", {"pytorch": "abc", "rocm": "7.0.2"}, {"USE_ROCM": "1"})
    assert key != build_key("gfx942", {"pytorch": "abd", "rocm": "7.0.2"}, {"USE_ROCM": "1"})
    assert key != build_key("gfx942", {"pytorch": "abc", "rocm": "7.0.2"}, {"USE_ROCM": "1", "CMAKE_ARGS": "-DX=1"})
