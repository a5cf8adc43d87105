"""An ssh ProxyCommand that counts the bytes one ssh connection carries: what crosses the controller.

benchmarks/scale.py gives Ansible's ssh `-o ProxyCommand=python3 benchmarks/ssh_meter.py %h %p`. It connects to
host:port, relays stdin to the socket and the socket to stdout, and keeps the connection's running totals in
$INSTINCT_SSH_METER_DIR/<pid>.json ({"host", "port", "sent", "received"}), rewritten whenever the relay goes idle,
so a phase can add them up as soon as its ansible-playbook has exited, while the ssh control masters that outlive
it still hold their connections open. Every byte Ansible moves to or from a host (modules, results, the files that
copy and fetch carry) is in those totals; traffic between the hosts, and their downloads from the mirror, are not.
"""

import json
import os
import selectors
import signal
import socket
import sys

CHUNK = 256 * 1024
IDLE_SECONDS = 0.1


class Meter:
    """Running totals of one connection, written atomically to path when they changed."""

    def __init__(self, path, host, port):
        self.path, self.host, self.port = path, host, port
        self.sent = self.received = 0
        self.written = None

    def save(self):
        totals = (self.sent, self.received)
        if self.path is None or totals == self.written:
            return
        staging = self.path + ".tmp"
        with open(staging, "w") as handle:
            json.dump({"host": self.host, "port": self.port, "sent": self.sent, "received": self.received}, handle)
        os.replace(staging, self.path)
        self.written = totals


def relay(connection, stdin_fd, stdout_fd, meter):
    """Copies both ways until the host ends the connection; counts into meter."""
    selector = selectors.DefaultSelector()
    selector.register(stdin_fd, selectors.EVENT_READ, "out")
    selector.register(connection, selectors.EVENT_READ, "in")
    try:
        while True:
            events = selector.select(IDLE_SECONDS)
            if not events:
                meter.save()
                continue
            for key, _mask in events:
                if key.data == "out":
                    data = os.read(stdin_fd, CHUNK)
                    if not data:
                        # ssh has no more to send: pass the end on and read what the host still answers.
                        selector.unregister(stdin_fd)
                        connection.shutdown(socket.SHUT_WR)
                        continue
                    # Counted as read, before passing on: a hangup from ssh can end the relay at any point after.
                    meter.sent += len(data)
                    connection.sendall(data)
                else:
                    data = connection.recv(CHUNK)
                    if not data:
                        return
                    meter.received += len(data)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(stdout_fd, view) :]
    finally:
        selector.close()
        meter.save()


def totals(directory):
    """{"sent", "received", "connections"} added up over the meter files in directory."""
    result = {"sent": 0, "received": 0, "connections": 0}
    if not os.path.isdir(directory):
        return result
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(directory, name)) as handle:
            counted = json.load(handle)
        result["sent"] += counted["sent"]
        result["received"] += counted["received"]
        result["connections"] += 1
    return result


def main(argv=None):
    host, port = (argv if argv is not None else sys.argv[1:])[:2]
    directory = os.environ.get("INSTINCT_SSH_METER_DIR")
    path = os.path.join(directory, "%d.json" % os.getpid()) if directory else None
    meter = Meter(path, host, int(port))
    # ssh ends its ProxyCommand with SIGHUP as it exits (a control master closed with -O exit, too): unwind
    # through relay's finally so that the last bytes are saved.
    signal.signal(signal.SIGHUP, lambda _signum, _frame: sys.exit(0))
    with socket.create_connection((host, int(port))) as connection:
        relay(connection, sys.stdin.fileno(), sys.stdout.fileno(), meter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
