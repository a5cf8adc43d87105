"""instinct.stack.stack_archive and instinct.stack.stack_install as Ansible runs them: a stack packed from a build
host's directory, served over a real HTTP server, installed, verified and recorded; a stack that does not verify and
a damaged archive fail saying what stays in service."""

import functools
import http.server
import json
import os
import threading

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.module_utils import stack_archive as archive_utils
from ansible_collections.instinct.stack.plugins.modules import stack_archive, stack_install

KEY = "fedcba9876543210"
FOUND = {"hip": "7.0.2", "platform": "rocm", "torchvision_hip_ops": True, "gpu": False, "vllm": "0.11.1"}


def run(module, args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    output = capsys.readouterr().out
    return exit_info.value.code, json.loads(output)


def verified_stack(stacks_dir, found):
    """A stack this build host verified already: stack_archive packs it without assembling it."""
    python = os.path.join(stacks_dir, KEY, "venv", "bin", "python")
    os.makedirs(os.path.dirname(python))
    with open(python, "w") as handle:
        handle.write("#!/bin/sh\necho '%s'\n" % json.dumps(found))
    os.chmod(python, 0o755)  # noqa: S103 - an executable of the test's own
    with open(os.path.join(stacks_dir, KEY, ".verified"), "w") as handle:
        handle.write("{}")


def publish(tmp_path, capsys, found=None):
    build_stacks = str(tmp_path / "build" / "stacks")
    verified_stack(build_stacks, FOUND if found is None else found)
    args = {
        "key": KEY,
        "stacks_dir": build_stacks,
        "archive_dir": str(tmp_path / "store"),
        "lock_file": str(tmp_path / "unused-lock.txt"),
    }
    return run(stack_archive, args, capsys)


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start():
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0),
            functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "store")),
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return "http://127.0.0.1:%d" % server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()


def install_args(tmp_path, url, archive, **extra):
    return dict(
        {
            "key": KEY,
            "stacks_dir": str(tmp_path / "host" / "stacks"),
            "url": "%s/%s" % (url, archive["file"]),
            "sha256": archive["sha256"],
            "host": "node2",
            "verify_gpu": False,
            "record": {"key": KEY, "arch": "gfx942"},
        },
        **extra,
    )


def test_a_stack_published_once_installs_verifies_and_records_then_reruns_unchanged(tmp_path, capsys, serve):
    code, published = publish(tmp_path, capsys)
    assert code == 0 and published["changed"] and not published["assembled"]
    code, again = run(
        stack_archive,
        {
            "key": KEY,
            "stacks_dir": str(tmp_path / "build" / "stacks"),
            "archive_dir": str(tmp_path / "store"),
            "lock_file": "/nonexistent",
        },
        capsys,
    )
    assert code == 0 and not again["changed"]
    url = serve()
    code, result = run(stack_install, install_args(tmp_path, url, published["archive"]), capsys)
    assert code == 0 and result["changed"] and result["source"] == "archive", result
    assert result["downloaded"] == published["archive"]["size"]
    record = json.loads((tmp_path / "host" / "stacks" / KEY / ".verified").read_text())
    assert record == result["record"] and record["platform"] == "rocm" and record["arch"] == "gfx942"
    code, rerun = run(stack_install, install_args(tmp_path, url, published["archive"]), capsys)
    assert code == 0 and not rerun["changed"] and rerun["source"] == "verified" and rerun["downloaded"] == 0
    assert rerun["record"] == record


def test_a_stack_that_does_not_verify_on_the_host_gets_no_record(tmp_path, capsys, serve):
    # The build host does not ask vLLM's platform (it needs a loaded driver); the inference host does.
    code, published = publish(tmp_path, capsys, found=dict(FOUND, platform="unspecified"))
    assert code == 0
    args = install_args(tmp_path, serve(), published["archive"], driver_note=": a reboot is pending")
    code, result = run(stack_install, args, capsys)
    assert code == 1 and result["failed"]
    assert result["msg"].startswith("The stack %s is not usable on node2" % KEY), result["msg"]
    assert "a reboot is pending" in result["msg"] and "The previous stack stays in service." in result["msg"]
    assert not (tmp_path / "host" / "stacks" / KEY / ".verified").exists()


def test_a_damaged_archive_fails_naming_it_and_the_stack_in_service_stays(tmp_path, capsys, serve):
    _code, published = publish(tmp_path, capsys)
    path = published["archive"]["path"]
    with open(path, "r+b") as handle:
        handle.seek(100)
        handle.write(b"damaged")
    code, result = run(stack_install, install_args(tmp_path, serve(), published["archive"]), capsys)
    assert code == 1
    assert published["archive"]["file"] in result["msg"] and "Remove it from the build host's store" in result["msg"]
    assert result["msg"].endswith("The stack in service stays.")
    assert os.listdir(str(tmp_path / "host" / "stacks")) == []


def test_check_mode_installs_nothing(tmp_path, capsys):
    args = {
        "key": KEY,
        "stacks_dir": str(tmp_path / "stacks"),
        "url": "http://127.0.0.1:9/x.tar.zst",
        "sha256": "0" * 64,
        "_ansible_check_mode": True,
    }
    code, result = run(stack_install, args, capsys)
    assert code == 0 and result["changed"] and not (tmp_path / "stacks").exists()
    code, result = run(
        stack_archive,
        {
            "key": KEY,
            "stacks_dir": str(tmp_path / "stacks"),
            "archive_dir": str(tmp_path / "store"),
            "lock_file": "/x",
            "_ansible_check_mode": True,
        },
        capsys,
    )
    assert code == 0 and result["changed"] and not (tmp_path / "store").exists()
    assert archive_utils.read_published(str(tmp_path / "store"), KEY) is None
