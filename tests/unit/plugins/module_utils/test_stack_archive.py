"""module_utils/stack_archive.py: the build host assembles, checks and packs a stack once; a host downloads, checks,
unpacks and publishes it by one rename. tar and zstd run for real; pip and the virtualenv are stood in for by a runner
that lays out a stack whose python prints what the check asks."""

import functools
import hashlib
import http.server
import json
import os
import subprocess
import threading

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import stack_archive

KEY = "0123456789abcdef"
GOOD = {
    "torch": "2.9.0a0+rocm7.0.2",
    "hip": "7.0.2",
    "gpu": False,
    "triton": "3.5.0",
    "vllm": "0.11.1",
    "platform": "rocm",
    "amdsmi": "26.0.0",
    "torchvision": "0.24.0",
    "torchvision_hip_ops": True,
}


def fake_python(path, found):
    """An interpreter that answers the stack's check with found."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\necho '%s'\n" % json.dumps(found))
    os.chmod(path, 0o755)  # noqa: S103 - an executable of the test's own


class Runner:
    """subprocess.run for tar, zstd and sync; a virtualenv and pip stood in for; every argv recorded."""

    def __init__(self, found=None, pip_fails=False):
        self.found = GOOD if found is None else found
        self.pip_fails = pip_fails
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        if argv[1:3] == ["-m", "venv"]:
            fake_python(os.path.join(argv[3], "bin", "python"), self.found)
            return subprocess.CompletedProcess(argv, 0, "")
        if argv[1:4] == ["-m", "pip", "install"]:
            if self.pip_fails:
                return subprocess.CompletedProcess(argv, 1, "ERROR: Could not connect to 10.9.8.7 (the mirror)\n")
            site = os.path.join(os.path.dirname(os.path.dirname(argv[0])), "lib", "site-packages")
            os.makedirs(site, exist_ok=True)
            with open(os.path.join(site, "installed-%d.txt" % len(self.calls)), "w") as handle:
                handle.write(" ".join(argv))
            return subprocess.CompletedProcess(argv, 0, "Successfully installed\n")
        return subprocess.run(argv, check=kwargs.pop("check", False), **kwargs)  # noqa: S603 - tar, zstd and sync with the module's own arguments

    def named(self, word):
        return [call for call in self.calls if word in " ".join(call)]


@pytest.fixture
def build_host(tmp_path):
    lock = tmp_path / "locks" / KEY / "stack-lock.txt"
    lock.parent.mkdir(parents=True)
    lock.write_text("torch==2.9.0 --hash=sha256:%s\n" % ("0" * 64))
    amdsmi = tmp_path / "rocm" / "share" / "amd_smi"
    (amdsmi / "amdsmi").mkdir(parents=True)
    (amdsmi / "pyproject.toml").write_text("[project]\nname = 'amdsmi'\n")
    return {
        "stacks_dir": str(tmp_path / "opt" / "stacks"),
        "archive_dir": str(tmp_path / "store" / "stacks"),
        "lock_file": str(lock),
        "amdsmi_src": str(amdsmi),
    }


def build(build_host, runner, **kwargs):
    return stack_archive.build(
        build_host["stacks_dir"],
        KEY,
        build_host["archive_dir"],
        build_host["lock_file"],
        pip_args=["--no-index", "--find-links=/cache/wheels/torch/k"],
        amdsmi_src=build_host["amdsmi_src"],
        runner=runner,
        **kwargs,
    )


def members(path):
    argv = ["tar", "--list", "--zstd", "--file", path]
    listing = subprocess.run(argv, capture_output=True, text=True, check=True)  # noqa: S603,S607 - tar from PATH
    return listing.stdout.split()


def test_the_build_host_assembles_checks_and_packs_the_stack_once(build_host):
    runner = Runner()
    result = build(build_host, runner, compile_bytecode=False)
    archive = result["archive"]
    assert result["changed"] and result["assembled"] and result["check"] == GOOD
    assert archive["sha256"] == stack_archive.sha256_file(archive["path"])
    assert archive["file"] == "%s-%s.tar.zst" % (KEY, archive["sha256"][:16])
    assert archive["size"] == os.path.getsize(archive["path"])
    with open(os.path.join(build_host["archive_dir"], KEY + ".json")) as handle:
        assert json.load(handle) == {key: archive[key] for key in ("key", "file", "sha256", "size")}
    # Exactly the lock, each file by its hash, no bytecode when asked; amdsmi from a copy that is gone after.
    (closure,) = runner.named("--require-hashes")
    assert closure[-2:] == ["-r", os.path.join(build_host["stacks_dir"], KEY, "stack-lock.txt")]
    assert {"--no-deps", "--only-binary=:all:", "--no-compile", "--find-links=/cache/wheels/torch/k"} <= set(closure)
    (amdsmi,) = runner.named(".amd_smi")
    assert amdsmi[-1] == os.path.join(build_host["stacks_dir"], KEY, ".amd_smi")
    names = members(archive["path"])
    assert "./venv/bin/python" in names and "./stack-lock.txt" in names
    assert not [name for name in names if name.startswith(("./.verified", "./.assembled", "./.amd_smi"))], names
    # The host's own mark: it takes this stack in place instead of downloading it.
    with open(os.path.join(build_host["stacks_dir"], KEY, ".assembled")) as handle:
        assert json.load(handle)["sha256"] == archive["sha256"]
    assert not [name for name in os.listdir(build_host["archive_dir"]) if name.startswith(".")]


def test_a_published_archive_is_not_made_again(build_host):
    first = build(build_host, Runner())
    runner = Runner()
    again = build(build_host, runner)
    assert not again["changed"] and again["archive"] == first["archive"] and runner.calls == []


def test_a_stack_this_host_verified_is_packed_as_it_is_without_its_record(build_host):
    stack = os.path.join(build_host["stacks_dir"], KEY)
    fake_python(os.path.join(stack, "venv", "bin", "python"), GOOD)
    with open(os.path.join(stack, ".verified"), "w") as handle:
        handle.write("{}")
    runner = Runner()
    result = build(build_host, runner)
    assert result["changed"] and not result["assembled"]
    assert not [call for call in runner.calls if call[1:3] == ["-m", "venv"] or "pip" in call]
    assert "./.verified" not in members(result["archive"]["path"])
    assert not os.path.exists(os.path.join(stack, ".assembled"))


def test_a_build_host_that_alone_needs_the_stack_takes_it_in_place_and_packs_nothing(build_host):
    runner = Runner()
    result = build(build_host, runner, pack_archive=False)
    assert result["changed"] and result["assembled"] and result["archive"] is None
    assert not runner.named("tar") and not os.path.exists(build_host["archive_dir"])
    stack = os.path.join(build_host["stacks_dir"], KEY)
    with open(os.path.join(stack, ".assembled")) as handle:
        assert json.load(handle) == {"sha256": "", "file": ""}
    # Taken in place with no archive; nothing is asked of a store.
    taken = stack_archive.install("http://127.0.0.1:9/stacks/", "", build_host["stacks_dir"], KEY)
    assert taken == {"changed": False, "source": "assembled", "downloaded": 0, "path": stack}
    # The next run changes nothing.
    runner = Runner()
    again = build(build_host, runner, pack_archive=False)
    assert not again["changed"] and again["archive"] is None and runner.calls == []


def test_a_later_run_that_needs_the_archive_packs_the_assembly_as_it_is(build_host):
    build(build_host, Runner(), pack_archive=False)
    runner = Runner()
    result = build(build_host, runner)
    assert result["changed"] and not result["assembled"] and not runner.named("pip")
    archive = result["archive"]
    assert "./.assembled" not in members(archive["path"])
    # The mark now names the archive, so the build host still takes its stack in place.
    with open(os.path.join(build_host["stacks_dir"], KEY, ".assembled")) as handle:
        assert json.load(handle) == {"sha256": archive["sha256"], "file": archive["file"]}


def test_a_host_with_no_archive_to_pull_and_no_assembly_is_refused(tmp_path):
    with pytest.raises(stack_archive.ArchiveError) as error:
        stack_archive.install("http://127.0.0.1:9/stacks/", "", str(tmp_path / "stacks"), KEY)
    assert "no archive of the stack %s was published" % KEY in str(error.value)
    assert not (tmp_path / "stacks").exists()


def test_an_interrupted_assembly_is_made_anew(build_host):
    stack = os.path.join(build_host["stacks_dir"], KEY)
    os.makedirs(os.path.join(stack, "venv", "half"))
    result = build(build_host, Runner())
    assert result["assembled"] and not os.path.exists(os.path.join(stack, "venv", "half"))


def test_a_stack_that_is_no_rocm_build_is_not_published(build_host):
    wrong = dict(GOOD, hip=None, torchvision_hip_ops=False, platform="unspecified")
    with pytest.raises(stack_archive.ArchiveError) as error:
        build(build_host, Runner(found=wrong))
    message = str(error.value)
    assert "torch.version.hip is not set" in message and "torchvision has no HIP kernel" in message
    # The platform needs a loaded driver: not asked of a build host.
    assert "platform" not in message.split("(", maxsplit=1)[0] and "nothing was published" in message
    assert not os.path.exists(build_host["archive_dir"]) or os.listdir(build_host["archive_dir"]) == []


def test_a_failed_pip_names_the_step_and_its_output(build_host):
    with pytest.raises(stack_archive.ArchiveError) as error:
        build(build_host, Runner(pip_fails=True))
    assert "installing the locked closure failed" in str(error.value) and "10.9.8.7" in str(error.value)
    assert stack_archive.read_published(build_host["archive_dir"], KEY) is None


def test_rocm_without_amdsmi_is_refused(build_host, tmp_path):
    with pytest.raises(stack_archive.ArchiveError) as error:
        build(dict(build_host, amdsmi_src=str(tmp_path / "none")), Runner())
    assert "Failed to infer device type" in str(error.value)


def test_check_mode_assembles_nothing(build_host):
    runner = Runner()
    result = build(build_host, runner, check_mode=True)
    assert result["changed"] and runner.calls == [] and not os.path.exists(build_host["stacks_dir"])


@pytest.fixture
def store(build_host):
    """The build host's archive served over HTTP, as the artifact store serves stacks/; requests counted."""
    archive = build(build_host, Runner())["archive"]
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=build_host["archive_dir"])
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {
        "url": "http://127.0.0.1:%d/%s" % (server.server_address[1], archive["file"]),
        "archive": archive,
        "requests": requests,
    }
    server.shutdown()


def test_a_host_downloads_checks_unpacks_and_publishes_by_one_rename(store, tmp_path):
    stacks = str(tmp_path / "host" / "stacks")
    result = stack_archive.install(store["url"], store["archive"]["sha256"], stacks, KEY)
    assert result["changed"] and result["source"] == "archive"
    assert result["downloaded"] == store["archive"]["size"]
    assert os.listdir(stacks) == [KEY]  # no hidden archive or staging directory left
    assert os.access(os.path.join(stacks, KEY, "venv", "bin", "python"), os.X_OK)
    assert not os.path.exists(os.path.join(stacks, KEY, ".assembled"))
    found = stack_archive.check_stack(os.path.join(stacks, KEY))
    stack_archive.record(os.path.join(stacks, KEY), found, {"key": KEY})
    # With its record the host downloads nothing again.
    again = stack_archive.install(store["url"], store["archive"]["sha256"], stacks, KEY)
    assert again == {"changed": False, "source": "verified", "downloaded": 0, "path": os.path.join(stacks, KEY)}
    assert len(store["requests"]) == 1


def test_a_damaged_archive_is_refused_before_anything_is_unpacked(store, tmp_path):
    with open(store["archive"]["path"], "r+b") as handle:
        handle.seek(store["archive"]["size"] // 2)
        handle.write(b"\0" * 16)
    stacks = tmp_path / "host" / "stacks"
    with pytest.raises(stack_archive.ArchiveError) as error:
        stack_archive.install(store["url"], store["archive"]["sha256"], str(stacks), KEY)
    message = str(error.value)
    assert store["url"] in message and store["archive"]["sha256"] in message
    assert "damaged or was changed" in message and "Remove it from the build host's store and rerun" in message
    assert os.listdir(str(stacks)) == []


def test_the_build_host_takes_the_stack_it_assembled_without_downloading(build_host, store):
    result = stack_archive.install(store["url"], store["archive"]["sha256"], build_host["stacks_dir"], KEY)
    assert result["source"] == "assembled" and not result["changed"] and store["requests"] == []


def test_a_stack_left_without_a_record_is_replaced(store, tmp_path):
    stack = tmp_path / "stacks" / KEY
    (stack / "venv" / "stale").mkdir(parents=True)
    # An assembly mark of another archive does not count either.
    (stack / ".assembled").write_text(json.dumps({"sha256": "f" * 64}))
    stack_archive.install(store["url"], store["archive"]["sha256"], str(tmp_path / "stacks"), KEY)
    assert not (stack / "venv" / "stale").exists() and (stack / "venv" / "bin" / "python").exists()


def test_check_mode_downloads_nothing(store, tmp_path):
    result = stack_archive.install(store["url"], "0" * 64, str(tmp_path / "s"), KEY, check_mode=True)
    assert result["changed"] and store["requests"] == [] and not (tmp_path / "s").exists()


def test_an_unreachable_store_is_named(tmp_path):
    with pytest.raises(stack_archive.ArchiveError) as error:
        stack_archive.install("http://127.0.0.1:9/stacks/x.tar.zst", "0" * 64, str(tmp_path), KEY)
    assert "downloading http://127.0.0.1:9/stacks/x.tar.zst failed" in str(error.value)
    assert os.listdir(str(tmp_path)) == []


def test_problems_ask_the_platform_and_the_gpu_only_where_told():
    assert stack_archive.problems(GOOD) == []
    assert stack_archive.problems(dict(GOOD, platform="unspecified"), platform=False) == []
    assert "not rocm" in stack_archive.problems(dict(GOOD, platform="unspecified"))[0]
    assert "torch.cuda.is_available() is false" in stack_archive.problems(GOOD, gpu=True)[0]


def test_the_record_holds_the_check_and_the_data(tmp_path):
    content = stack_archive.record(str(tmp_path), GOOD, {"key": KEY, "archive": {"sha256": "a" * 64}})
    assert json.loads((tmp_path / ".verified").read_text()) == content
    assert content["platform"] == "rocm" and content["key"] == KEY


def test_the_archive_name_is_content_addressed():
    digest = hashlib.sha256(b"x").hexdigest()
    assert stack_archive.archive_name(KEY, digest) == "%s-%s.tar.zst" % (KEY, digest[:16])


def test_the_check_code_is_python_that_compiles():
    compile(stack_archive.CHECK_CODE, "check", "exec")
