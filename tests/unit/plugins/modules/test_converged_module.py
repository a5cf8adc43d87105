"""instinct.stack.converged's module as Ansible runs it on the host: check, record, check mode, refusals."""

import json
import os
import stat

import pytest
from module_args import patch_module_args

from ansible_collections.instinct.stack.plugins.modules import converged as module

FINGERPRINT = "c" * 64


@pytest.fixture
def active():
    """The active units the stand-in systemctl lists; a test changes it."""
    return ["vllm-fixture.service"]


@pytest.fixture
def listed(active, monkeypatch):
    """The patterns systemctl was asked for, one list per call."""
    calls = []

    def unit_lister(_module):
        def list_units(patterns):
            calls.append(patterns)
            return list(active), None

        return list_units

    monkeypatch.setattr(module, "unit_lister", unit_lister)
    return calls


@pytest.fixture
def host(tmp_path, listed):
    """A stack under tmp_path with its current link, and a watched file."""
    for key in ("A", "B"):
        (tmp_path / "stack" / "stacks" / key).mkdir(parents=True)
        stack = {"key": key, "vllm": "0.11.0", "torch": "2.9.0", "lock": {"packages": {}}}
        (tmp_path / "stack" / "stacks" / key / ".verified").write_text(json.dumps(stack))
    (tmp_path / "stack" / "current").symlink_to(tmp_path / "stack" / "stacks" / "A")
    (tmp_path / "rocm.conf").write_text("/opt/rocm-7.0.2/lib\n")
    return tmp_path


def args(host, **extra):
    base = {
        "path": str(host / "state" / "converged.json"),
        "fingerprint": FINGERPRINT,
        "files": [str(host / "rocm.conf"), str(host / "stack" / "current" / ".verified")],
        "links": [str(host / "stack" / "previous")],
        "units": ["vllm-*.service"],
        "stack_root": str(host / "stack"),
    }
    base.update(extra)
    return base


def run_module(arguments, capsys):
    with patch_module_args(arguments), pytest.raises(SystemExit) as exit_info:
        module.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_record_then_check(host, listed, capsys):
    code, checked = run_module(args(host), capsys)
    assert code == 0 and not checked["changed"] and checked["converged"] is False
    assert checked["reasons"] == ["no record"] and checked["recorded_at"] is None
    assert not (host / "state").exists()  # a check writes nothing

    summary = {"gfx_arch": ["gfx942"], "reboot": None}
    code, recorded = run_module(args(host, state="record", summary=summary), capsys)
    assert code == 0 and recorded["changed"] and recorded["converged"] and recorded["reasons"] == ["no record"]
    path = host / "state" / "converged.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    record = json.loads(path.read_text())
    assert record["fingerprint"] == FINGERPRINT and record["units"] == ["vllm-fixture.service"]
    assert record["current"] == str(host / "stack" / "stacks" / "A") and record["summary"] == summary
    assert record["recorded_at"] == recorded["recorded_at"]
    assert listed[-1] == ["vllm-*.service"]

    code, checked = run_module(args(host), capsys)
    assert code == 0 and not checked["changed"] and checked["converged"] and checked["reasons"] == []
    assert checked["summary"] == summary and checked["recorded_at"] == record["recorded_at"]
    assert checked["stack"] == {"key": "A", "vllm": "0.11.0", "torch": "2.9.0"}  # without the lock
    assert checked["fingerprint"] == FINGERPRINT and checked["record"] == str(path)
    # No digest of a watched file reaches the output.
    assert record["files"][str(host / "rocm.conf")] not in json.dumps(checked)

    code, again = run_module(args(host, state="record", summary=summary), capsys)
    assert code == 0 and not again["changed"] and again["reasons"] == []
    assert again["recorded_at"] == record["recorded_at"] and json.loads(path.read_text()) == record


def test_a_changed_host(host, active, capsys):
    run_module(args(host, state="record"), capsys)
    (host / "rocm.conf").write_text("/opt/rocm-7.1.0/lib\n")
    active.clear()
    code, checked = run_module(args(host, fingerprint="d" * 64), capsys)
    assert code == 0 and not checked["changed"] and not checked["converged"]
    assert checked["reasons"] == [
        "the inputs changed",
        "%s changed" % (host / "rocm.conf"),
        "vllm-fixture.service is not active",
    ]
    assert "summary" not in checked and "stack" not in checked
    code, recorded = run_module(args(host, state="record", fingerprint="d" * 64), capsys)
    assert recorded["changed"] and recorded["reasons"] == checked["reasons"]


def test_check_mode_records_nothing(host, active, capsys):
    code, result = run_module(args(host, state="record", _ansible_check_mode=True), capsys)
    assert code == 0 and result["changed"] and not (host / "state").exists()
    run_module(args(host, state="record"), capsys)
    before = (host / "state" / "converged.json").read_text()
    active.clear()
    code, result = run_module(args(host, state="record", _ansible_check_mode=True), capsys)
    assert result["changed"] and (host / "state" / "converged.json").read_text() == before
    code, result = run_module(args(host, _ansible_check_mode=True), capsys)
    assert code == 0 and not result["changed"] and result["reasons"] == ["vllm-fixture.service is not active"]


def test_a_record_that_cannot_converge_warns(host, capsys, monkeypatch):
    # Where a warning goes depends on the process (the result on a host, Ansible's display where the controller's
    # code is loaded, as in this test run): the module's call is what counts.
    warnings = []
    monkeypatch.setattr(module.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))
    monkeypatch.setattr(module, "unit_lister", lambda _module: lambda patterns: (None, "Failed to connect to bus"))
    code, result = run_module(args(host, state="record"), capsys)
    assert code == 0 and result["changed"] and result["converged"] is False
    assert warnings == [
        "the record %s will not make this host converged: the units cannot be listed (Failed to connect to bus)"
        % (host / "state" / "converged.json")
    ]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"fingerprint": "abc"}, "fingerprint must be a sha256 in 64 lower-case hex digits"),
        ({"fingerprint": "C" * 64}, "fingerprint must be a sha256 in 64 lower-case hex digits"),
        ({"fingerprint": None}, "run the module through its action plugin"),
        ({"path": "state/converged.json"}, "path must be absolute, not state/converged.json"),
        ({"state": "present"}, "value of state must be one of: check, record, got: present"),
    ],
    ids=["short", "upper case", "none", "relative path", "state"],
)
def test_bad_arguments_are_refused(host, capsys, extra, message):
    code, result = run_module(args(host, **extra), capsys)
    assert code == 1 and result["failed"] and message in result["msg"]
    assert not (host / "state").exists()


def test_an_unwritable_record_fails_with_the_reason(host, capsys):
    blocker = host / "file"
    blocker.write_text("")
    code, result = run_module(args(host, state="record", path=str(blocker / "converged.json")), capsys)
    assert code == 1 and result["msg"].startswith("converged record %s: " % (blocker / "converged.json"))


def test_the_real_unit_lister_says_why_it_cannot_list(tmp_path, monkeypatch):
    """Without systemctl on the path; and with one that fails, as on a host not booted with systemd."""

    class Module:
        def __init__(self, systemctl, answer):
            self.systemctl, self.answer, self.calls = systemctl, answer, []

        def get_bin_path(self, name):
            return self.systemctl

        def run_command(self, argv, environ_update=None):
            self.calls.append(argv)
            return self.answer

    assert module.unit_lister(Module(None, None))(["vllm-*.service"]) == (None, "no systemctl")
    failing = Module("/bin/systemctl", (1, "", "System has not been booted with systemd as init system (PID 1).\n"))
    assert module.unit_lister(failing)(["vllm-*.service"]) == (
        None,
        "System has not been booted with systemd as init system (PID 1).",
    )
    answering = Module("/bin/systemctl", (0, "vllm-a.service loaded active running a\n", ""))
    assert module.unit_lister(answering)(["vllm-*.service", "store.service"]) == (["vllm-a.service"], None)
    assert answering.calls[0][:2] == ["/bin/systemctl", "list-units"]
    assert answering.calls[0][-3:] == ["--", "vllm-*.service", "store.service"]
    assert os.path.basename(answering.calls[0][0]) == "systemctl"
