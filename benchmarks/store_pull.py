"""16 hosts pulling one model at once from one artifact store: Python's http.server, the store before issue 28, and
nginx with the configuration the vllm role templates, the store after (issue 28).

The hosts are network namespaces, each with a veth pair on one Linux bridge, and the store runs in a namespace of its
own on the same bridge: every byte crosses the bridge as it would cross a switch. Namespaces and not systemd-nspawn
machines (benchmarks/scale.py): a pull needs a network stack and a directory, not an init and sshd, and 16 booted
machines would take this 2-core machine's cores from the transfer being measured. Each host runs the real puller,
plugins/module_utils/model_pull.pull() (reached through ansible-core's collection loader, as the CLI does), into a
directory of its own.

The model is plain random files (--model-mb in all, in four weights files and a config.json) published in the
models layout with module_utils/models.py (manifest, publish): models/ORG--NAME/COMMIT/ and COMMIT.json, under a
store directory like vllm_store_dir. The servers:

- before: `python3 -m http.server --bind ADDRESS --directory STORE PORT`, the command of the old unit;
- after: /usr/sbin/nginx -e stderr -p RUNDIR/ -c CONF, the unit's command, CONF rendered from the role's own
  template (roles/vllm/templates/instinct-stack-store.nginx.conf.j2) with the role's port. The master runs as root
  here and its workers as nginx's default user (nobody), where the unit runs both as its dynamic user.

For each server, every host at once (each host starts when all are ready, at one signal):

- pull: model_pull.pull() whole: download, fsync, sha256 of every file, one rename;
- download: the same requests (open_url over the manifest's files), the bodies read and dropped: no disk, no sha256,
  so the server and the bridge show apart from the hosts' disk and hashing;
- resume: one host whose first weights file was cut at half pulls again; the status its range request gets and the
  bytes it downloads.

And the bridge's line rate: iperf3, one TCP stream from the store's namespace to one host's, memory to memory.

    .venv/bin/python -m benchmarks.store_pull [--hosts 16] [--model-mb 1024] [--workdir build/bench-store-pull]

Run as root from the repository root (network namespaces); needs nginx and iperf3 (apt-get install nginx iperf3;
where nothing else serves port 80, mask nginx.service first or the package starts its default site). Results go to
stdout and to benchmarks/results/store-pull-DATE.json and .txt; the servers' logs to WORKDIR/logs. The namespaces,
the bridge, the servers and the files are removed at the end, also on Ctrl-C and SIGTERM.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import jinja2
import yaml

from instinct_stack.collection import collection_module
from tests.harness.nspawnctl import Bridge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLE = os.path.join(ROOT, "roles", "vllm")
CONFIG_TEMPLATE = "instinct-stack-store.nginx.conf.j2"
RESULTS = os.path.join(ROOT, "benchmarks", "results")
# Names of the benchmark's own: the kernel allows 15 characters for a link name.
PREFIX = "isp"
BRIDGE = Bridge(PREFIX + "-br", "10.236.0.1/24")
STORE_NAMESPACE = PREFIX + "-store"
STORE_ADDRESS = "10.236.0.2"
REPO = "bench/model"
REVISION = "b" * 40
WEIGHT_FILES = 4
MB = 1000 * 1000
SERVERS = ("http.server", "nginx")
MODES = ("pull", "download")


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, text=True, **kwargs)  # noqa: S603


def quiet(argv):
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603


def in_namespace(namespace, *command):
    return ["ip", "netns", "exec", namespace, *command]


def host_namespace(index):
    return "%s-h%02d" % (PREFIX, index)


def host_address(index):
    return "10.236.0.%d" % (10 + index)


def role_defaults():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


def render_config(store_dir, address, port):
    """The role's nginx configuration for a store directory, address and port, rendered from the role's template (the
    variables it reads are the role's; ansible_managed as Ansible would put it)."""
    environment = jinja2.Environment(  # noqa: S701 - a configuration file, not HTML
        loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return environment.get_template(CONFIG_TEMPLATE).render(
        ansible_managed="Rendered by benchmarks/store_pull.py from the vllm role's template",
        vllm_store_dir=store_dir,
        vllm_store_address=address,
        vllm_store_port=port,
        vllm_store_unit=role_defaults()["vllm_store_unit"],
    )


def server_argv(server, store_dir, port, rundir, config):
    """The command of the store's unit before (http.server) and after (nginx), in the store's namespace."""
    if server == "http.server":
        return in_namespace(
            STORE_NAMESPACE, "/usr/bin/python3", "-m", "http.server", "--bind", STORE_ADDRESS, "--directory", store_dir,
            str(port),
        )  # fmt: skip
    # nginx joins its relative paths to -p as text: the prefix ends with a slash, as in the unit.
    return in_namespace(
        STORE_NAMESPACE, "/usr/sbin/nginx", "-e", "stderr", "-p", rundir.rstrip("/") + "/", "-c", config
    )


class Network:
    """The bridge, the store's namespace and one namespace per host, each with a veth pair on the bridge; all removed
    on exit."""

    def __init__(self, hosts):
        self.namespaces = [(STORE_NAMESPACE, STORE_ADDRESS)] + [
            (host_namespace(index), host_address(index)) for index in range(1, hosts + 1)
        ]

    def __enter__(self):
        self.remove()
        BRIDGE.up()
        for namespace, address in self.namespaces:
            run(["ip", "netns", "add", namespace])
            run(["ip", "link", "add", namespace, "type", "veth", "peer", "name", "eth0", "netns", namespace])
            run(["ip", "link", "set", namespace, "master", BRIDGE.name, "up"])
            run(["ip", "-n", namespace, "addr", "add", address + "/24", "dev", "eth0"])
            run(["ip", "-n", namespace, "link", "set", "eth0", "up"])
            run(["ip", "-n", namespace, "link", "set", "lo", "up"])
        return self

    def remove(self):
        for namespace, _address in self.namespaces:
            quiet(["ip", "link", "del", namespace])
            quiet(["ip", "netns", "del", namespace])
        BRIDGE.down()

    def __exit__(self, *exc):
        self.remove()


def make_model(store_dir, model_mb, work):
    """models/ORG--NAME/COMMIT/ with WEIGHT_FILES random weights files and a config.json, its manifest beside it,
    under store_dir, in the layout and with the manifest module_utils/models.py writes; returns the manifest."""
    models = collection_module("models")
    root = os.path.join(store_dir, "models")
    shutil.rmtree(store_dir, ignore_errors=True)
    staging = os.path.join(work, "staging")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    os.makedirs(os.path.join(root, models.dir_name(REPO)))
    with open(os.path.join(staging, "config.json"), "w") as handle:
        json.dump({"architectures": ["LlamaForCausalLM"], "benchmark": "store_pull"}, handle)
    per_file = model_mb * MB // WEIGHT_FILES
    for index in range(WEIGHT_FILES):
        name = "model-%05d-of-%05d.safetensors" % (index + 1, WEIGHT_FILES)
        with open(os.path.join(staging, name), "wb") as handle:
            left = per_file
            while left:
                block = min(left, 16 * MB)
                handle.write(os.urandom(block))
                left -= block
    data = models.manifest(REPO, REVISION, staging)
    models.publish(root, REPO, REVISION, staging, data)
    # Readable by nginx's workers (nobody) down the whole path, as the store's dynamic user needs it.
    for directory, _dirnames, filenames in os.walk(store_dir):
        os.chmod(directory, 0o755)  # noqa: S103 - public test data, read by nginx's workers
        for name in filenames:
            os.chmod(os.path.join(directory, name), 0o644)
    return data


def spread(values, digits):
    """min, median and max of sorted values, rounded."""
    return {
        "min": round(values[0], digits),
        "median": round(statistics.median(values), digits),
        "max": round(values[-1], digits),
    }


def summary(records, total_bytes_expected=None):
    """Aggregate MB/s of records ({start, end, bytes} per host) from the first start to the last end, and per host
    MB/s and seconds (min, median, max)."""
    wall = max(record["end"] for record in records) - min(record["start"] for record in records)
    total = sum(record["bytes"] for record in records)
    rates = sorted(record["bytes"] / (record["end"] - record["start"]) / MB for record in records)
    seconds = sorted(record["end"] - record["start"] for record in records)
    result = {
        "hosts": len(records),
        "wall_s": round(wall, 2),
        "bytes": total,
        "aggregate_MBps": round(total / wall / MB, 1),
        "host_MBps": spread(rates, 1),
        "host_s": spread(seconds, 2),
    }
    if total_bytes_expected is not None:
        result["complete"] = total == total_bytes_expected
    return result


def iperf_rate(report):
    """MB/s the receiver of an iperf3 -J run saw."""
    return round(report["end"]["sum_received"]["bits_per_second"] / 8 / MB, 1)


def line_rate(seconds, logs):
    """One TCP stream, memory to memory, from the store's namespace to the first host's, over the bridge (iperf3)."""
    with open(os.path.join(logs, "iperf3-server.log"), "w") as log:
        server = subprocess.Popen(  # noqa: S603
            in_namespace(STORE_NAMESPACE, "iperf3", "--server", "--one-off", "--bind", STORE_ADDRESS),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_listening(5201)
            report = run(
                in_namespace(
                    host_namespace(1),
                    "iperf3",
                    "--client",
                    STORE_ADDRESS,
                    "--reverse",
                    "--json",
                    "--time",
                    str(seconds),
                ),
                capture_output=True,
            ).stdout
        finally:
            stop(server)
    return iperf_rate(json.loads(report))


def wait_listening(port, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listening = run(in_namespace(STORE_NAMESPACE, "ss", "-Hltn", "sport = :%d" % port), capture_output=True).stdout
        if listening.strip():
            return
        time.sleep(0.2)
    raise RuntimeError("nothing listens on %s:%d after %d s" % (STORE_ADDRESS, port, timeout))


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def client_argv(index, mode, base, root, extra=()):
    return in_namespace(
        host_namespace(index), sys.executable, "-m", "benchmarks.store_pull", "client",
        "--mode", mode, "--base", base, "--root", root, "--name", host_namespace(index), *extra,
    )  # fmt: skip


def at_once(argvs):
    """Start every client, wait until each says it is ready (its imports done), tell them all to go at once, and
    return their records."""
    clients = [
        subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # noqa: S603
        for argv in argvs
    ]
    try:
        for client in clients:
            if client.stdout.readline().strip() != "ready":
                raise RuntimeError("a client did not start: %s" % client.args)
        for client in clients:
            client.stdin.write("go\n")
            client.stdin.flush()
        records = []
        for client in clients:
            output = client.communicate(timeout=1800)[0]
            if client.returncode != 0:
                raise RuntimeError("client %s failed (exit %d)" % (client.args, client.returncode))
            records.append(json.loads(output.strip().splitlines()[-1]))
        return records
    finally:
        for client in clients:
            stop(client)


def client(args):
    """One host: the real puller (pull), the same requests with the bodies dropped (download), or a pull of a cut
    download (resume); prints one JSON record."""
    model_pull = collection_module("model_pull")
    models = collection_module("models")
    from ansible.module_utils.urls import open_url

    requests = []

    def recording_opener(url, headers=None, **kwargs):
        response = open_url(url, headers=headers, **kwargs)
        requests.append({"url": url, "range": (headers or {}).get("Range"), "status": response.getcode()})
        return response

    if args.mode == "resume":
        # A cut download, as a pull stopped halfway leaves it: the first weights file's first half in the staging
        # directory.
        data = model_pull.read_manifest(args.base, REPO, REVISION)
        entry = next(item for item in data["files"] if item["path"].endswith(".safetensors"))
        staging = models.partial_dir(args.root, REPO, REVISION)
        os.makedirs(staging)
        stored = os.path.join(args.store_root, models.dir_name(REPO), REVISION, entry["path"])
        with open(stored, "rb") as source, open(os.path.join(staging, entry["path"]), "wb") as cut:
            cut.write(source.read(entry["size"] // 2))
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    if args.mode == "download":
        data = model_pull.read_manifest(args.base, REPO, REVISION)
        received = 0
        for entry in data["files"]:
            url = "%s/%s" % (model_pull.revision_url(args.base, REPO, REVISION), entry["path"])
            response = open_url(url, timeout=model_pull.TIMEOUT)
            for block in iter(lambda response=response: response.read(models.BLOCK), b""):
                received += len(block)
    else:
        result = model_pull.pull(args.base, args.root, REPO, REVISION, keep=1, opener=recording_opener)
        received = result["downloaded"]
    end = time.time()
    record = {"host": args.name, "mode": args.mode, "start": start, "end": end, "bytes": received}
    if args.mode == "resume":
        record["resumed"] = [request for request in requests if request["range"]]
        record["cut_file_size"] = entry["size"]
        record["model_size"] = data["size"]
    print(json.dumps(record), flush=True)
    return 0


def resume_summary(record):
    """What a resumed pull got: the status of its range request, and the bytes it downloaded against the model's size
    and the half of the cut file it held."""
    ranged = record["resumed"]
    held = record["cut_file_size"] // 2
    return {
        "range_request": ranged[0]["range"] if ranged else None,
        "status": ranged[0]["status"] if ranged else None,
        "downloaded_bytes": record["bytes"],
        "model_bytes": record["model_size"],
        "held_bytes": held,
        "took_whole_file_again": record["bytes"] == record["model_size"],
    }


def bench_server(server, args, work, data, port):
    logs = os.path.join(work, "logs")
    rundir = os.path.join(work, "run-" + server)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    config = os.path.join(work, "nginx.conf")
    base = "http://%s:%d/models" % (STORE_ADDRESS, port)
    results = {}
    with open(os.path.join(logs, server + ".log"), "w") as log:
        process = subprocess.Popen(  # noqa: S603
            server_argv(server, os.path.join(work, "store"), port, rundir, config), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            wait_listening(port)
            for mode in MODES:
                hosts_dir = os.path.join(work, "hosts")
                shutil.rmtree(hosts_dir, ignore_errors=True)
                if args.drop_caches:
                    run(["sync"])
                    with open("/proc/sys/vm/drop_caches", "w") as handle:
                        handle.write("3\n")
                argvs = [
                    client_argv(index, mode, base, os.path.join(hosts_dir, str(index)))
                    for index in range(1, args.hosts + 1)
                ]
                records = at_once(argvs)
                results[mode] = summary(records, data["size"] * args.hosts)
                results[mode]["records"] = records
                shown = {key: value for key, value in results[mode].items() if key != "records"}
                print("%s %s: %s" % (server, mode, json.dumps(shown)))
            shutil.rmtree(os.path.join(work, "hosts"), ignore_errors=True)
            resumed = at_once(
                [
                    client_argv(
                        1,
                        "resume",
                        base,
                        os.path.join(work, "hosts", "1"),
                        ["--store-root", os.path.join(work, "store", "models")],
                    )
                ]  # fmt: skip
            )[0]
            results["resume"] = resume_summary(resumed)
            print("%s resume: %s" % (server, json.dumps(results["resume"])))
        finally:
            stop(process)
            shutil.rmtree(os.path.join(work, "hosts"), ignore_errors=True)
    return results


def table(result):
    """The figures as text: line rate, then per server and mode the aggregate and per-host rates, then the resumes."""
    lines = [
        "%d hosts pulling one %s MB model at once from one store; bridge line rate (iperf3, one stream): %s MB/s"
        % (result["hosts"], result["model_mb"], result["line_rate_MBps"]),
        "%-11s %-8s | %8s %10s %8s | %25s | %s"
        % ("server", "mode", "wall [s]", "aggr MB/s", "of line", "per host MB/s min/med/max", "per host s min/med/max"),
    ]
    for server in SERVERS:
        for mode in MODES:
            figure = result["servers"][server][mode]
            lines.append(
                "%-11s %-8s | %8.2f %10.1f %7.0f%% | %25s | %s"
                % (
                    server,
                    mode,
                    figure["wall_s"],
                    figure["aggregate_MBps"],
                    100 * figure["aggregate_MBps"] / result["line_rate_MBps"],
                    "%.1f / %.1f / %.1f" % tuple(figure["host_MBps"][key] for key in ("min", "median", "max")),
                    "%.2f / %.2f / %.2f" % tuple(figure["host_s"][key] for key in ("min", "median", "max")),
                )
            )
    for server in SERVERS:
        resume = result["servers"][server]["resume"]
        lines.append(
            "resume, %s: %s answered %s; the pull downloaded %d bytes of the model's %d, %d of them held%s"
            % (
                server,
                resume["range_request"],
                resume["status"],
                resume["downloaded_bytes"],
                resume["model_bytes"],
                resume["held_bytes"],
                " (the cut file whole again)" if resume["took_whole_file_again"] else "",
            )
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    subcommands = parser.add_subparsers(dest="command")
    one = subcommands.add_parser("client", help="one host's pull (run by the benchmark in the host's namespace)")
    one.add_argument("--mode", choices=["pull", "download", "resume"], required=True)
    one.add_argument("--base", required=True)
    one.add_argument("--root", required=True)
    one.add_argument("--name", required=True)
    one.add_argument("--store-root", help="resume: the store's models directory, to cut a file from")
    parser.add_argument("--hosts", type=int, default=16, help="hosts pulling at once (default: 16)")
    parser.add_argument("--model-mb", type=int, default=1024, help="the model's weights in MB of 10^6 bytes (1024)")
    parser.add_argument("--line-seconds", type=int, default=5, help="seconds of the iperf3 line-rate run (5)")
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache before each run (cold)")
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench-store-pull"))
    parser.add_argument("--results", default=RESULTS, help="where the JSON and text results go")
    args = parser.parse_args(argv)
    if args.command == "client":
        return client(args)
    if os.geteuid() != 0:
        parser.error("run as root: the hosts and the store are network namespaces")
    for tool in ("/usr/sbin/nginx", "iperf3"):
        if shutil.which(tool) is None:
            parser.error("%s is missing: apt-get install nginx iperf3 (see the docstring)" % tool)

    # A plain kill still removes the namespaces, the bridge, the servers and the files.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = os.path.abspath(args.workdir)
    port = role_defaults()["vllm_store_port"]
    shutil.rmtree(os.path.join(work, "logs"), ignore_errors=True)
    os.makedirs(os.path.join(work, "logs"))
    os.chmod(work, 0o755)  # noqa: S103 - nginx's workers (nobody) go through it to the store
    try:
        data = make_model(os.path.join(work, "store"), args.model_mb, work)
        with open(os.path.join(work, "nginx.conf"), "w") as handle:
            handle.write(render_config(os.path.join(work, "store"), STORE_ADDRESS, port))
        with Network(args.hosts):
            line = line_rate(args.line_seconds, os.path.join(work, "logs"))
            print("line rate: %s MB/s" % line)
            servers = {server: bench_server(server, args, work, data, port) for server in SERVERS}
    finally:
        for leftover in ("store", "hosts", "staging") + tuple("run-" + server for server in SERVERS):
            shutil.rmtree(os.path.join(work, leftover), ignore_errors=True)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "nproc": os.cpu_count(),
        "hosts": args.hosts,
        "model_mb": args.model_mb,
        "model_bytes": data["size"],
        "page_cache": (
            "dropped before each run"
            if args.drop_caches
            else "warm: the store's model was written and hashed just before, and the machine's memory holds it"
        ),
        "line_rate_MBps": line,
        "servers": servers,
    }
    text = table(result)
    os.makedirs(args.results, exist_ok=True)
    stem = os.path.join(args.results, "store-pull-%s" % time.strftime("%Y-%m-%d"))
    with open(stem + ".json", "w") as handle:
        json.dump(result, handle, indent=1)
    with open(stem + ".txt", "w") as handle:
        handle.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
