"""site.yml's first converge and no-op rerun against 1, 4 and 16 hosts, next to the per-host shell script.

Each host is a systemd-nspawn container booted from the molecule guest image (systemd as PID 1, sshd,
the ansible user with sudo), with its own network namespace on a bridge, so that 16 of them fit this
2-core machine where 16 qemu guests do not. The hosts take everything from the fixture mirror, served
on the bridge. For every host count N the benchmark:

1. boots N fresh hosts, points their Debian sources at the mirror (molecule/shared/prepare.yml,
   untimed), runs `ansible-playbook site.yml` twice (first converge, then the rerun that must change
   nothing) and counts the torch builds across all hosts;
2. boots N fresh hosts again, prepares them the same way, and runs benchmarks/field_guide_rollout.sh
   over ssh on each host in turn (--script-fanout hosts at a time; default 1), twice.

Run as root (it mounts overlays and creates network namespaces) from the repository root:

    .venv/bin/python -m benchmarks.scale --hosts 1 4 16

Results go to stdout as a table and to BUILD/results.json; every run's log is kept in BUILD/logs. With --wheel-mb M
the fixture torch wheel carries M MB of random data, so that the stack weighs what a real one does.

What crosses the controller, per Ansible run: Ansible's ssh connections go through benchmarks/ssh_meter.py (a
ProxyCommand that counts every byte of each connection: modules, results, and the files that copy and fetch carry),
and the bridge's own counters give everything the controller exchanged with the hosts (ssh and the mirror it
serves); traffic between the hosts crosses the bridge without reaching the controller and is in neither. Each
metered run opens its own ssh control masters and closes them at its end. Beside them, the size of the built wheels
the last host holds: what one host's stack weighs, which crossed the controller once per host while the wheels were
copied from it.
"""

import argparse
import concurrent.futures
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time

from benchmarks import ssh_meter
from benchmarks.molecule_phases import recap_totals

# The molecule scenarios' machine helpers start the hosts here too.
from tests.harness import fixture_hosts
from tests.harness.nspawnctl import Bridge, ImageMount, Machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

BRIDGE_ADDRESS = "10.231.0.1"
BRIDGE = Bridge("instbench0", BRIDGE_ADDRESS + "/16")
API_KEY = "benchmark-key-not-secret"
SSH_METER = os.path.join(ROOT, "benchmarks", "ssh_meter.py")


# Where the roles keep the built wheels on every host (build_wheel_cache, vllm_host_wheel_dir).
WHEEL_CACHE = "/var/cache/instinct-stack/wheels"
# Where the fixture sources read the benchmarks' knobs (molecule/shared/mirror/sources/pytorch/setup.py).
FIXTURE_KNOBS = "/run/instinct-fixture"


# The benchmark's own children (ansible-playbook, the per-host scripts' ssh), each in a session of its own: a signal
# ends them all at once. Without this, SIGTERM's SystemExit waited in the script pool's exit for every running host's
# script to finish, and only a second signal ended the run.
CHILDREN = set()
CHILDREN_LOCK = threading.Lock()
STOPPING = threading.Event()
# Seconds a child has to end after SIGTERM before it gets SIGKILL.
STOP_GRACE = 5


def run(argv, check=True, capture_output=False, **kwargs):
    """subprocess.run for the benchmark's children: each in a new session that stop() can end whole. Refuses to start
    one once the run is stopping (a script pool's queued hosts then end at once)."""
    if STOPPING.is_set():
        raise RuntimeError("the benchmark is stopping: %s not started" % argv[0])
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kwargs.setdefault("text", True)
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)  # noqa: S603
    with CHILDREN_LOCK:
        CHILDREN.add(proc)
    try:
        stdout, stderr = proc.communicate()
    finally:
        with CHILDREN_LOCK:
            CHILDREN.discard(proc)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv, stdout, stderr)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def end_children(signum):
    with CHILDREN_LOCK:
        running = list(CHILDREN)
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)


def stop(signum, _frame):
    """SIGTERM or SIGINT: end every child now (SIGKILL after STOP_GRACE), then leave through the finally blocks,
    which stop the hosts and remove the mounts, namespaces and bridge. Further signals are ignored so the teardown
    runs whole."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    STOPPING.set()
    end_children(signal.SIGTERM)
    killer = threading.Timer(STOP_GRACE, end_children, (signal.SIGKILL,))
    killer.daemon = True
    killer.start()
    raise SystemExit(128 + signum)


def install_stop_handlers():
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def host_words(host, identity, command):
    """The words a shell command prints on host, over ssh; none if it fails (a host where nothing was built)."""
    listing = run(host.ssh(identity, command), capture_output=True, check=False)
    return listing.stdout.split()


def set_fixture_knob(hosts, identity, name, value):
    """Writes value to the fixture knob name on every host."""
    for host in hosts:
        run(
            host.ssh(
                identity, "sudo sh -c 'mkdir -p %s && echo %s > %s/%s'" % (FIXTURE_KNOBS, value, FIXTURE_KNOBS, name)
            )
        )


def host_address(index):
    return "10.231.0.%d" % (10 + index)


# Each booted host's systemd holds inotify instances of this machine's root user (the hosts share its user
# namespace): with Debian's default of 128 the 20th host failed to boot ("Failed to connect to bus: Host is down")
# on 2026-12-07. Room for this many per host, raised only for the run and put back after it.
INOTIFY_INSTANCES_PER_HOST = 16
INOTIFY_INSTANCES = "/proc/sys/fs/inotify/max_user_instances"


@contextlib.contextmanager
def inotify_room(count):
    with open(INOTIFY_INSTANCES) as handle:
        before = int(handle.read())
    wanted = 128 + INOTIFY_INSTANCES_PER_HOST * count
    if wanted > before:
        print("fs.inotify.max_user_instances: %d -> %d for %d hosts" % (before, wanted, count), flush=True)
        with open(INOTIFY_INSTANCES, "w") as handle:
            handle.write(str(wanted))
    try:
        yield
    finally:
        if wanted > before:
            with open(INOTIFY_INSTANCES, "w") as handle:
                handle.write(str(before))


@contextlib.contextmanager
def hosts_running(workdir, lower, count, identity):
    with open(identity + ".pub") as handle:
        public_key = handle.read()
    hosts = [
        Machine("ibench-%d" % index, workdir, lower, host_address(index) + "/16", BRIDGE, public_key)
        for index in range(1, count + 1)
    ]
    with inotify_room(count):
        try:
            for host in hosts:
                host.start()
            for host in hosts:
                host.wait_for_ssh(identity)
            yield hosts
        finally:
            for host in hosts:
                host.stop()


def write_inventory(path, hosts, identity, mirror_url):
    """The cluster scenario's inventory, for these hosts; the first one builds."""
    variables = fixture_hosts.fixture_vars(identity, mirror_url)
    # Every ssh connection through the meter; it counts only when a run sets INSTINCT_SSH_METER_DIR.
    variables["ansible_ssh_common_args"] += " -o 'ProxyCommand=%s %s %%h %%p'" % (sys.executable, SSH_METER)
    variables["vllm_service_instances"] = [
        {"name": "fixture", "model": "fixture-model", "port": 8000, "api_key": API_KEY}
    ]
    with open(path, "w") as handle:
        json.dump(fixture_hosts.inventory(hosts, variables), handle, indent=2)


def children_cpu_seconds():
    """CPU time of the waited-for children: the controller side (ansible-playbook, its forks, ssh clients)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def measured():
    """Measures the block: wall seconds and controller CPU seconds, rounded, in the dict it yields."""
    figures = {}
    started, cpu_started = time.monotonic(), children_cpu_seconds()
    yield figures
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["controller_cpu"] = round(children_cpu_seconds() - cpu_started, 1)


def bridge_bytes():
    """Bytes the controller sent to and received from the hosts on the bridge (frames between hosts excluded)."""
    statistics = "/sys/class/net/%s/statistics/" % BRIDGE.name
    with open(statistics + "rx_bytes") as rx, open(statistics + "tx_bytes") as tx:
        return int(rx.read()) + int(tx.read())


@contextlib.contextmanager
def controller_traffic(workdir, run_name, phase, env):
    """Counts what crosses the controller during the block into the dict it yields: ssh_bytes (Ansible's ssh
    connections, both ways, through ssh_meter), bridge_bytes (all the controller's traffic with the hosts)."""
    meter_dir = os.path.join(workdir, "meter", "%s-%s" % (run_name, phase))
    shutil.rmtree(meter_dir, ignore_errors=True)
    os.makedirs(meter_dir)
    # A control master persists after its ansible-playbook, and its meter counts for the phase that started it:
    # a later phase that reused it would count nothing. So each phase opens its own masters and closes them.
    fixture_hosts.close_ssh_masters(workdir, run_name)
    env["INSTINCT_SSH_METER_DIR"] = meter_dir
    figures = {}
    bridge_started = bridge_bytes()
    try:
        yield figures
    finally:
        del env["INSTINCT_SSH_METER_DIR"]
        fixture_hosts.close_ssh_masters(workdir, run_name)
    # A meter writes its last totals as its connection ends, a moment after its master exits.
    time.sleep(1)
    counted = ssh_meter.totals(meter_dir)
    figures["ssh_bytes"] = counted["sent"] + counted["received"]
    figures["bridge_bytes"] = bridge_bytes() - bridge_started


def timed(argv, log_path, **kwargs):
    """Runs argv to completion; returns its measured() figures and its output."""
    with measured() as figures, open(log_path, "w") as log:
        result = run(argv, stdout=log, stderr=subprocess.STDOUT, check=False, **kwargs)
    with open(log_path) as log:
        output = log.read()
    if result.returncode != 0:
        raise RuntimeError("%s failed (exit %d), see %s" % (argv[0], result.returncode, log_path))
    return figures, output


def received_wheel_bytes(host, identity):
    """Bytes of the built wheels a host holds (the stack's artifacts it received, or built if it is the build host)."""
    return sum(
        int(size) for size in host_words(host, identity, "sudo find %s -name '*.whl' -printf '%%s\\n'" % WHEEL_CACHE)
    )


def count_torch_builds(hosts, identity):
    command = "sudo find %s/pytorch -mindepth 2 -maxdepth 2 -name build-info.json" % WHEEL_CACHE
    return sum(len(host_words(host, identity, command)) for host in hosts)


@contextlib.contextmanager
def prepared_hosts(args, workdir, lower, identity, mirror_url, name, count):
    """Boots count fresh hosts and points them at the mirror (untimed); yields the hosts, inventory and env."""
    with hosts_running(workdir, lower, count, identity) as hosts:
        inventory = os.path.join(workdir, name + ".json")
        write_inventory(inventory, hosts, identity, mirror_url)
        env = fixture_hosts.ansible_env(workdir, name, args.forks, args.profile)
        timed(
            fixture_hosts.prepare_argv(inventory),
            os.path.join(workdir, "logs", name + "-prepare.log"),
            cwd=ROOT,
            env=env,
        )
        if args.wheel_mb:
            set_fixture_knob(hosts, identity, "wheel-mb", args.wheel_mb)
        yield hosts, inventory, env


def bench_ansible(args, workdir, lower, identity, mirror_url, count):
    name = "ansible-%d" % count
    result = {"tool": "ansible", "hosts": count, "forks": args.forks}
    with prepared_hosts(args, workdir, lower, identity, mirror_url, name, count) as (hosts, inventory, env):
        for phase in ("first", "rerun"):
            # Read by benchmarks/callback_plugins/task_cpu.py, enabled with --profile.
            env["INSTINCT_TASK_CPU_FILE"] = os.path.join(workdir, "logs", "%s-%s-task-cpu.json" % (name, phase))
            with controller_traffic(workdir, name, phase, env) as traffic:
                figures, output = timed(
                    [ANSIBLE_PLAYBOOK, "-i", inventory, "site.yml"],
                    os.path.join(workdir, "logs", "%s-%s.log" % (name, phase)),
                    cwd=ROOT,
                    env=env,
                )
            recap = recap_totals(output)
            result[phase] = dict(figures, tasks=recap["ok"], changed=recap["changed"], **traffic)
            print("  %s %s: %s, %s" % (name, phase, figures, recap), flush=True)
        result["torch_builds"] = count_torch_builds(hosts, identity)
        # The last host is an inference host (the first builds): what it holds of the stack crossed the controller
        # once per host when the wheels were copied from it, and none of it does when the hosts pull them.
        result["stack_wheel_bytes"] = received_wheel_bytes(hosts[-1], identity)
    return result


def bench_script(args, workdir, lower, identity, mirror_url, count):
    name = "script-%d" % count
    fanout = min(args.script_fanout, count)
    result = {"tool": "shell script", "hosts": count, "forks": fanout}
    script = os.path.join(ROOT, "benchmarks", "field_guide_rollout.sh")

    def roll_out(host, log_path):
        with open(script) as stdin, open(log_path, "w") as log:
            run(
                host.ssh(identity, "sudo", "MIRROR=" + mirror_url, "VLLM_API_KEY=" + API_KEY, "bash", "-s"),
                stdin=stdin,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    with prepared_hosts(args, workdir, lower, identity, mirror_url, name, count) as (hosts, _inventory, _env):
        for phase in ("first", "rerun"):
            logs = [os.path.join(workdir, "logs", "%s-%s-%s.log" % (name, phase, host.name)) for host in hosts]
            # --script-fanout hosts at a time, as an operator's loop or a parallel ssh would run it.
            with measured() as figures, concurrent.futures.ThreadPoolExecutor(fanout) as pool:
                for done in [pool.submit(roll_out, host, log) for host, log in zip(hosts, logs, strict=True)]:
                    done.result()
            builds = 0
            for log_path in logs:
                with open(log_path) as log:
                    builds += log.read().count("field-guide: built torch")
            figures["torch_builds"] = builds
            result[phase] = figures
            print("  %s %s: %s" % (name, phase, figures), flush=True)
        result["torch_builds"] = result["first"]["torch_builds"] + result["rerun"]["torch_builds"]
    return result


def table(results):
    """Wall time, controller CPU, tasks and changed per run; then the ratios per host count."""
    header = "%-13s %5s %5s | %9s %8s %6s %7s | %9s %8s %6s %7s | %5s"
    lines = [
        header % ("", "", "", "first", "", "", "", "rerun", "", "", "", "torch"),
        header
        % (
            "tool",
            "hosts",
            "forks",
            "wall [s]",
            "ctl cpu",
            "tasks",
            "changed",
            "wall [s]",
            "ctl cpu",
            "tasks",
            "changed",
            "builds",
        ),
    ]
    for result in results:
        row = [result["tool"], result["hosts"], result["forks"]]
        for phase in (result["first"], result["rerun"]):
            row += [
                "%.1f" % phase["seconds"],
                "%.1f" % phase["controller_cpu"] if "controller_cpu" in phase else "-",
                phase.get("tasks", "-"),
                phase.get("changed", "-"),
            ]
        lines.append(header % (*row, result["torch_builds"]))
    metered = [result for result in results if "ssh_bytes" in result["first"]]
    if metered:
        lines += [
            "",
            "what crossed the controller [MB]: Ansible's ssh (all the controller's traffic with the hosts); "
            "the built wheels an inference host holds",
        ]
        lines.append("%-13s %5s %22s %22s %14s" % ("tool", "hosts", "first", "rerun", "stack wheels"))
        for result in metered:
            lines.append(
                "%-13s %5d %22s %22s %14s"
                % (
                    result["tool"],
                    result["hosts"],
                    *(
                        "%.2f (%.2f)" % (phase["ssh_bytes"] / 1e6, phase["bridge_bytes"] / 1e6)
                        for phase in (result["first"], result["rerun"])
                    ),
                    "%.2f" % (result["stack_wheel_bytes"] / 1e6) if "stack_wheel_bytes" in result else "-",
                )
            )
    by_count = {}
    for result in results:
        by_count.setdefault(result["hosts"], {})[result["tool"]] = result
    lines.append("")
    lines.append(
        "%5s %22s %22s %22s" % ("hosts", "ansible rerun/first", "script/ansible first", "script/ansible rerun")
    )
    for count, pair in sorted(by_count.items()):
        ansible = pair.get("ansible")
        script = pair.get("shell script")
        lines.append(
            "%5d %22s %22s %22s"
            % (
                count,
                "%.2f" % (ansible["rerun"]["seconds"] / ansible["first"]["seconds"]) if ansible else "-",
                "%.2f" % (script["first"]["seconds"] / ansible["first"]["seconds"]) if ansible and script else "-",
                "%.2f" % (script["rerun"]["seconds"] / ansible["rerun"]["seconds"]) if ansible and script else "-",
            )
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 16], help="host counts to run (default: 1 4 16)")
    parser.add_argument("--forks", type=int, default=20, help="ansible forks (default: 20, as in ansible.cfg)")
    parser.add_argument("--tools", nargs="+", choices=["ansible", "script"], default=["ansible", "script"])
    parser.add_argument(
        "--script-hosts", type=int, nargs="+", help="host counts the script runs at (default: those of --hosts)"
    )
    parser.add_argument("--script-fanout", type=int, default=1, help="hosts the script runs on at once (default: 1)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="time every task (profile_tasks) in the ansible logs and write each task's controller CPU to "
        "logs/NAME-PHASE-task-cpu.json (python -m benchmarks.task_cpu reads it)",
    )
    parser.add_argument(
        "--wheel-mb",
        type=int,
        default=0,
        help="megabytes of random data the fixture torch wheel carries, to weigh the stack as a real one (default: 0)",
    )
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench-scale"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root: the hosts are systemd-nspawn containers on overlay mounts")
    if shutil.which("systemd-nspawn") is None:
        parser.error("systemd-nspawn is missing: apt-get install systemd-container")

    # A plain kill or Ctrl-C ends the run within seconds and still stops the hosts and removes the mounts, namespaces
    # and bridge.
    install_stop_handlers()
    workdir = os.path.abspath(args.workdir)
    shutil.rmtree(os.path.join(workdir, "logs"), ignore_errors=True)
    os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
    image_dir = fixture_hosts.guest_image()
    mirror_dir = fixture_hosts.fixture_mirror(image_dir)
    identity = os.path.join(workdir, "id_ed25519")
    if not os.path.exists(identity):
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", identity])

    image = ImageMount(image_dir, os.path.join(workdir, "image"))
    image.unmount()
    lower = image.mount()
    results = []
    try:
        with BRIDGE:
            served = fixture_hosts.serve_mirror(mirror_dir, workdir, BRIDGE_ADDRESS)
            try:
                for count in args.hosts:
                    if "ansible" in args.tools:
                        results.append(bench_ansible(args, workdir, lower, identity, served["guest_url"], count))
                    if "script" in args.tools and count in (args.script_hosts or args.hosts):
                        results.append(bench_script(args, workdir, lower, identity, served["guest_url"], count))
            finally:
                fixture_hosts.unserve_mirror(workdir)
    finally:
        image.unmount()
        with open(os.path.join(workdir, "results.json"), "w") as handle:
            json.dump(
                {
                    "date": time.strftime("%Y-%m-%d %H:%M"),
                    "nproc": os.cpu_count(),
                    "wheel_mb": args.wheel_mb,
                    "results": results,
                },
                handle,
                indent=2,
            )
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
