"""The pure parts of the benchmark scripts: recap parsing, the inventory scale.py writes, its report table; and how
scale.py stops on a signal."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from benchmarks import molecule_phases, scale

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

RECAP_TEXT = """
PLAY RECAP *********************************************************************
ibench-1                   : ok=97   changed=0    unreachable=0    failed=0    skipped=18   rescued=0    ignored=0
ibench-2                   : ok=90   changed=2    unreachable=0    failed=1    skipped=20   rescued=0    ignored=0
"""


def test_recap_totals_sum_over_hosts():
    assert molecule_phases.recap_totals(RECAP_TEXT) == {
        "hosts": 2,
        "ok": 187,
        "changed": 2,
        "failed": 1,
        "unreachable": 0,
    }


def test_recap_totals_without_recap_count_nothing():
    assert molecule_phases.recap_totals("ERROR! the playbook could not be found")["hosts"] == 0


MOLECULE_LOG = """\x1b[36mINFO    \x1b[0m default \u279c idempotence: Executing
  \u2502 Wednesday 02 December 2026  14:49:00 +0000 (0:00:00.020)       0:00:10.000
  \u2502 PLAY RECAP
  \u2502 instinct-debian12          : ok=73   changed=0    unreachable=0    failed=0
  \u2502   skipped=15   rescued=0    ignored=0
  \u2502 Wednesday 02 December 2026  14:52:20 +0000 (0:00:00.020)       0:03:11.100
"""


def test_molecule_phases_reads_a_wrapped_recap_and_the_running_total():
    assert list(molecule_phases.phases(MOLECULE_LOG)) == [("idempotence", 191.1, 73, 0, 1)]


class FakeHost:
    def __init__(self, index):
        self.name = "ibench-%d" % index
        self.address = scale.host_address(index)


def test_inventory_puts_every_host_in_inference_and_the_first_in_build_hosts(tmp_path):
    path = tmp_path / "inventory.json"
    scale.write_inventory(str(path), [FakeHost(i) for i in (1, 2, 3)], "/key", "http://10.231.0.1:8080")
    listing = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", str(path), "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    inventory = json.loads(listing.stdout)
    assert inventory["inference_hosts"]["hosts"] == ["ibench-1", "ibench-2", "ibench-3"]
    assert inventory["build_hosts"]["hosts"] == ["ibench-1"]
    host_vars = inventory["_meta"]["hostvars"]["ibench-3"]
    assert host_vars["ansible_host"] == "10.231.0.13"
    assert host_vars["rocm_repo_base_url"] == "http://10.231.0.1:8080"
    assert host_vars["build_pip_args"][-2:] == ["--trusted-host", "10.231.0.1"]
    # Ansible's ssh goes through the meter, which ssh starts with the host and port.
    assert host_vars["ansible_ssh_common_args"].endswith(
        " -o 'ProxyCommand=%s %s %%h %%p'" % (sys.executable, scale.SSH_METER)
    )


RESULTS = [
    {
        "tool": "ansible",
        "hosts": 4,
        "forks": 20,
        "first": {
            "seconds": 100.0,
            "controller_cpu": 60.0,
            "tasks": 400,
            "changed": 100,
            "ssh_bytes": 12_500_000,
            "bridge_bytes": 30_000_000,
        },
        "rerun": {"seconds": 40.0, "tasks": 380, "changed": 0, "ssh_bytes": 2_000_000, "bridge_bytes": 2_100_000},
        "torch_builds": 1,
        "stack_wheel_bytes": 3_250_000,
    },
    {
        "tool": "shell script",
        "hosts": 4,
        "forks": 1,
        "first": {"seconds": 50.0, "torch_builds": 4},
        "rerun": {"seconds": 80.0, "torch_builds": 4},
        "torch_builds": 8,
    },
]


def test_table_reports_the_ratios():
    report = scale.table(RESULTS)
    assert report.splitlines()[-1].split() == ["4", "0.40", "0.50", "2.00"]
    script_row = next(line for line in report.splitlines() if line.startswith("shell script"))
    assert script_row.replace("|", " ").split() == [
        "shell",
        "script",
        "4",
        "1",
        "50.0",
        "-",
        "-",
        "-",
        "80.0",
        "-",
        "-",
        "-",
        "8",
    ]


def test_table_without_the_script_leaves_its_ratios_out():
    assert scale.table(RESULTS[:1]).splitlines()[-1].split() == ["4", "0.40", "-", "-"]


def test_field_guide_script_parses():
    subprocess.run([shutil.which("bash"), "-n", os.path.join(ROOT, "benchmarks", "field_guide_rollout.sh")], check=True)


STAMPED_LOG = """[     0.0] INFO     cluster \u279c create: Executing
[     0.4] PLAY RECAP
[     0.4] localhost                  : ok=8    changed=5    unreachable=0    failed=0
[    15.9] INFO     cluster \u279c verify: Executing
[    15.9] INFO     cluster \u279c verify: Executing Testinfra tests found in molecule/cluster/tests/...
[    16.0] ============================== 8 passed in 1.05s
[    21.5] INFO     cluster \u279c destroy: Executing
[    27.5] cluster \u279c destroy: Executed: Successful
"""


def test_molecule_phases_times_a_stamped_log_from_line_to_line():
    # verify has no profile_tasks total: only the stamps time it.
    assert list(molecule_phases.phases(STAMPED_LOG)) == [
        ("create", 15.9, 8, 5, 1),
        ("verify", 5.6, 0, 0, 0),
        ("destroy", 6.0, 0, 0, 0),
    ]


def test_stamp_lines_passes_every_line_on_and_stamps_the_log():
    import io

    sink, log = io.StringIO(), io.StringIO()
    molecule_phases.stamp_lines(io.StringIO("one\ntwo\n"), sink, log)
    assert sink.getvalue() == "one\ntwo\n"
    assert [molecule_phases.STAMP.sub("", line) for line in log.getvalue().splitlines()] == ["one", "two"]
    assert all(molecule_phases.STAMP.match(line) for line in log.getvalue().splitlines())


def test_table_reports_what_crossed_the_controller():
    lines = scale.table(RESULTS).splitlines()
    heading = lines.index(next(line for line in lines if line.startswith("what crossed the controller")))
    assert lines[heading + 2].split() == ["ansible", "4", "12.50", "(30.00)", "2.00", "(2.10)", "3.25"]
    # The script's rows have no meter: it is not listed.
    assert not lines[heading + 3].startswith("shell")


class LocalHost:
    """A host whose ssh runs the command here, in a shell, after recording it."""

    def __init__(self, commands):
        self.commands = commands

    def ssh(self, _identity, command):
        self.commands.append(command)
        return ["sh", "-c", command.replace("sudo ", "", 1) if command.startswith("sudo find") else "true"]


def test_the_host_queries_read_the_roles_wheel_cache_and_add_up(tmp_path, monkeypatch):
    cache = tmp_path / "wheels"
    for key in ("k1", "k2"):
        (cache / "pytorch" / key).mkdir(parents=True)
        (cache / "pytorch" / key / "build-info.json").write_text("{}")
    (cache / "pytorch" / "k1" / "torch.whl").write_bytes(b"x" * 1000)
    (cache / "vllm").mkdir()
    (cache / "vllm" / "vllm.whl").write_bytes(b"x" * 24)
    monkeypatch.setattr(scale, "WHEEL_CACHE", str(cache))
    commands = []
    # Two hosts, each with the same two build records.
    assert scale.count_torch_builds([LocalHost(commands), LocalHost(commands)], "id") == 4
    assert scale.received_wheel_bytes(LocalHost(commands), "id") == 1024
    # A host where nothing was built: find fails, and there is nothing to count.
    monkeypatch.setattr(scale, "WHEEL_CACHE", str(tmp_path / "missing"))
    assert scale.received_wheel_bytes(LocalHost(commands), "id") == 0


def test_a_fixture_knob_is_written_where_the_fixture_reads_it():
    commands = []
    scale.set_fixture_knob([LocalHost(commands), LocalHost(commands)], "id", "wheel-mb", 200)
    assert commands == ["sudo sh -c 'mkdir -p /run/instinct-fixture && echo 200 > /run/instinct-fixture/wheel-mb'"] * 2
    with open(os.path.join(ROOT, "molecule", "shared", "mirror", "sources", "pytorch", "setup.py")) as handle:
        fixture = handle.read()
    assert '"/run/instinct-fixture/wheel-mb"' in fixture and '"/run/instinct-fixture/build-seconds"' in fixture


# What scale.py does around its script pool, in a process of its own: hosts busy in a thread pool, the teardown in a
# finally block. A unique sleep stands for each host's script.
STOPPED_RUN = """
import concurrent.futures
from benchmarks import scale
scale.install_stop_handlers()
try:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(scale.run, ["sleep", "%s"]) for _ in range(3)]
        print("started", flush=True)
        for future in futures:
            future.result()
finally:
    print("torn down", flush=True)
"""


def test_a_signal_ends_the_run_within_seconds_and_still_tears_down():
    marker = "600.%d" % os.getpid()
    argv = [sys.executable, "-c", STOPPED_RUN % marker]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # noqa: S603
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 10
        while running_sleeps(marker) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert running_sleeps(marker) == 2
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
        subprocess.run(["pkill", "-f", "sleep " + marker], check=False)  # noqa: S603, S607
    # Ended by the first signal in well under the grace a stuck child gets, through the teardown, its children gone.
    assert time.monotonic() - sent < scale.STOP_GRACE, stderr
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "torn down" in stdout, stderr
    assert running_sleeps(marker) == 0


def running_sleeps(marker):
    found = subprocess.run(["pgrep", "-f", "sleep " + marker], capture_output=True, text=True, check=False)  # noqa: S603, S607
    return len(found.stdout.split())
