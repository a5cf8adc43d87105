"""benchmarks/store_pull.py's parts that need no namespaces: the figures from the hosts' records, iperf3's rate, the
nginx configuration rendered from the vllm role's template (which nginx accepts, where nginx is installed), and one
host's client against Python's http.server, whose resumed pull takes the whole cut file again."""

import functools
import http.server
import io
import json
import os
import shutil
import subprocess
import threading

import pytest

from benchmarks import store_pull


def record(host, start, end, size):
    return {"host": host, "mode": "pull", "start": start, "end": end, "bytes": size}


def test_the_aggregate_runs_from_the_first_start_to_the_last_end():
    records = [record("h1", 100.0, 104.0, 400 * store_pull.MB), record("h2", 101.0, 110.0, 400 * store_pull.MB)]
    figure = store_pull.summary(records, 800 * store_pull.MB)
    assert figure["wall_s"] == 10.0 and figure["aggregate_MBps"] == 80.0 and figure["complete"]
    assert figure["host_MBps"] == {"min": 44.4, "median": 72.2, "max": 100.0}
    assert figure["host_s"] == {"min": 4.0, "median": 6.5, "max": 9.0}
    assert not store_pull.summary(records[:1], 800 * store_pull.MB)["complete"]


def test_the_line_rate_is_what_iperf3s_receiver_saw():
    report = {"end": {"sum_received": {"bits_per_second": 8.0e9}, "sum_sent": {"bits_per_second": 9.0e9}}}
    assert store_pull.iperf_rate(report) == 1000.0


def test_the_nginx_configuration_is_the_roles_template_rendered(tmp_path):
    text = store_pull.render_config(str(tmp_path / "store"), "10.236.0.2", 8070)
    assert "listen 10.236.0.2:8070;" in text and "root %s;" % (tmp_path / "store") in text
    for directive in ("sendfile on;", "tcp_nopush on;", "autoindex on;", "limit_except GET", "daemon off;"):
        assert directive in text
    assert "listen [fd00::2]:8070;" in store_pull.render_config("/srv", "fd00::2", 8070)


@pytest.mark.skipif(not os.path.exists("/usr/sbin/nginx"), reason="nginx is not installed here")
def test_nginx_accepts_the_rendered_configuration(tmp_path):
    config = tmp_path / "nginx.conf"
    config.write_text(store_pull.render_config(str(tmp_path), "127.0.0.1", 8070))
    prefix = tmp_path / "run"
    prefix.mkdir()
    checked = subprocess.run(
        ["/usr/sbin/nginx", "-t", "-e", "stderr", "-p", "%s/" % prefix, "-c", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_commands_are_the_units_in_the_stores_namespace():
    before = store_pull.server_argv("http.server", "/w/store", 8070, "/w/run", "/w/nginx.conf")
    assert before[:4] == ["ip", "netns", "exec", store_pull.STORE_NAMESPACE]
    assert before[4:] == ["/usr/bin/python3", "-m", "http.server", "--bind", "10.236.0.2", "--directory", "/w/store",
                          "8070"]  # fmt: skip
    after = store_pull.server_argv("nginx", "/w/store", 8070, "/w/run", "/w/nginx.conf")
    assert after[4:] == ["/usr/sbin/nginx", "-e", "stderr", "-p", "/w/run/", "-c", "/w/nginx.conf"]


@pytest.fixture
def served_model(tmp_path):
    """A 1 MB model in the store layout, made as the benchmark makes it, served by Python's http.server."""
    store = tmp_path / "store"
    data = store_pull.make_model(str(store), 1, str(tmp_path))
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(store))
    )
    server.RequestHandlerClass.log_message = lambda *args: None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d/models" % server.server_address[1], store, data
    server.shutdown()
    shutil.rmtree(store)


def run_client(monkeypatch, capsys, *argv):
    monkeypatch.setattr("sys.stdin", io.StringIO("go\n"))
    assert store_pull.main(["client", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ready"
    return json.loads(lines[-1])


def test_a_host_downloads_every_file_of_the_manifest_into_nothing(served_model, tmp_path, monkeypatch, capsys):
    base, _store, data = served_model
    got = run_client(monkeypatch, capsys, "--mode", "download", "--base", base, "--root", str(tmp_path / "h"),
                     "--name", "h1")  # fmt: skip
    assert got["bytes"] == data["size"] == 1000 * 1000 + data["files"][0]["size"]
    assert not (tmp_path / "h").exists()


def test_a_resumed_pull_from_http_server_takes_the_whole_cut_file_again(served_model, tmp_path, monkeypatch, capsys):
    base, store, data = served_model
    got = run_client(monkeypatch, capsys, "--mode", "resume", "--base", base, "--root", str(tmp_path / "h"),
                     "--name", "h1", "--store-root", str(store / "models"))  # fmt: skip
    resume = store_pull.resume_summary(got)
    assert resume["range_request"] == "bytes=%d-" % (got["cut_file_size"] // 2)
    assert resume["status"] == 200 and resume["took_whole_file_again"]
    # The whole model came again: the cut file's first half too.
    assert got["bytes"] == resume["model_bytes"] == data["size"]
    assert (tmp_path / "h" / "bench--model" / (store_pull.REVISION + ".json")).is_file()


def test_the_table_states_each_figure_against_the_line_rate():
    figure = {
        "wall_s": 20.0,
        "aggregate_MBps": 500.0,
        "host_MBps": {"min": 30.0, "median": 35.0, "max": 40.0},
        "host_s": {"min": 15.0, "median": 17.5, "max": 20.0},
    }
    resume = {
        "range_request": "bytes=5-",
        "status": 206,
        "downloaded_bytes": 15,
        "model_bytes": 20,
        "held_bytes": 5,
        "took_whole_file_again": False,
    }
    servers = {server: {"pull": figure, "download": figure, "resume": resume} for server in store_pull.SERVERS}
    text = store_pull.table({"hosts": 16, "model_mb": 1024, "line_rate_MBps": 2000.0, "servers": servers})
    assert "bridge line rate (iperf3, one stream): 2000.0 MB/s" in text
    assert "nginx       download |    20.00      500.0      25% |        30.0 / 35.0 / 40.0 | 15.00" in text
    assert "resume, nginx: bytes=5- answered 206; the pull downloaded 15 bytes of the model's 20, 5 of them" in text
