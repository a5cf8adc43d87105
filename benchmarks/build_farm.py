"""Two arch lists built on one build host, then on two: the build farm's parallel torch builds (issue 18).

Two hosts, each an inference host with its own arch list (build_rocm_arch gfx90a on the first, gfx942 on the
second), booted fresh from the guest image as in benchmarks/scale.py (systemd-nspawn machines on a bridge, the
fixture mirror served there, the cluster scenario's variables). Each configuration runs `ansible-playbook site.yml`
once from fresh hosts:

- one: build_hosts holds the first host, which builds both arch lists, one after the other;
- two: build_hosts holds both hosts, each builds one arch list (instinct.stack.build_farm), the torch builds at once.

The fixture torch build takes seconds; a real one takes hours. So that the builds' own time shows, every host's
fixture build is stretched to --build-seconds (the fixture's /run/instinct-fixture/build-seconds: its compile step
sleeps that long after compiling). A sleep, not work: on a farm each build host compiles on its own cores, which two
containers on this 2-core machine do not have; the figure shows how the builds are scheduled, not how fast a
machine compiles.

From each host's torch build records (build-info.json: seconds, built_at) the benchmark reports each build's start
and end relative to the run's start and how long the two overlap, with the run's wall time and the time from the
first build's start to the last one's end.

    .venv/bin/python -m benchmarks.build_farm [--build-seconds 60] [--workdir build/bench-farm]

Run as root from the repository root. Results go to stdout and WORKDIR/results.json, logs to WORKDIR/logs.
"""

import argparse
import calendar
import json
import os
import shutil
import signal
import sys
import time

from benchmarks import scale
from benchmarks.molecule_phases import recap_totals

ARCHS = ["gfx90a", "gfx942"]
CONFIGURATIONS = {"one": 1, "two": 2}


def build_records(host, identity):
    """The torch build records on a host: [{host, arch, seconds, start, end, ccache}], start and end as epoch s."""
    reader = (
        "import glob, json; print(json.dumps([json.load(open(f)) for f in "
        "glob.glob('%s/pytorch/*/build-info.json')]))" % scale.WHEEL_CACHE
    )
    output = scale.run(host.ssh(identity, "sudo", "python3", "-c", '"%s"' % reader), capture_output=True).stdout
    records = []
    for info in json.loads(output):
        end = calendar.timegm(time.strptime(info["built_at"], "%Y-%m-%dT%H:%M:%SZ"))
        records.append(
            {
                "host": host.name,
                "arch": info["metadata"].get("arch", "?"),
                "seconds": info["seconds"],
                "start": end - info["seconds"],
                "end": end,
                "ccache": info.get("ccache"),
            }
        )
    return records


def schedule(builds, started):
    """The builds relative to started (sorted by start), the time from the first start to the last end, and how long
    builds ran at once (the sum over pairs of their overlap), all in whole seconds."""
    builds = sorted(
        (dict(b, start=round(b["start"] - started), end=round(b["end"] - started)) for b in builds),
        key=lambda b: b["start"],
    )
    if not builds:
        return builds, 0, 0
    span = max(b["end"] for b in builds) - builds[0]["start"]
    overlap = sum(
        max(0, min(a["end"], b["end"]) - max(a["start"], b["start"]))
        for i, a in enumerate(builds)
        for b in builds[i + 1 :]
    )
    return builds, span, overlap


def bench(args, workdir, lower, identity, mirror_url, name, build_host_count):
    prepared = scale.prepared_hosts(args, workdir, lower, identity, mirror_url, name, len(ARCHS))
    with prepared as (hosts, inventory_path, env):
        # The scale benchmark's inventory (the first host builds), made into this configuration's: the preparation
        # (Debian sources pointed at the mirror) does not depend on either.
        with open(inventory_path) as handle:
            inventory = json.load(handle)
        children = inventory["all"]["children"]
        children["build_hosts"]["hosts"] = {host.name: {} for host in hosts[:build_host_count]}
        for host, arch in zip(hosts, ARCHS, strict=True):
            children["inference_hosts"]["hosts"][host.name]["build_rocm_arch"] = arch
        with open(inventory_path, "w") as handle:
            json.dump(inventory, handle, indent=2)
        scale.set_fixture_knob(hosts, identity, "build-seconds", "%g" % args.build_seconds)
        started = time.time()
        figures, output = scale.timed(
            [scale.ANSIBLE_PLAYBOOK, "-i", inventory_path, "site.yml"],
            os.path.join(workdir, "logs", name + ".log"),
            cwd=scale.ROOT,
            env=env,
        )
        recap = recap_totals(output)
        builds = [record for host in hosts for record in build_records(host, identity)]
    builds, span, overlap = schedule(builds, started)
    result = {
        "configuration": name,
        "build_hosts": build_host_count,
        "wall": figures["seconds"],
        "controller_cpu": figures["controller_cpu"],
        "tasks": recap["ok"],
        "changed": recap["changed"],
        "builds": builds,
        "build_span": span,
        "overlap": overlap,
    }
    print("  %s: %s" % (name, result), flush=True)
    return result


def table(results, build_seconds):
    lines = [
        "torch builds stretched to %g s each; times in seconds from the start of ansible-playbook" % build_seconds,
        "",
        "build hosts |  wall  ctl cpu  tasks changed | builds (arch@host start-end)              span  overlap",
    ]
    for r in results:
        builds = "  ".join("%s@%s %d-%d" % (b["arch"], b["host"], b["start"], b["end"]) for b in r["builds"])
        lines.append(
            "%11d | %5.1f  %7.1f  %5d %7d | %-42s %5d  %7d"
            % (
                r["build_hosts"],
                r["wall"],
                r["controller_cpu"],
                r["tasks"],
                r["changed"],
                builds,
                r["build_span"],
                r["overlap"],
            )
        )
    if len(results) == 2 and results[0]["wall"]:
        lines.append("")
        lines.append(
            "two build hosts / one: wall %.2f, build span %.2f"
            % (
                results[1]["wall"] / results[0]["wall"],
                results[1]["build_span"] / results[0]["build_span"] if results[0]["build_span"] else float("nan"),
            )
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-seconds", type=float, default=60, help="each fixture torch build's stretch (60)")
    parser.add_argument("--configurations", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="time every task (profile_tasks) in the logs")
    parser.add_argument("--workdir", default=os.path.join(scale.ROOT, "build", "bench-farm"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root: the hosts are systemd-nspawn containers on overlay mounts")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = os.path.abspath(args.workdir)
    shutil.rmtree(os.path.join(workdir, "logs"), ignore_errors=True)
    os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
    image_dir = scale.fixture_hosts.guest_image()
    mirror_dir = scale.fixture_hosts.fixture_mirror(image_dir)
    identity = os.path.join(workdir, "id_ed25519")
    if not os.path.exists(identity):
        scale.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", identity])
    image = scale.ImageMount(image_dir, os.path.join(workdir, "image"))
    image.unmount()
    lower = image.mount()
    results = []
    try:
        with scale.BRIDGE:
            served = scale.fixture_hosts.serve_mirror(mirror_dir, workdir, scale.BRIDGE_ADDRESS)
            try:
                for name in args.configurations:
                    results.append(
                        bench(args, workdir, lower, identity, served["guest_url"], name, CONFIGURATIONS[name])
                    )
            finally:
                scale.fixture_hosts.unserve_mirror(workdir)
    finally:
        image.unmount()
        with open(os.path.join(workdir, "results.json"), "w") as handle:
            json.dump(
                {
                    "date": time.strftime("%Y-%m-%d %H:%M"),
                    "nproc": os.cpu_count(),
                    "build_seconds": args.build_seconds,
                    "results": results,
                },
                handle,
                indent=2,
            )
    print(table(results, args.build_seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
