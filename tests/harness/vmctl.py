"""Start and stop the qemu guests of the molecule scenarios, and the fixture mirror they install from.

    vmctl start NAME --workdir DIR --image-dir DIR [--memory MB] [--cpus N] [--accel auto|kvm|tcg]
    vmctl stop NAME --workdir DIR
    vmctl serve DIRECTORY --workdir DIR [--bind IP] [--port N]   # HTTP on 127.0.0.1 (guests: 10.0.2.2)
    vmctl unserve --workdir DIR

where vmctl is `python -m tests.harness.vmctl`, run from the checkout's root or with it on PYTHONPATH
(tests/harness/__init__.py).

start prints the instance as JSON (instance, address, user, port, identity_file, accel): molecule's
instance config. With --accel auto it boots under KVM first and falls back to TCG, with a warning,
when the guest kernel prints nothing on the serial console in time (nested KVM on some hosts hangs
before the kernel's first message).
"""

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time

KVM_FIRST_OUTPUT_S = 20
# Where a failed KVM boot is remembered, so later runs on this machine go straight to TCG for a day.
KVM_HANGS_MARKER = os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
    "instinct-stack",
    "vm",
    "kvm-hangs",
)
KVM_HANGS_REMEMBER_S = 86400
SSH_READY_S = 420
GUEST_USER = "ansible"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_pid(path):
    try:
        with open(path) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def kill(pidfile, wait_s=15):
    pid = read_pid(pidfile)
    if pid is None:
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.time() + wait_s
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            continue
        break
    if os.path.exists(pidfile):  # qemu removes its own pidfile when it exits cleanly
        os.unlink(pidfile)
    return True


def ssh_command(instance, *remote):
    return [
        "ssh",
        "-i",
        instance["identity_file"],
        "-p",
        str(instance["port"]),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=5",
        "-o",
        "BatchMode=yes",
        "%s@%s" % (instance["user"], instance["address"]),
        *remote,
    ]


def boot(args, accel, paths, port, key_b64):
    for stale in (paths["serial"], paths["pid"]):
        if os.path.exists(stale):
            os.unlink(stale)
    # Under TCG, "max": a package install and Python's start in the guest ran slower as Westmere (x86-64-v2), which
    # unpacked a stack faster, and the default scenario as a whole was not faster with it (benchmarks/results/
    # history.md, "The guest's CPU model under TCG").
    accel_args = (
        ["-accel", "kvm", "-cpu", "host,-arch-capabilities"]
        if accel == "kvm"
        else ["-accel", "tcg,thread=multi", "-cpu", "max"]
    )
    command = [
        "qemu-system-x86_64",
        *accel_args,
        "-name",
        args.name,
        "-m",
        str(args.memory),
        "-smp",
        str(args.cpus),
        "-kernel",
        os.path.join(args.image_dir, "vmlinuz"),
        "-initrd",
        os.path.join(args.image_dir, "initrd.img"),
        "-append",
        "root=/dev/vda rw console=ttyS0 quiet instinct.ssh_key=%s" % key_b64,
        "-drive",
        "file=%s,if=virtio,format=qcow2" % paths["disk"],
        "-netdev",
        netdev(args, port),
        "-device",
        "virtio-net-pci,netdev=net0",
        "-serial",
        "file:%s" % paths["serial"],
        "-display",
        "none",
        "-monitor",
        "none",
        "-daemonize",
        "-pidfile",
        paths["pid"],
    ]
    subprocess.run(command, check=True)


def netdev(args, ssh_port):
    """qemu user networking: SSH forwarded from the host; with --restrict the guest reaches nothing but the
    --guestfwd targets (restrict=on drops every other packet inside qemu, so none leaves this machine)."""
    options = ["user", "id=net0", "hostfwd=tcp:127.0.0.1:%d-:22" % ssh_port]
    if args.restrict:
        options.append("restrict=on")
    for forward in args.guestfwd:
        guest, host = forward.split("=", 1)
        # cmd: runs one socat per connection; a tcp: chardev would carry a single connection only.
        options.append("guestfwd=tcp:%s-cmd:socat - TCP:%s" % (guest, host))
    return ",".join(options)


def kernel_started(serial_path, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with open(serial_path, "rb") as handle:
                if b"Linux version" in handle.read() or os.path.getsize(serial_path) > 4096:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def new_overlay(args, paths):
    """A fresh copy-on-write disk over the cached image, so the image itself never changes."""
    backing = os.path.join(args.image_dir, "disk.img")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", backing, paths["disk"]], check=True)


def warn_tcg(name, reason):
    print(
        "WARNING: %s; booting %s with TCG software emulation, which is several times slower" % (reason, name),
        file=sys.stderr,
    )


def kvm_known_to_hang():
    try:
        return time.time() - os.path.getmtime(KVM_HANGS_MARKER) < KVM_HANGS_REMEMBER_S
    except OSError:
        return False


def start(args):
    os.makedirs(args.workdir, exist_ok=True)
    base = os.path.join(args.workdir, args.name)
    paths = {"disk": base + ".qcow2", "pid": base + ".pid", "serial": base + ".serial.log", "key": base + ".key"}
    kill(paths["pid"])
    for leftover in (paths["disk"], paths["key"], paths["key"] + ".pub"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "molecule-" + args.name, "-f", paths["key"]], check=True
    )
    with open(paths["key"] + ".pub", "rb") as handle:
        key_b64 = base64.b64encode(handle.read().strip()).decode()
    new_overlay(args, paths)
    port = free_port()
    accel = args.accel
    if accel == "auto":
        accel = "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "tcg"
        if accel == "tcg":
            warn_tcg(args.name, "/dev/kvm is not usable")
        elif kvm_known_to_hang():
            accel = "tcg"
            warn_tcg(args.name, "KVM guests hung on this machine within the last day (%s)" % KVM_HANGS_MARKER)
        else:
            boot(args, "kvm", paths, port, key_b64)
            if not kernel_started(paths["serial"], KVM_FIRST_OUTPUT_S):
                kill(paths["pid"], wait_s=5)
                warn_tcg(
                    args.name,
                    "the guest kernel printed nothing in %d s under KVM (nested virtualization on "
                    "this host hangs)" % KVM_FIRST_OUTPUT_S,
                )
                accel = "tcg"
                os.makedirs(os.path.dirname(KVM_HANGS_MARKER), exist_ok=True)
                with open(KVM_HANGS_MARKER, "w") as handle:
                    handle.write("guest kernel silent for %d s under KVM\n" % KVM_FIRST_OUTPUT_S)
                new_overlay(args, paths)
    elif accel == "tcg":
        print("WARNING: %s runs under TCG software emulation (--accel tcg)" % args.name, file=sys.stderr)
    if read_pid(paths["pid"]) is None:
        boot(args, accel, paths, port, key_b64)
    instance = {
        "instance": args.name,
        "address": "127.0.0.1",
        "user": GUEST_USER,
        "port": port,
        "identity_file": paths["key"],
        "accel": accel,
    }
    deadline = time.time() + SSH_READY_S
    while time.time() < deadline:
        probe = subprocess.run(ssh_command(instance, "sudo", "-n", "true"), capture_output=True, check=False)
        if probe.returncode == 0:
            print(json.dumps(instance))
            return 0
        if read_pid(paths["pid"]) is None:
            break
        time.sleep(2)
    try:
        with open(paths["serial"], errors="replace") as handle:
            tail = handle.read()[-3000:]
    except OSError:
        tail = "(no serial output)"
    kill(paths["pid"])
    print(
        "guest %s did not answer SSH within %d s; serial console tail:\n%s" % (args.name, SSH_READY_S, tail),
        file=sys.stderr,
    )
    return 1


def stop(args):
    base = os.path.join(args.workdir, args.name)
    stopped = kill(base + ".pid")
    for leftover in (base + ".qcow2", base + ".key", base + ".key.pub"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    print(json.dumps({"instance": args.name, "stopped": stopped}))
    return 0


def serve(args):
    pidfile = os.path.join(args.workdir, "%s.pid" % args.name)
    kill(pidfile)
    port = args.port or free_port()
    log = open(os.path.join(args.workdir, "%s.log" % args.name), "ab")  # noqa: SIM115 - handed to the server process
    # --hub: the fixture Hub (tests/harness/fixture_hub.py) for the repositories under the directory.
    command = (
        [sys.executable, "-m", "tests.harness.fixture_hub", "serve", args.directory, "--bind", args.bind, "--port"]
        if args.hub
        else [sys.executable, "-m", "http.server", "--bind", args.bind, "--directory", args.directory]
    )
    server = subprocess.Popen(  # noqa: S603
        [*command, str(port)],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    with open(pidfile, "w") as handle:
        handle.write(str(server.pid))
    for _attempt in range(50):
        try:
            socket.create_connection((args.bind, port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    print(
        json.dumps(
            {
                "port": port,
                "host_url": "http://%s:%d" % (args.bind, port),
                # qemu's user network shows the host's loopback to the guests as 10.0.2.2.
                "guest_url": "http://%s:%d" % ("10.0.2.2" if args.bind == "127.0.0.1" else args.bind, port),
            }
        )
    )
    return 0


def unserve(args):
    print(json.dumps({"stopped": kill(os.path.join(args.workdir, "%s.pid" % args.name))}))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    start_parser = commands.add_parser("start")
    start_parser.add_argument("name")
    start_parser.add_argument("--workdir", required=True)
    start_parser.add_argument("--image-dir", required=True)
    start_parser.add_argument("--memory", type=int, default=2048)
    start_parser.add_argument("--cpus", type=int, default=2)
    start_parser.add_argument(
        "--accel", choices=["auto", "kvm", "tcg"], default=os.environ.get("INSTINCT_VM_ACCEL", "auto")
    )
    start_parser.add_argument(
        "--restrict", action="store_true", help="cut the guest off from everything but --guestfwd"
    )
    start_parser.add_argument(
        "--guestfwd",
        action="append",
        default=[],
        metavar="GUESTIP:PORT=HOSTIP:PORT",
        help="forward the guest's connections to GUESTIP:PORT to HOSTIP:PORT on this machine",
    )
    start_parser.set_defaults(handler=start)
    stop_parser = commands.add_parser("stop")
    stop_parser.add_argument("name")
    stop_parser.add_argument("--workdir", required=True)
    stop_parser.set_defaults(handler=stop)
    serve_parser = commands.add_parser("serve")
    serve_parser.add_argument("directory")
    serve_parser.add_argument("--workdir", required=True)
    serve_parser.add_argument("--name", default="mirror", help="name of the server (its pid and log files)")
    serve_parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default: loopback)")
    serve_parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    serve_parser.add_argument("--hub", action="store_true", help="serve it as the fixture Hub's repositories")
    serve_parser.set_defaults(handler=serve)
    unserve_parser = commands.add_parser("unserve")
    unserve_parser.add_argument("--workdir", required=True)
    unserve_parser.add_argument("--name", default="mirror")
    unserve_parser.set_defaults(handler=unserve)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
