"""Lightweight test hosts: systemd-nspawn machines booted from the molecule guest image.

    nspawnctl up --bridge BR --address IP/PREFIX          # the bridge alone, to serve a mirror on first
    nspawnctl start NAME --workdir DIR --image-dir DIR --bridge BR --address IP/PREFIX [--airgapped]
    nspawnctl stop NAME --workdir DIR --bridge BR
    nspawnctl poweroff NAME --workdir DIR --bridge BR   # pull the plug: SIGKILL, the overlay and network stay
    nspawnctl boot NAME --workdir DIR --bridge BR       # boot a powered-off machine again, wait for its sshd
    nspawnctl down --workdir DIR --bridge BR      # the bridge and the image mount, after the last stop

where nspawnctl is `python -m tests.harness.nspawnctl`, run from the checkout's root or with it on PYTHONPATH
(tests/harness/__init__.py).

Each machine runs the guest image's own systemd as PID 1 and its sshd, on an overlay of the image (the
image itself never changes), in a network namespace of its own joined to a bridge on this machine.
The bridge holds the network's first address (IP/PREFIX's .1): the mirror is served there. A machine
has no default route: it reaches the bridge's network and nothing else. An --airgapped machine
reaches only the bridge's address (a /32 address and one /32 route, no IPv6), which is where its
mirror is served.

up prints the bridge's address as JSON (serve the mirror there); start brings the bridge up too if
needed, and prints the instance as JSON (instance, address, user, port, identity_file, machine): molecule's
instance config. The molecule scenarios (molecule/shared/create-nspawn.yml) and benchmarks/scale.py
start their hosts through this module. Run as root: it mounts overlays and creates namespaces.
"""

import argparse
import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time

GUEST_USER = "ansible"
SSH_OPTIONS = [
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "BatchMode=yes",
    "-o",
    "LogLevel=ERROR",
]
SSH_READY_S = 180
STOP_WAIT_S = 30


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, text=True, **kwargs)  # noqa: S603


def quiet(argv):
    """A clean-up step: what it removes may already be gone."""
    subprocess.run(argv, capture_output=True, check=False)  # noqa: S603


def gateway_of(interface):
    """The bridge's address for a machine address: the first host address of its network."""
    network = ipaddress.ip_interface(interface).network
    return "%s/%d" % (next(network.hosts()), network.prefixlen)


class Bridge:
    """The bridge that the machines' network namespaces and the mirror server share."""

    def __init__(self, name, address):
        if len(name) > 15:
            raise ValueError("bridge name %r is longer than the kernel's 15 characters" % name)
        self.name = name
        self.address = address  # IP/PREFIX

    @property
    def ip(self):
        return self.address.split("/")[0]

    def up(self):
        """Creates the bridge, or keeps the one there (a second scenario host joins the same bridge)."""
        if os.path.exists("/sys/class/net/%s" % self.name):
            return
        run(["ip", "link", "add", self.name, "type", "bridge"])
        run(["ip", "addr", "add", self.address, "dev", self.name])
        run(["ip", "link", "set", self.name, "up"])

    def down(self):
        quiet(["ip", "link", "del", self.name])

    def __enter__(self):
        self.down()
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()


class ImageMount:
    """The guest image's ext4 disk, mounted read only: the lower layer of every machine's overlay."""

    def __init__(self, image_dir, mountpoint):
        self.disk = os.path.join(image_dir, "disk.img")
        self.path = mountpoint

    def mount(self):
        os.makedirs(self.path, exist_ok=True)
        if not os.path.ismount(self.path):
            run(["mount", "-o", "loop,ro", self.disk, self.path])
        return self.path

    def unmount(self):
        quiet(["umount", "--lazy", self.path])


class Machine:
    """One systemd-nspawn machine on an overlay of the mounted image, its state kept under workdir/NAME."""

    def __init__(self, name, workdir, lower, address, bridge, public_key="", airgapped=False):
        self.name = name
        self.address = address.split("/")[0]
        self.interface = address
        self.bridge = bridge
        self.lower = lower
        self.public_key = public_key
        self.airgapped = airgapped
        self.dir = os.path.join(workdir, "machines", name)
        # Interface and namespace names are per bridge, so two scenarios may name a machine alike.
        tag = hashlib.sha256(("%s/%s" % (bridge.name, name)).encode()).hexdigest()[:10]
        self.veth = "vi" + tag
        self.netns = "instinct-" + tag
        self.process = None

    @property
    def root(self):
        return os.path.join(self.dir, "root")

    @property
    def pidfile(self):
        return os.path.join(self.dir, "nspawn.pid")

    def _write(self, path, content, mode=0o644):
        target = os.path.join(self.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as handle:
            handle.write(content)
        os.chmod(target, mode)

    def network_config(self):
        """systemd-networkd's file for eth0 inside the machine: the same addresses and routes set up from outside."""
        gateway = self.bridge.ip
        if self.airgapped:
            return (
                "[Match]\nName=eth0\n\n[Network]\nAddress=%s/32\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n\n"
                "[Route]\nDestination=%s/32\nScope=link\n" % (self.address, gateway)
            )
        return "[Match]\nName=eth0\n\n[Network]\nAddress=%s\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n" % (
            self.interface
        )

    def start(self):
        self.cleanup()
        for part in ("upper", "work", "root"):
            os.makedirs(os.path.join(self.dir, part))
        with open(os.path.join(self.dir, "address"), "w") as handle:  # for boot, which knows only the name
            handle.write(self.interface)
        run(
            [
                "mount",
                "-t",
                "overlay",
                "overlay",
                "-o",
                "lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (self.lower, self.dir, self.dir),
                self.root,
            ]
        )
        self._write("/etc/hostname", self.name + "\n")
        self._write("/etc/hosts", "127.0.0.1 localhost\n127.0.1.1 %s\n" % self.name)
        self._write("/etc/systemd/network/05-instinct-machine.network", self.network_config())
        self._write("/home/%s/.ssh/authorized_keys" % GUEST_USER, self.public_key, mode=0o600)
        run(["chroot", self.root, "chown", "-R", "%s:%s" % (GUEST_USER, GUEST_USER), "/home/%s/.ssh" % GUEST_USER])
        run(["chroot", self.root, "ssh-keygen", "-A"], capture_output=True)
        run(["ip", "netns", "add", self.netns])
        if self.airgapped:
            # No IPv6 at all: a link-local address would reach this machine's services past the /32 route.
            run(["ip", "netns", "exec", self.netns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
            run(["ip", "netns", "exec", self.netns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
        run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns])
        run(["ip", "link", "set", self.veth, "master", self.bridge.name, "up"])
        if self.airgapped:
            commands = [
                ["addr", "add", self.address + "/32", "dev", "eth0"],
                ["link", "set", "eth0", "up"],
                ["route", "add", self.bridge.ip + "/32", "dev", "eth0", "scope", "link"],
            ]
        else:
            commands = [["addr", "add", self.interface, "dev", "eth0"], ["link", "set", "eth0", "up"]]
        for command in [*commands, ["link", "set", "lo", "up"]]:
            run(["ip", "-n", self.netns, *command])
        self.launch()

    def launch(self):
        """Boots the machine's systemd on the overlay and network that start made (again, after a poweroff)."""
        log = open(os.path.join(self.dir, "console.log"), "ab")  # noqa: SIM115 - handed to nspawn
        self.process = subprocess.Popen(  # noqa: S603
            [  # noqa: S607
                "systemd-nspawn",
                "--quiet",
                "--directory",
                self.root,
                "--boot",
                "--register=no",
                "--keep-unit",
                "--machine",
                self.name,
                "--network-namespace-path=/run/netns/" + self.netns,
                "--console=passive",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        with open(self.pidfile, "w") as handle:
            handle.write(str(self.process.pid))

    def ssh(self, identity, *remote):
        """The ssh command line that runs remote on this machine as the ansible user."""
        return ["ssh", "-i", identity, *SSH_OPTIONS, "-o", "ConnectTimeout=5", GUEST_USER + "@" + self.address, *remote]

    def running_pid(self):
        try:
            with open(self.pidfile) as handle:
                pid = int(handle.read().strip())
            with open("/proc/%d/stat" % pid) as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError):
            return None
        return None if state == "Z" else pid

    def wait_for_ssh(self, identity, timeout_s=SSH_READY_S):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.running_pid() is None:
                raise RuntimeError("%s exited while booting, see %s" % (self.name, self.console_tail()))
            probe = subprocess.run(self.ssh(identity, "sudo", "-n", "true"), capture_output=True, check=False)  # noqa: S603
            if probe.returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError("%s did not answer ssh in %d s; %s" % (self.name, timeout_s, self.console_tail()))

    def console_tail(self):
        try:
            with open(os.path.join(self.dir, "console.log"), errors="replace") as handle:
                return "console tail:\n" + handle.read()[-3000:]
        except OSError:
            return "no console output"

    def stop(self):
        """Stops the machine (nspawn turns SIGTERM into an orderly shutdown) and removes what start made."""
        pid = self.running_pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_WAIT_S
            while self.running_pid() is not None and time.monotonic() < deadline:
                if self.process is not None:
                    self.process.poll()  # reaps our own child, so it stops counting as running
                time.sleep(0.2)
            if self.running_pid() is not None:
                os.kill(pid, signal.SIGKILL)
            if self.process is not None:
                self.process.wait()
        stopped = pid is not None
        self.cleanup()
        return stopped

    def namespace_init(self, nspawn_pid):
        """The machine's init: the process under systemd-nspawn that is PID 1 of its own PID namespace."""
        children = {}
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
        pending = list(children.get(nspawn_pid, []))
        while pending:
            pid = pending.pop(0)
            try:
                with open("/proc/%d/status" % pid) as handle:
                    nspids = next((line.split()[1:] for line in handle if line.startswith("NSpid:")), [])
            except OSError:
                continue
            if len(nspids) > 1 and nspids[-1] == "1":
                return pid
            pending.extend(children.get(pid, []))
        return None

    def poweroff(self):
        """Pulls the plug: SIGKILL to the machine's init, whose death makes the kernel kill every process of its PID
        namespace at once, with no shutdown (SIGKILL to systemd-nspawn alone would leave the machine running
        without it). systemd-nspawn then exits. The overlay and the network stay, for boot."""
        pid = self.running_pid()
        if pid is None:
            return False
        init = self.namespace_init(pid)
        os.kill(init if init is not None else pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_WAIT_S
        while self.running_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.running_pid() is not None:
            os.kill(pid, signal.SIGKILL)
        return True

    def cleanup(self):
        quiet(["umount", "--lazy", self.root])
        # The kernel frees a deleted namespace, and the veth end inside it, asynchronously: delete the pair now.
        quiet(["ip", "link", "del", self.veth])
        quiet(["ip", "netns", "del", self.netns])
        quiet(["rm", "-rf", "--one-file-system", self.dir])


def image_mount(workdir, image_dir):
    """One mount per image, named by its directory (build-image.sh's SUITE-KEY): machines of two Debian releases
    (the cluster scenario's mixed fleet) share a workdir."""
    return ImageMount(image_dir, os.path.join(workdir, "images", os.path.basename(os.path.normpath(image_dir))))


def bridge_up(args):
    """The bridge for the network of --address: every machine of a scenario joins it."""
    bridge = Bridge(args.bridge, gateway_of(args.address))
    bridge.up()
    return bridge


def up(args):
    bridge = bridge_up(args)
    print(json.dumps({"bridge": bridge.name, "address": bridge.ip}))
    return 0


def start(args):
    bridge = bridge_up(args)
    lower = image_mount(args.workdir, args.image_dir).mount()
    identity = os.path.join(args.workdir, args.name + ".key")
    for leftover in (identity, identity + ".pub"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "molecule-" + args.name, "-f", identity])
    with open(identity + ".pub") as handle:
        public_key = handle.read()
    machine = Machine(args.name, args.workdir, lower, args.address, bridge, public_key, args.airgapped)
    machine.start()
    try:
        machine.wait_for_ssh(identity)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        machine.stop()
        return 1
    instance = {
        "instance": args.name,
        "address": machine.address,
        "user": GUEST_USER,
        "port": 22,
        "identity_file": identity,
        "machine": "nspawn",
    }
    print(json.dumps(instance))
    return 0


def stop(args):
    # Stopping needs only the names: the pid file, the overlay, the namespace and the veth derive from them.
    stopped = named_machine(args).stop()
    identity = os.path.join(args.workdir, args.name + ".key")
    for leftover in (identity, identity + ".pub"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    print(json.dumps({"instance": args.name, "stopped": stopped}))
    return 0


def named_machine(args):
    """A machine that start made, known by its name: its state directory, namespace and veth derive from it."""
    return Machine(args.name, args.workdir, "", "0.0.0.0/32", Bridge(args.bridge, ""))


def poweroff(args):
    machine = named_machine(args)
    print(json.dumps({"instance": args.name, "powered_off": machine.poweroff()}))
    return 0


def boot(args):
    try:
        with open(os.path.join(args.workdir, "machines", args.name, "address")) as handle:
            address = handle.read().strip()
    except OSError:
        print("%s was not started here: start it instead" % args.name, file=sys.stderr)
        return 1
    machine = Machine(args.name, args.workdir, "", address, Bridge(args.bridge, ""))
    if machine.running_pid() is not None:
        print("%s is running: poweroff first" % args.name, file=sys.stderr)
        return 1
    if not os.path.ismount(machine.root):
        print("%s has no overlay mounted: start it instead" % args.name, file=sys.stderr)
        return 1
    machine.launch()
    try:
        machine.wait_for_ssh(os.path.join(args.workdir, args.name + ".key"))
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    print(json.dumps({"instance": args.name, "booted": True}))
    return 0


def down(args):
    images = os.path.join(args.workdir, "images")
    for name in sorted(os.listdir(images)) if os.path.isdir(images) else []:
        ImageMount("", os.path.join(images, name)).unmount()
    Bridge(args.bridge, "").down()
    print(json.dumps({"bridge": args.bridge, "down": True}))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    up_parser = commands.add_parser("up", help="create the bridge")
    start_parser = commands.add_parser("start", help="boot a machine and wait for its sshd")
    stop_parser = commands.add_parser("stop", help="stop a machine and remove its overlay, namespace and key")
    poweroff_parser = commands.add_parser("poweroff", help="pull a machine's plug (SIGKILL), keeping its disk")
    boot_parser = commands.add_parser("boot", help="boot a powered-off machine again and wait for its sshd")
    down_parser = commands.add_parser("down", help="remove the bridge and the images' mounts")
    named = (start_parser, stop_parser, poweroff_parser, boot_parser)
    for sub in named:
        sub.add_argument("name")
    for sub in (*named, down_parser):
        sub.add_argument("--workdir", required=True)
    handlers = ((up_parser, up), (start_parser, start), (stop_parser, stop), (poweroff_parser, poweroff))
    for sub, handler in (*handlers, (boot_parser, boot), (down_parser, down)):
        sub.add_argument("--bridge", required=True)
        sub.set_defaults(handler=handler)
    for sub in (up_parser, start_parser):
        sub.add_argument("--address", required=True, metavar="IP/PREFIX", help="a machine's, e.g. 10.232.0.11/24")
    start_parser.add_argument("--image-dir", required=True, help="the guest image (build-image.sh prints it)")
    start_parser.add_argument("--airgapped", action="store_true", help="reach the bridge's address and nothing else")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root: machines are systemd-nspawn containers on overlay mounts")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
