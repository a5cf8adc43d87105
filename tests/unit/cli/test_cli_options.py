"""The CLI's ansible-playbook controls, exit codes, run directory and the user's ansible.cfg, end to end through
ansible-runner on local-connection hosts (the demo inventory's captured MI300X and this machine)."""

import glob
import json
import os
import subprocess
import sys

import pytest

from instinct_stack import cli
from instinct_stack.cli import build_parser, main, playbook_args

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEMO = os.path.join(REPO, "inventories", "demo")
BIN = os.path.dirname(sys.executable)
VAULT_PASSWORD = "vault-canary-password-0f3a"  # noqa: S105 (a test canary)


def command_of(run_dir):
    """The ansible-playbook command line ansible-runner ran, from its artifacts."""
    (path,) = glob.glob(os.path.join(run_dir, "artifacts", "*", "command"))
    with open(path) as handle:
        return json.load(handle)["command"]


def parse(*argv):
    return build_parser().parse_args(list(argv))


def test_every_passthrough_flag_reaches_ansible_playbook(monkeypatch):
    answers = iter(["become-canary-1", "vault-canary-2"])
    monkeypatch.setattr(cli.getpass, "getpass", lambda prompt: next(answers))
    args = parse(
        "rollout", "-i", "inv", "-i", "more", "-e", "a=1", "--extra-vars", "@vars.yml", "-t", "rocm", "--tags",
        "vllm", "--skip-tags", "build", "-vvv", "--diff", "-f", "7", "-u", "ops", "--private-key", "key",
        "-K", "--ask-vault-pass", "--vault-password-file", "pw.txt", "--vault-id", "prod@prompt",
    )  # fmt: skip
    argv, passwords = playbook_args(args)
    assert argv == [
        "--extra-vars", "a=1", "--extra-vars", "@vars.yml", "--tags", "rocm,vllm", "--skip-tags", "build", "--diff",
        "-vvv", "--forks", "7", "--user", "ops", "--private-key", "key", "--vault-password-file", "pw.txt",
        "--vault-id", "prod@prompt", "--ask-become-pass", "--ask-vault-pass",
    ]  # fmt: skip
    assert args.inventory == ["inv", "more"]
    # The passwords are answers to ansible-playbook's prompts, never arguments.
    assert sorted(passwords.values()) == ["become-canary-1", "vault-canary-2"]
    assert not any("canary" in arg for arg in argv)


def test_verbosity_stops_at_four_and_forks_must_be_positive():
    assert playbook_args(parse("detect", "-i", "x", "-vvvvvv"))[0] == ["-vvvv"]
    assert main(["detect", "-i", DEMO, "-f", "0"]) == 2


@pytest.mark.parametrize("command", ["detect", "rollout", "status"])
def test_an_inventory_that_does_not_exist_is_bad_input(command, tmp_path, capsys):
    assert main([command, "-i", str(tmp_path / "cluster"), "--run-dir", str(tmp_path / "run")]) == 2
    assert "inventory %s does not exist" % (tmp_path / "cluster") in capsys.readouterr().err


def test_an_inventory_that_does_not_parse_is_bad_input(tmp_path, capsys):
    broken = tmp_path / "hosts.yml"
    broken.write_text("all:\n  hosts: [not, a, mapping\n")
    assert main(["rollout", "-i", str(broken), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "nothing ran" in err and "hosts.yml" in err


def test_a_limit_that_matches_nothing_is_bad_input(tmp_path, capsys):
    assert main(["rollout", "-i", DEMO, "--limit", "no-such-host", "--run-dir", str(tmp_path / "run")]) == 2
    assert "nothing ran" in capsys.readouterr().err


def test_extra_vars_from_a_file_verbosity_and_the_run_directory(tmp_path, capsys):
    extra = tmp_path / "extra.yml"
    extra.write_text("rocm_gfx_source: kfd\n")
    run_dir = tmp_path / "run"
    code = main(["detect", "-i", DEMO, "-l", "captured-mi300x", "-e", "@%s" % extra, "-vv", "--json",
                 "--run-dir", str(run_dir)])  # fmt: skip
    assert code == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["source_used"] == "kfd"
    command = command_of(str(run_dir))
    assert "@%s" % extra in command and "-vv" in command and command[command.index("--limit") + 1] == "captured-mi300x"
    # ansible-runner's artifacts stay for the user: the job events and the stdout.
    assert glob.glob(str(run_dir / "artifacts" / "*" / "job_events" / "*.json"))
    assert glob.glob(str(run_dir / "artifacts" / "*" / "stdout"))


def test_the_run_directory_defaults_to_a_new_private_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["detect", "-i", DEMO, "-l", "captured-mi300x"]) == 0
    (run_dir,) = glob.glob(str(tmp_path / "state" / "instinct-stack" / "runs" / "*-detect"))
    assert os.stat(run_dir).st_mode & 0o777 == 0o700
    assert "run directory: %s" % run_dir in capsys.readouterr().err


def vault_file(tmp_path, content):
    password_file = tmp_path / "vault-password"
    password_file.write_text(VAULT_PASSWORD + "\n")
    secret = tmp_path / "secret.yml"
    secret.write_text(content)
    subprocess.run(
        [os.path.join(BIN, "ansible-vault"), "encrypt", "--vault-password-file", str(password_file), str(secret)],
        check=True,
        capture_output=True,
    )
    return secret, password_file


def test_the_users_ansible_cfg_is_honoured(tmp_path, monkeypatch):
    # The vault-encrypted extra vars make this host fail detection (it has no GPU); only the user's ansible.cfg
    # names the vault password file, so decrypting them proves the CLI ran with that configuration.
    secret, password_file = vault_file(tmp_path, "rocm_require_gpu: true\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "ansible.cfg").write_text("[defaults]\nvault_password_file = %s\n" % password_file)
    monkeypatch.chdir(project)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    args = ["detect", "-i", DEMO, "-l", "this-machine", "-e", "@%s" % secret, "--run-dir"]
    assert main(args + [str(tmp_path / "run1")]) == 1  # decrypted: the host failed, as the secret asked
    (project / "ansible.cfg").write_text("[defaults]\n")
    assert main(args + [str(tmp_path / "run2")]) == 2  # no vault secret: ansible-playbook stops before any host


def run_cli(argv, stdin, tmp_path):
    # getpass reads the answers from stdin when there is no terminal, as in CI.
    return subprocess.run(
        [os.path.join(BIN, "instinct-stack"), *argv, "--run-dir", str(tmp_path / "run")],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=str(tmp_path),
    )


def test_ask_vault_pass_answers_ansible_playbooks_prompt(tmp_path):
    secret = vault_file(tmp_path, "rocm_gfx_source: kfd\n")[0]
    proc = run_cli(["detect", "-i", DEMO, "-l", "captured-mi300x", "-e", "@%s" % secret, "--ask-vault-pass"],
                   VAULT_PASSWORD + "\n", tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kfd" in proc.stdout
    artifacts = "".join(path.read_text(errors="replace") for path in (tmp_path / "run").rglob("*") if path.is_file())
    assert VAULT_PASSWORD not in artifacts + proc.stdout + proc.stderr


def test_ask_become_pass_answers_the_become_prompt(tmp_path):
    proc = run_cli(["status", "-i", DEMO, "-l", "this-machine", "-K"], "become-canary-7\n", tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # it ran: the prompt was answered
    assert "this-machine" in proc.stdout
    assert "--ask-become-pass" in command_of(str(tmp_path / "run"))
    assert "become-canary-7" not in proc.stdout + proc.stderr


def test_status_of_this_machine_and_the_captured_mi300x(tmp_path, capsys):
    code = main(["status", "-i", DEMO, "--json", "--run-dir", str(tmp_path / "run")])
    rows = {row["host"]: row for row in json.loads(capsys.readouterr().out)}
    # No ROCm, no stack and no vLLM service on either; the driver check changed nothing.
    for row in rows.values():
        assert row["rocm"] is None and row["stack"] is None and row["services"] == []
        assert row["driver"]["reboot_pending"] is False and row["error"] is None
    assert rows["captured-mi300x"]["gfx_arch"] == ["gfx942"]
    assert not os.path.exists("/var/lib/instinct-stack/amdgpu-driver.json")
    # Where systemd is not PID 1 (this build machine) the services cannot be read: the status says so, exit 1.
    booted = os.path.isdir("/run/systemd/system")
    assert code == (0 if booted else 1)
    assert (rows["this-machine"]["systemd_error"] is None) == booted


def test_record_keeps_the_run_in_ara(tmp_path, capsys):
    ara_dir = tmp_path / "ara"
    argv = ["detect", "-i", DEMO, "-l", "captured-mi300x", "--record", str(ara_dir), "--run-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    assert "recording the run with ARA in %s" % ara_dir in capsys.readouterr().err
    assert os.stat(ara_dir).st_mode & 0o777 == 0o700
    env = dict(os.environ, ARA_API_CLIENT="offline", ARA_BASE_DIR=str(ara_dir))
    listed = subprocess.run(
        [os.path.join(BIN, "ara"), "playbook", "list", "-f", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    (playbook,) = json.loads(listed.stdout)
    assert playbook["path"].endswith("playbooks/detect.yml") and playbook["status"] == "completed"
    hosts = subprocess.run(
        [os.path.join(BIN, "ara"), "host", "list", "-f", "json"], env=env, capture_output=True, text=True, check=True
    )
    assert [host["name"] for host in json.loads(hosts.stdout)] == ["captured-mi300x"]


def test_rollback_without_a_previous_stack_fails_the_host_and_says_so(tmp_path, capsys):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "inference_hosts:\n  hosts:\n    gpu1:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: %s\n      vllm_stack_root: %s\n      instinct_rollout_lock_path: %s\n"
        % (sys.executable, tmp_path / "stack", tmp_path / "rollout.lock")
    )
    code = main(["rollback", "-i", str(inventory), "--run-dir", str(tmp_path / "run"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["playbook"] == "playbooks/rollback.yml"
    (failure,) = report["hosts"]["gpu1"]["failures"]
    assert "no previous stack to roll back to" in failure["msg"]
    # Nothing matched: the demo inventory has no inference_hosts.
    assert main(["rollback", "-i", DEMO, "--run-dir", str(tmp_path / "run2")]) == 2
