"""A projection, not a measurement: the time from bare metal to serving for 1 to 1000 hosts.

It puts together two kinds of figures, both kept in INPUTS below and nowhere else:

- the per-host costs that benchmarks/scale.py measured on this project's 2-core machine (BENCHMARKS.md,
  "Scale: the no-op rerun against 1, 4 and 16 hosts, next to the field-guide script"): the collection's
  first rollout and no-op rerun, the field-guide script's two runs, and the controller CPU they took. Every
  build there was a fixture build (a small CMake + Ninja compile), so these figures are the rollouts' overhead;
- published build times of PyTorch (ROCm), Triton and vLLM (ROCm) from source on real machines, each with
  its source. The published figures spread widely (different machines, arch lists, caches and years), so
  each component has a low and a high figure and every projection is printed for both.

The model (seconds; B is the sum of the three build times, low or high):

  field-guide script  ceil(N / fanout) x (s + B)
      It builds everything on every host (benchmarks/field_guide_rollout.sh). s is its measured one-host
      time beside the builds: on a cluster each host runs the script on its own CPU, so the one-host run is
      the cost of any host. A parallel ssh (--script-fanout, default 20, the collection's forks) runs that
      many hosts at once, each compiling for itself; fanout 1 is an operator's loop.

  collection          ceil(A' / H) x B + max(ceil(N / F) x t1, (c1 + (N - 1) x c) / min(cores, F))
      It builds once per distinct arch list on a build host and installs the built wheels on every
      host. A' = min(A, N) distinct arch lists (--archs) build on H build hosts (--build-hosts), one
      after another on each; H > 1 is the build farm (measured for two arch lists on two build hosts).
      t1 is the measured one-host rollout; with F forks (--forks) the hosts take each task F at a time, in
      ceil(N / F) waves. The controller spends c1 on the first host and c per added host (measured from
      the 1- and 16-host runs), spread over min(cores, F) of its cores (--controller-cores); the slower of
      the hosts' waves and the controller's CPU sets the pace (they overlap: an optimistic bound).

  compile time        script N x B, collection A' x B host-hours: what each spends compiling.

  no-op rerun         the script builds everything again (the same formula with its rerun time); the
                      collection builds nothing (B = 0, with its measured rerun figures).

Assumptions, each named in the output too: every host (and the build host) compiles as fast as the
machines of the cited figures; hosts do not slow each other down (on a cluster each host runs its tasks
on its own CPU, where on the measuring machine 16 hosts shared 2 cores); the measured per-host figures
hold for any N; the fixture builds in the measured figures are left in.

Bandwidth: every host's bytes (the stack archive, or the script's closure, and --model-gb) go through one store's
uplink at its measured rate (BENCHMARKS.md, "Models from the store") or --uplink-gbps, whichever is lower, and that
transfer is a third side of the max() above: where it is the slowest, the store's uplink sets the pace.

What it does not show: the network beyond one store's uplink; failures and retries;
hosts of different arch lists in one run beyond --archs; the model's weights and load time (the serve
play's rolling batches wait for each batch's services); torchvision's build (the collection builds it,
the script does not); ROCm's and the driver's install time on real hardware (a real apt install of
ROCm is minutes per host; here it came from the fixture mirror); reboots.

Run from the repository root (it reads nothing else and needs only the standard library):

    .venv/bin/python -m benchmarks.projection
    .venv/bin/python -m benchmarks.projection --archs 2 --build-hosts 2
    .venv/bin/python -m benchmarks.projection --model-gb 140 --uplink-gbps 25
"""

import argparse
import math
import sys

INPUTS = {
    "measured": {
        "source": (
            "BENCHMARKS.md, 'Scale: the no-op rerun against 1, 4 and 16 hosts, next to the field-guide script', "
            "2026-12-04: `benchmarks/scale.py --hosts 1 4 16 --script-hosts 16 --script-fanout 16 --profile` and "
            "`benchmarks/scale.py --hosts 1 --tools script`, the project's 2-core 24 GiB machine, systemd-nspawn "
            "hosts, forks 20, fixture builds (benchmarks/results/scale-2026-12-04.txt)"
        ),
        "forks": 20,
        # Hosts the field-guide script ran on at once in the runs above one host.
        "script_fanout": 16,
        # Per host count: wall seconds and controller CPU seconds.
        "collection": {
            "first": {1: (188.0, 19.3), 4: (321.6, 42.4), 16: (981.9, 145.2)},
            "rerun": {1: (2.5, 1.9), 4: (3.7, 3.0), 16: (10.8, 8.0)},
        },
        # Run over ssh on script_fanout hosts at once.
        "script": {
            "first": {1: (111.5, 0.1), 16: (1020.0, 1.7)},
            "rerun": {1: (120.1, 0.1), 16: (1039.8, 1.6)},
        },
    },
    # Minutes per build, low and high, from the sources below ("used" says which figure each gives).
    "builds": {
        "PyTorch (ROCm)": {
            "low_min": 20,
            "high_min": 240,
            "sources": [
                {
                    "used": "low",
                    "figure": "PyTorch's ROCm CI build job: 1.4-1.5 h before, under 20 min after AOTriton moved "
                    "into the base image (AOTriton alone took 1 h 6 min on a linux.2xlarge node)",
                    "machine": "PyTorch CI runners (the build job's runner class is not stated); sccache on",
                    "version": "PyTorch main, May 2024",
                    "url": "https://github.com/pytorch/pytorch/pull/127012",
                },
                {
                    "used": "low",
                    "figure": "wall-clock build time 19 min (12 min with the PR's split of template instantiations)",
                    "machine": "dual AMD EPYC 7542 server (2 x 32 cores); arch list not stated",
                    "version": "ROCm/pytorch fork, July 2022 (the PR was closed)",
                    "url": "https://github.com/ROCm/pytorch/pull/1037",
                },
                {
                    "used": "high",
                    "figure": "ROCm nightly manywheel and libtorch builds 'close to the 4hr mark', "
                    "timeout raised to 5 h",
                    "machine": "PyTorch's binary-build runners (not stated); every arch of the nightly wheel",
                    "version": "PyTorch nightly, September 2025",
                    "url": "https://github.com/pytorch/pytorch/pull/163776",
                },
                {
                    "used": "context",
                    "figure": "all 12 ROCm 7.1/7.2 nightly manywheel builds cancelled at the 420 min timeout",
                    "machine": "PyTorch's binary-build runners; every arch of the nightly wheel",
                    "version": "PyTorch nightly, May 2026 (a regression, left out of the range)",
                    "url": "https://github.com/pytorch/pytorch/issues/183301",
                },
            ],
        },
        "Triton": {
            "low_min": 15,
            "high_min": 15,
            "sources": [
                {
                    "used": "low and high, the only published figure found",
                    "figure": "each of 8 test shards compiled Triton from source, about 15 min each",
                    "machine": "ROCm/aiter's CI GPU runners, in its Docker image (cores not stated)",
                    "version": "Triton from source for ROCm, March 2026",
                    "url": "https://github.com/ROCm/aiter/pull/2380",
                },
            ],
        },
        "vLLM (ROCm)": {
            "low_min": 5,
            "high_min": 22,
            "sources": [
                {
                    "used": "low",
                    "figure": "'This may take 5-10 minutes' (python3 setup.py develop, PYTORCH_ROCM_ARCH=gfx942)",
                    "machine": "not stated",
                    "version": "vLLM's ROCm install guide, docs/getting_started/installation/gpu.rocm.inc.md "
                    "(commit 06d0369d), ROCm 7.0",
                    "url": "https://github.com/vllm-project/vllm/blob/main/docs/getting_started/installation/"
                    "gpu.rocm.inc.md",
                },
                {
                    "used": "high",
                    "figure": "docker build of docker/Dockerfile.rocm on the navi base image: 1312.6 s "
                    "(vLLM's build and its Python dependencies)",
                    "machine": "a Radeon RX 7900 XTX (gfx1100) machine, CPU not stated",
                    "version": "ROCm/vllm at c43debd4, April 2025",
                    "url": "https://github.com/ROCm/vllm/issues/508",
                },
                {
                    "used": "context",
                    "figure": "'the build process much faster (~10 minutes)' on top of the prebuilt base image",
                    "machine": "not stated",
                    "version": "vLLM, January 2025",
                    "url": "https://github.com/vllm-project/vllm/pull/11777",
                },
            ],
        },
    },
    # What each host pulls, and how fast one store sends it (issue 29): the collection's hosts pull one stack archive
    # (and the model) from their build host's store, the script's hosts the closure's wheels (and the model) from the
    # mirror. Gigabytes (1e9 bytes) and MB/s (1e6 bytes per second).
    "bytes": {
        "stack_archive_gb": {
            "low": 1.0,
            "high": 2.1,
            "sources": [
                {
                    "used": "low",
                    "figure": "the fixtures' stack archive, 0.61 GB (zstd -3; the real closure from the index with a "
                    "fixture torch), plus about 0.4 GB for a real torch built for one arch list against /opt/rocm: "
                    "libtorch_hip.so alone is 1.3 GB uncompressed in torch 2.3.1+rocm6.0, whose wheel also bundles "
                    "ROCm's libraries for every arch (a 13 GB venv)",
                    "url": "https://github.com/pytorch/pytorch/issues/129165",
                },
                {
                    "used": "high",
                    "figure": "the rocm/pytorch image's `pip install torch/vision/audio/triton/apex` layer: 2.078 GB "
                    "compressed (ROCm 7.2.4, PyTorch 2.10); those wheels bundle ROCm's libraries, which the "
                    "collection's stacks take from /opt/rocm",
                    "url": "https://github.com/ROCm/ROCm-docker/issues/166",
                },
            ],
        },
        # The fixtures' locked closure less the four built wheels, as downloaded (measured: stack_install's inputs).
        "script_closure_gb": 0.56,
        # One store (nginx, the vllm role's configuration) sending one 1.024 GB model to 16 hosts at once on this
        # machine's bridge, bodies dropped: BENCHMARKS.md, "Models from the store" (2026-12-06). Bound by this
        # machine's 2 cores and its bridge (one iperf3 stream: 2307 MB/s), so a lower bound for a real store server.
        "store_mb_s": 2484,
        "store_source": "BENCHMARKS.md, 'Models from the store', 2026-12-06: `benchmarks/store_pull.py --hosts 16 "
        "--model-mb 1024`, nginx, 16 hosts downloading at once",
    },
    "assumptions": [
        "each build takes its cited time on every host that runs it (the build host is a server like the others)",
        "PyTorch, Triton and vLLM build one after another (Triton and vLLM build against the new torch)",
        "hosts run their own tasks on their own CPU and do not slow each other down "
        "(the measuring machine ran all hosts on its 2 cores)",
        "the measured one-host and per-added-host costs hold for any number of hosts",
        "the collection's hosts and its controller overlap their work: the slower of the two sets the pace",
        "distinct arch lists build one after another on each build host, in parallel across build hosts "
        "(the build farm; measured for two arch lists on two build hosts, BENCHMARKS.md 'The build farm')",
        "the fixture builds inside the measured figures are left in",
    ],
    "not_shown": [
        "the network beyond one store: every host's bytes go through one store's uplink (the store's measured rate "
        "or --uplink-gbps, the lower), as if the hosts' own links and the switches never were the limit; the "
        "transfer overlaps the hosts' other work (the slower of the two sets the pace)",
        "failures, retries and hosts that drop out mid-rollout",
        "hosts of several arch lists beyond what --archs says, and arch lists that need different sources",
        "the model's load time, which the serve play's rolling batches (serial 25%) wait for batch by batch "
        "(its download is in the transfer, with --model-gb)",
        "torchvision's build (the collection builds it, the script does not)",
        "ROCm's and the driver's install on real hardware (here they came from the fixture mirror), and reboots",
    ],
}


def measured_model(inputs, tool, phase):
    """The per-host figures the projection uses for one tool and phase (first or rerun)."""
    runs = inputs["measured"][tool][phase]
    fewest, most = min(runs), max(runs)
    return {
        # The one-host run, and the controller CPU it took.
        "one_host_s": runs[fewest][0] / fewest,
        "cpu_one_host_s": runs[fewest][1],
        # Controller CPU per added host, between the fewest and the most hosts measured.
        "cpu_per_added_host_s": (runs[most][1] - runs[fewest][1]) / (most - fewest),
        # Wall time per added host on the measuring machine, where every host shared its cores.
        "wall_per_added_host_s": (runs[most][0] - runs[fewest][0]) / (most - fewest),
    }


def build_seconds(inputs, level):
    """PyTorch + Triton + vLLM, one after another, at the low or high published figure."""
    return 60 * sum(component["%s_min" % level] for component in inputs["builds"].values())


def store_mb_s(inputs, uplink_gbps=None):
    """What one store sends per second: its measured rate, or the uplink's line rate when that is lower."""
    measured = inputs["bytes"]["store_mb_s"]
    return measured if uplink_gbps is None else min(measured, uplink_gbps * 125.0)


def transfer_seconds(hosts, gb_per_host, rate_mb_s):
    """Every host's bytes through one store's uplink."""
    return hosts * gb_per_host * 1000.0 / rate_mb_s


def script_seconds(hosts, build_s, model, fanout, transfer_s=0.0):
    """The field-guide script: every host builds everything, fanout hosts at a time, each on its own CPU; the
    mirror's uplink carries every host's downloads (transfer_s), overlapping the rest."""
    return max(math.ceil(hosts / fanout) * (model["one_host_s"] + build_s), transfer_s)


def collection_seconds(hosts, build_s, model, archs=1, build_hosts=1, forks=20, controller_cores=2, transfer_s=0.0):
    """The collection: one build per distinct arch list, then every host's install and service, forks at a time,
    paced by the slowest of the hosts' waves, the controller's CPU and the store's uplink (transfer_s)."""
    build_rounds = math.ceil(min(archs, hosts) / build_hosts)
    hosts_side = math.ceil(hosts / forks) * model["one_host_s"]
    controller_side = (model["cpu_one_host_s"] + (hosts - 1) * model["cpu_per_added_host_s"]) / min(
        controller_cores, forks
    )
    return build_rounds * build_s + max(hosts_side, controller_side, transfer_s)


def uplink_limit(inputs, rate_mb_s, forks=20, controller_cores=2):
    """Gigabytes per host above which one store's uplink, not the hosts or the controller, sets the pace of the
    collection's rollout: both grow linearly with the hosts, so the threshold holds at any host count."""
    model = measured_model(inputs, "collection", "first")
    per_host_s = max(model["one_host_s"] / forks, model["cpu_per_added_host_s"] / min(controller_cores, forks))
    return per_host_s * rate_mb_s / 1000.0


def compile_hours(hosts, build_s, archs):
    """Host-hours spent compiling: the script builds on every host, the collection once per arch list."""
    return hosts * build_s / 3600, min(archs, hosts) * build_s / 3600


def duration(seconds):
    if seconds < 90:
        return "%d s" % round(seconds)
    if seconds < 90 * 60:
        return "%d min" % round(seconds / 60)
    if seconds < 48 * 3600:
        return "%.1f h" % (seconds / 3600)
    return "%.1f d" % (seconds / 86400)


def span(low, high, unit=duration):
    return unit(low) if unit(low) == unit(high) else "%s to %s" % (unit(low), unit(high))


def hours(value):
    return "%.1f h" % value if value < 10 else "{:,} h".format(round(value))


def projection_tables(
    inputs, host_counts, archs=1, build_hosts=1, forks=20, script_fanout=20, controller_cores=2, model_gb=0.0, rate=None
):
    """The two Markdown tables (first rollout, no-op rerun), each cell low to high build times (and stack sizes)."""
    builds = {level: build_seconds(inputs, level) for level in ("low", "high")}
    rate = rate or store_mb_s(inputs)
    stack_gb = inputs["bytes"]["stack_archive_gb"]
    collection = {phase: measured_model(inputs, "collection", phase) for phase in ("first", "rerun")}
    script = {phase: measured_model(inputs, "script", phase) for phase in ("first", "rerun")}
    settings = {
        "archs": archs,
        "build_hosts": build_hosts,
        "forks": forks,
        "controller_cores": controller_cores,
    }
    header = (
        "| hosts | field-guide script, 1 host at a time | field-guide script, %d hosts at a time "
        "| collection (%d arch list%s, %d build host%s, forks %d) |"
        % (script_fanout, archs, "s" if archs > 1 else "", build_hosts, "s" if build_hosts > 1 else "", forks)
    )
    rule = "|---:|---|---|---|"
    first = [header + " compiling, script / collection |", rule + "---|"]
    rerun = [header, rule]
    for count in host_counts:

        def cells(phase, with_builds, count=count):
            # A rerun moves no bytes: every host holds its stack and model.
            script_bytes = inputs["bytes"]["script_closure_gb"] + model_gb if with_builds else 0.0
            row = []
            for fanout in (1, script_fanout):
                low, high = (
                    script_seconds(
                        count, builds[lv], script[phase], fanout, transfer_seconds(count, script_bytes, rate)
                    )
                    for lv in ("low", "high")
                )
                row.append(span(low, high))
            low, high = (
                collection_seconds(
                    count,
                    builds[lv] if with_builds else 0,
                    collection[phase],
                    transfer_s=transfer_seconds(count, stack_gb[lv] + model_gb, rate) if with_builds else 0.0,
                    **settings,
                )
                for lv in ("low", "high")
            )
            row.append(span(low, high))
            return row

        script_low, collection_low = compile_hours(count, builds["low"], archs)
        script_high, collection_high = compile_hours(count, builds["high"], archs)
        compiling = "%s / %s" % (span(script_low, script_high, hours), span(collection_low, collection_high, hours))
        first.append("| %d | %s | %s |" % (count, " | ".join(cells("first", True)), compiling))
        rerun.append("| %d | %s |" % (count, " | ".join(cells("rerun", False))))
    return "\n".join(first), "\n".join(rerun)


def check_table(inputs, forks=20, controller_cores=2):
    """The model with no build time against the measured runs it was made from."""
    lines = [
        "| hosts | collection measured | collection model | script measured | script model |",
        "|---:|---:|---:|---:|---:|",
    ]
    collection = measured_model(inputs, "collection", "first")
    script = measured_model(inputs, "script", "first")
    measured = inputs["measured"]
    for count in sorted(measured["collection"]["first"]):
        modelled = collection_seconds(count, 0, collection, forks=forks, controller_cores=controller_cores)
        # The script was not run at every host count the collection was.
        script_run = measured["script"]["first"].get(count)
        lines.append(
            "| %d | %.1f s | %.1f s | %s | %s |"
            % (
                count,
                measured["collection"]["first"][count][0],
                modelled,
                "%.1f s" % script_run[0] if script_run else "-",
                "%.1f s" % script_seconds(count, 0, script, measured["script_fanout"]) if script_run else "-",
            )
        )
    return "\n".join(lines)


def report(
    inputs,
    host_counts,
    archs=1,
    build_hosts=1,
    forks=20,
    script_fanout=20,
    controller_cores=2,
    model_gb=0.0,
    uplink_gbps=None,
):
    rate = store_mb_s(inputs, uplink_gbps)
    first, rerun = projection_tables(
        inputs, host_counts, archs, build_hosts, forks, script_fanout, controller_cores, model_gb, rate
    )
    stack_gb = inputs["bytes"]["stack_archive_gb"]
    limit_gb = uplink_limit(inputs, rate, forks, controller_cores)
    collection = measured_model(inputs, "collection", "first")
    script = measured_model(inputs, "script", "first")
    low, high = build_seconds(inputs, "low"), build_seconds(inputs, "high")
    largest = max(host_counts)
    lines = [
        "**A projection, not a measurement.** No host here built the real PyTorch, Triton or vLLM: the build "
        "times are published figures (below), the rest is what `benchmarks/scale.py` measured with fixture "
        "builds (a small CMake + Ninja compile).",
        "",
        "Measured inputs: "
        + inputs["measured"]["source"]
        + "; the store's rate: "
        + inputs["bytes"]["store_source"]
        + ".",
        "",
        "- collection: one host's first rollout %.1f s; controller CPU %.1f s for it and %.2f s per added host"
        % (collection["one_host_s"], collection["cpu_one_host_s"], collection["cpu_per_added_host_s"]),
        "- field-guide script: %.1f s for one host beside its builds (its one-host run)" % script["one_host_s"],
        "- builds, PyTorch + Triton + vLLM one after another: %s (low) and %s (high): %s"
        % (
            duration(low),
            duration(high),
            ", ".join(
                "%s %d-%d min" % (name, c["low_min"], c["high_min"])
                if c["low_min"] != c["high_min"]
                else "%s %d min" % (name, c["low_min"])
                for name, c in inputs["builds"].items()
            ),
        ),
        "",
        "- bytes per host: the collection's stack archive %.1f GB (low) to %.1f GB (high), the script's closure "
        "%.2f GB, and the model %.0f GB (--model-gb) on both; one store sends %.0f MB/s (%s)"
        % (
            stack_gb["low"],
            stack_gb["high"],
            inputs["bytes"]["script_closure_gb"],
            model_gb,
            rate,
            "its measured rate" if rate == inputs["bytes"]["store_mb_s"] else "a %g Gb/s uplink" % uplink_gbps,
        ),
        "",
        "Model: script = max(ceil(N / fan-out) x (per-host time + B), N x bytes / store rate); collection = "
        "ceil(arch lists / build hosts) x B + max(ceil(N / forks) x one-host time, controller CPU / min(%d "
        "controller cores, forks), N x bytes / store rate); B = the builds above. Each cell: low to high build "
        "times and stack sizes." % controller_cores,
        "",
        "Where one store's uplink sets the pace: above %.1f GB per host at %.0f MB/s (a host's share of the "
        "rollout's own time, the same at any host count). A stack archive (%.1f-%.1f GB) stays below it; a model "
        "does not (a 70B model in bf16 is 140 GB, %s per host through one store). Then a site serves the bytes "
        "from more than one place: a store per arch list's build host (the build farm), a mirror per rack "
        "(instinct_mirror_url per group), or the model from a parallel file system as a local path."
        % (limit_gb, rate, stack_gb["low"], stack_gb["high"], duration(140 * 1000.0 / rate)),
        "",
        "From bare metal to serving (first rollout):",
        "",
        first,
        "",
        "No-op rerun (nothing changed; the script builds everything again, the collection builds nothing):",
        "",
        rerun,
        "",
        "The model against the runs it was made from (no build time; all hosts shared the measuring machine's 2 "
        "cores, which the model leaves out, so it is under both tools' measured times above one host):",
        "",
        check_table(inputs, forks, controller_cores),
        "",
        "Extrapolated from the measuring machine's own growth instead (%.1f s per added host, every host and the "
        "controller on its 2 cores), the collection's time beside the builds would be %s at %d hosts, not %s."
        % (
            collection["wall_per_added_host_s"],
            duration(collection["one_host_s"] + (largest - 1) * collection["wall_per_added_host_s"]),
            largest,
            duration(collection_seconds(largest, 0, collection, archs, build_hosts, forks, controller_cores)),
        ),
        "",
        "Assumptions:",
        "",
        *("- " + item for item in inputs["assumptions"]),
        "",
        "Not shown:",
        "",
        *("- " + item for item in inputs["not_shown"]),
        "",
        "Build times, with their sources:",
        "",
    ]
    for name, component in inputs["builds"].items():
        for source in component["sources"]:
            lines.append(
                "- %s, %s: %s. Machine: %s. Version: %s. <%s>"
                % (name, source["used"], source["figure"], source["machine"], source["version"], source["url"])
            )
    lines += ["", "Stack sizes, with their sources:", ""]
    for source in inputs["bytes"]["stack_archive_gb"]["sources"]:
        lines.append("- %s: %s. <%s>" % (source["used"], source["figure"], source["url"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 10, 100, 1000], help="default: 1 10 100 1000")
    parser.add_argument("--archs", type=int, default=1, help="distinct arch lists among the hosts (default: 1)")
    parser.add_argument("--build-hosts", type=int, default=1, help="build hosts that build in parallel (default: 1)")
    parser.add_argument("--forks", type=int, default=INPUTS["measured"]["forks"], help="ansible forks (default: 20)")
    parser.add_argument(
        "--script-fanout", type=int, default=20, help="hosts the field-guide script runs on at once (default: 20)"
    )
    parser.add_argument(
        "--controller-cores", type=int, default=2, help="the controller's cores (default: 2, the measuring machine)"
    )
    parser.add_argument(
        "--model-gb", type=float, default=0.0, help="the model's size every host pulls (default: 0; 140 for a 70B)"
    )
    parser.add_argument(
        "--uplink-gbps", type=float, help="the store's uplink in Gb/s, when below its measured rate (default: none)"
    )
    args = parser.parse_args(argv)
    for name in ("archs", "build_hosts", "forks", "script_fanout", "controller_cores"):
        if getattr(args, name) < 1:
            parser.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.model_gb < 0 or (args.uplink_gbps is not None and args.uplink_gbps <= 0):
        parser.error("--model-gb must be 0 or more and --uplink-gbps more than 0")
    if min(args.hosts) < 1:
        parser.error("--hosts must be at least 1")
    print(
        report(
            INPUTS,
            args.hosts,
            archs=args.archs,
            build_hosts=args.build_hosts,
            forks=args.forks,
            script_fanout=args.script_fanout,
            controller_cores=args.controller_cores,
            model_gb=args.model_gb,
            uplink_gbps=args.uplink_gbps,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
