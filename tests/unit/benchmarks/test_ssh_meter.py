"""benchmarks/ssh_meter.py: the ProxyCommand relays both ways unchanged and counts every byte it carries."""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
METER = os.path.join(ROOT, "benchmarks", "ssh_meter.py")
SPEC = importlib.util.spec_from_file_location("ssh_meter", METER)
ssh_meter = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ssh_meter)


def echo_server(reply_prefix):
    """A one-connection TCP server that answers everything it reads with reply_prefix + the data."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        connection, _address = server.accept()
        with connection:
            while True:
                data = connection.recv(65536)
                if not data:
                    break
                connection.sendall(reply_prefix + data)
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def test_the_meter_relays_both_ways_and_counts_each_direction(tmp_path):
    port = echo_server(b"ok:")
    payload = os.urandom(300_000)
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, METER, "127.0.0.1", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, INSTINCT_SSH_METER_DIR=str(tmp_path)),
    )
    received = bytearray()
    reader = threading.Thread(target=lambda: received.extend(proc.stdout.read()))
    reader.start()
    proc.stdin.write(payload)
    proc.stdin.close()
    reader.join(timeout=30)
    assert proc.wait(timeout=30) == 0
    # The echo prefixes each chunk it read; stripped of the prefixes, the reply is the payload unchanged.
    assert bytes(received).replace(b"ok:", b"") == payload.replace(b"ok:", b"")
    ((name,),) = [os.listdir(tmp_path)]
    counted = json.loads((tmp_path / name).read_text())
    assert counted == {"host": "127.0.0.1", "port": port, "sent": len(payload), "received": len(received)}
    assert ssh_meter.totals(str(tmp_path)) == {"sent": len(payload), "received": len(received), "connections": 1}


def test_without_a_meter_directory_it_relays_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("INSTINCT_SSH_METER_DIR", raising=False)
    port = echo_server(b"")
    proc = subprocess.run(  # noqa: S603
        [sys.executable, METER, "127.0.0.1", str(port)],
        input=b"hello",
        capture_output=True,
        cwd=tmp_path,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == b"hello"
    assert os.listdir(tmp_path) == []


def test_totals_add_up_the_connections_and_skip_what_is_not_a_meter_file(tmp_path):
    (tmp_path / "1.json").write_text(json.dumps({"host": "a", "port": 22, "sent": 10, "received": 5}))
    (tmp_path / "2.json").write_text(json.dumps({"host": "b", "port": 22, "sent": 1, "received": 2}))
    (tmp_path / "3.json.tmp").write_text("partial")
    assert ssh_meter.totals(str(tmp_path)) == {"sent": 11, "received": 7, "connections": 2}
    assert ssh_meter.totals(str(tmp_path / "absent")) == {"sent": 0, "received": 0, "connections": 0}


def test_a_hangup_from_ssh_still_saves_the_last_totals(tmp_path):
    # ssh sends its ProxyCommand SIGHUP as it exits; the bytes relayed since the last idle save must not be lost.
    port = echo_server(b"")
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, METER, "127.0.0.1", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, INSTINCT_SSH_METER_DIR=str(tmp_path)),
    )
    proc.stdin.write(b"x" * 1000)
    proc.stdin.flush()
    assert proc.stdout.read(1000) == b"x" * 1000
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=30) == 0
    assert ssh_meter.totals(str(tmp_path)) == {"sent": 1000, "received": 1000, "connections": 1}
