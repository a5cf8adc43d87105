"""A running build's progress from its log: wheel_build's step headers and Ninja's [done/total] counters."""

import json

from ansible_collections.instinct.stack.plugins.module_utils.build_progress import (
    job_state,
    read_progress,
    step_header,
)

# The shape of a real PyTorch build log: setup.py's CMake configure, then Ninja's counters, one line per edge when
# its output is not a terminal.
LOG = (
    "== staging copy of /var/lib/instinct-stack/src/pytorch\n"
    + step_header("hipify", ["python", "tools/amd_build/build_amd.py"], now=1000)
    + "Successfully preprocessed all matching files.\n"
    + step_header("bdist_wheel", ["python", "setup.py", "bdist_wheel"], now=2000)
    + "-- The CXX compiler identification is GNU 12.2.0\n-- Configuring done (41.2s)\n"
    + "[1/7012] Building CXX object third_party/fmt/CMakeFiles/fmt.dir/src/format.cc.o\n"
    + "[1402/7012] Building HIP object caffe2/CMakeFiles/torch_hip.dir/aten/src/ATen/native/hip/Sort.hip.o\n"
)


def test_step_header_names_the_step_and_its_start():
    assert step_header("bdist_wheel", ["python", "setup.py"], now=1764780000.7) == (
        "== bdist_wheel (at 1764780000): python setup.py\n"
    )


def test_progress_of_the_running_step(tmp_path):
    log = tmp_path / "build.log"
    log.write_text(LOG)
    progress = read_progress(str(log), now=2600)
    assert progress == {
        "phase": "bdist_wheel",
        "done": 1402,
        "total": 7012,
        "percent": 19,
        "elapsed_seconds": 600,
        # 600 s for 1402 edges: 5610 more at that rate.
        "eta_seconds": 2400,
    }


def test_a_new_step_starts_its_own_count(tmp_path):
    log = tmp_path / "build.log"
    log.write_text(LOG + step_header("bdist_wheel_vision", ["python", "setup.py"], now=3000))
    progress = read_progress(str(log), now=3010)
    assert progress["phase"] == "bdist_wheel_vision" and progress["done"] is None and progress["eta_seconds"] is None
    assert progress["elapsed_seconds"] == 10


def test_the_last_counter_is_read_from_the_tail_of_a_large_log(tmp_path):
    log = tmp_path / "build.log"
    lines = "".join("[%d/9000] Building CXX object o%d.o\n" % (n, n) for n in range(1, 9001))
    log.write_text(step_header("bdist_wheel", ["x"], now=0) + lines)
    progress = read_progress(str(log), now=900, tail_bytes=4096)
    assert (progress["done"], progress["total"], progress["percent"], progress["eta_seconds"]) == (9000, 9000, 100, 0)
    assert progress["phase"] is None or progress["phase"] == "bdist_wheel"  # the header may lie before the tail


def test_no_log_yet():
    assert read_progress("/nonexistent/build.log") is None


def test_job_state_as_async_status_reads_it(tmp_path):
    results = tmp_path / "123.456"
    results.write_text("")
    assert job_state(str(results)) == (False, None)
    results.write_text(json.dumps({"started": 1, "finished": 0, "ansible_job_id": "123.456"}))
    assert job_state(str(results))[0] is False
    results.write_text(json.dumps({"changed": True, "wheels": ["/w/torch.whl"]}))
    finished, data = job_state(str(results))
    assert finished is True and data["wheels"] == ["/w/torch.whl"]
    results.write_text('{"changed": tr')  # half written
    assert job_state(str(results)) == (False, None)
