"""Faults injected on purpose into rollouts of the converged air-gapped machine, run from the controller as an operator
would. After each fault: what the machine serves, that nothing partial was published or switched to; after each group
of faults, a rerun converges (changed > 0, then changed = 0). The file runs after test_rollout_cli.py, which needs the
machine as converge left it (see 3).

Build faults (a new torch build: a torch flag only this test sets gives a new key; --tags pytorch):
1. The compile step is held (the fixture build's hold file), a second rollout against the machine is refused by the
   rollout lock, ansible-playbook is killed with its whole session (SIGKILL), then the orphaned build itself is killed
   (SIGKILL, as the out-of-memory killer would): nothing is published, the machine still serves its stack.
2. The staging directory is a 256 KiB tmpfs: the build fails naming the full filesystem; nothing is published.
   The rerun takes over the dead run's lock, builds and publishes; the next changes nothing.

Stack faults (the build play, --tags build, with that torch: a new stack installed beside the one in service):
3. The machine loses power (SIGKILL to its init: no shutdown) while the stack installs, and boots again: it serves the
   stack it served before, from its enabled unit; the new stack has no .verified record. The machine shares this
   machine's kernel, so its boot is a new boot without the amdgpu module, which the rocm role rightly reports as a
   driver that did not load after a reboot: from here on the runs skip the rocm role (the default scenario's qemu
   guest proves the driver's reboot path on a kernel of its own).
4. The mirror goes away while pip installs the stack; then, with the mirror still away, a run of the rocm role (apt:
   its repository check comes before the driver check) and one of the pytorch role (git): each fails naming the
   mirror, and the machine serves its stack throughout.
5. With the mirror back, the whole rollout installs and switches to the new stack and prunes an older verified one
   (vllm_stack_keep 0: the current and the previous stay); the next changes nothing.
"""

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests import harness
from tests.harness.playbook_runner import changed, failures, finish, kill, playbook_json, start_playbook

MACHINE = "instinct-airgapped"
UNIT = "vllm-fixture.service"
STACK_ROOT = "/opt/instinct-stack"
TORCH_CACHE = "/var/cache/instinct-stack/wheels/pytorch"
STAGING = "/var/lib/instinct-stack/build"
HOLD_FILE = "/run/instinct-fixture/hold-build"  # the fixture torch build's hold (its setup.py)
NEW_TORCH = ["-e", json.dumps({"pytorch_cmake_args": "-DINSTINCT_FAULT_TEST=ON", "vllm_stack_pip_compile": False})]
# After the power cut (3): the machine's new boot has no amdgpu module (it shares this machine's kernel).
NO_DRIVER = ["--skip-tags", "rocm"]
EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")


def instance():
    with open(os.environ["MOLECULE_INSTANCE_CONFIG"]) as handle:
        return yaml.safe_load(handle)[0]


def mirror_address():
    """The bridge's address, where the machine reaches its mirror: the failures name it."""
    return json.loads(Path(EPHEMERAL, "airgap-mirror.json").read_text())["guest_url"].split("//")[1].split(":")[0]


def ssh(command, check=True, timeout=60):
    """A root command on the machine over plain ssh: fast enough to poll a running rollout."""
    config = instance()
    argv = [
        "ssh",
        "-i",
        config["identity_file"],
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
    ]
    argv += ["-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5"]
    # ssh joins its arguments into one remote command line: the command is one quoted word of it.
    argv += ["%s@%s" % (config["user"], config["address"]), "sudo -n sh -c " + shlex.quote(command)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    if check:
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
    return proc.stdout.strip()


def wait_for(what, probe, timeout=300, every=0.3, rollout=None):
    """probe()'s first true value; fails after timeout, or as soon as the rollout it waits on has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        if rollout is not None and rollout.poll() is not None:
            code, result = finish(rollout)
            pytest.fail("the rollout ended (%d) before %s: %s" % (code, what, failures(result, MACHINE)))
        time.sleep(every)
    pytest.fail("gave up waiting for %s after %d s" % (what, timeout))


def serving():
    """The stack the machine serves: its current link, the service's invocation and /health."""
    return {
        "current": ssh("readlink -f %s/current" % STACK_ROOT),
        "active": ssh("systemctl is-active %s" % UNIT, check=False),
        "health": ssh("curl -s -o /dev/null -w '%{http_code}' -m 5 http://127.0.0.1:8000/health", check=False),
    }


def torch_builds():
    return set(ssh("ls -A %s" % TORCH_CACHE).split())


def unverified_stacks():
    """Stack directories without their .verified record, each with its inode (a new install makes a new one)."""
    listing = ssh(
        "cd %s/stacks && for d in */; do [ -e $d.verified ] || stat -c '%%n %%i' ${d%%/}; done" % STACK_ROOT,
        check=False,
    )
    return dict(line.split() for line in listing.splitlines())


def mirror(action):
    """Stop (unserve) or start (serve) the air-gapped mirror that the machine reaches on the bridge's address."""
    named = ["--workdir", EPHEMERAL, "--name", "airgap-mirror"]
    if action == "serve":
        served = json.loads(Path(EPHEMERAL, "airgap-mirror.json").read_text())
        where = ["--bind", mirror_address(), "--port", str(served["port"])]
        argv = harness.argv("vmctl", "serve", str(Path(EPHEMERAL, "airgap-mirror")), *named, *where)
    else:
        argv = harness.argv("vmctl", action, *named)
    subprocess.run(argv, check=True, capture_output=True, env=harness.env())  # noqa: S603


def nspawn(action):
    argv = harness.argv("nspawnctl", action, MACHINE, "--workdir", EPHEMERAL)
    argv += ["--bridge", "im-" + os.environ["MOLECULE_SCENARIO_NAME"][:12]]
    env = harness.env()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)  # noqa: S603
    assert proc.returncode == 0, proc.stderr


def failed_messages(result):
    return " ".join("%s: %s" % failure for failure in failures(result, MACHINE))


@pytest.fixture(scope="module")
def before():
    state = serving()
    assert state["active"] == "active" and state["health"] == "200", state
    return dict(state, torch=torch_builds())


def test_a_killed_build_and_a_killed_ansible_playbook_leave_the_stack_serving(before):
    ssh("mkdir -p %s && touch %s" % (os.path.dirname(HOLD_FILE), HOLD_FILE))
    first = start_playbook("site.yml", "--tags", "pytorch", *NEW_TORCH)
    try:
        held = wait_for(
            "the torch build to reach its held compile step",
            # The held process itself, not only its log: an earlier attempt's log may say the same.
            lambda: ssh(
                "pgrep -f '[s]etup.py bdist_wheel' >/dev/null && grep -l 'compile step is held' %s/pytorch-*/build.log"
                % STAGING,
                check=False,
            ),
            rollout=first,
        )
        # A second rollout while the first runs: the lock refuses it before it touches anything.
        code, second = playbook_json("site.yml", "--tags", "pytorch", *NEW_TORCH, timeout=300)
        assert code != 0
        refusal = failed_messages(second)
        assert "Take the rollout lock: %s is being rolled out by" % MACHINE in refusal, refusal
        assert "(ansible-playbook pid %d, playbook site.yml" % first.pid in refusal, refusal
        assert "compile step is held" in ssh("tail -n 3 %s" % held)
    finally:
        kill(first)
    # The build runs on as an orphaned async job; killed in its turn, as the out-of-memory killer would.
    # (A bracket in each pattern keeps pgrep from matching the shell that runs it.)
    assert ssh("pgrep -f '[s]etup.py bdist_wheel'", check=False), "the async build died with ansible-playbook"
    ssh("pkill -KILL -f '[s]etup.py bdist_wheel'")
    wait_for("the build job to end", lambda: not ssh("pgrep -f '[A]nsiballZ_wheel_build'", check=False), timeout=60)
    ssh("rm -f %s" % HOLD_FILE)
    # Nothing published, the staging copy and its log kept, the machine serves its stack, not restarted.
    assert torch_builds() == before["torch"]
    assert "compile step is held" in ssh("cat %s" % held)
    assert serving() == {key: before[key] for key in ("current", "active", "health")}
    # The killed run's lock stays behind, naming its dead ansible-playbook.
    assert ssh("test -e /var/lib/instinct-stack/rollout.lock && echo held", check=False) == "held"


def test_a_full_staging_directory_fails_the_build_and_a_rerun_converges(before):
    ssh("mount -t tmpfs -o size=256k instinct-fault-tmpfs %s" % STAGING)
    try:
        code, result = playbook_json("site.yml", "--tags", "pytorch", *NEW_TORCH)
    finally:
        ssh("umount %s" % STAGING)
    assert code != 0
    message = failed_messages(result)
    assert "The filesystem of %s is full" % STAGING in message and "build_staging_dir" in message, message
    assert torch_builds() == before["torch"]
    assert serving() == {key: before[key] for key in ("current", "active", "health")}
    # The rerun takes over the lock of the killed run (same controller, its ansible-playbook gone) and builds.
    code, result = playbook_json("site.yml", "--tags", "pytorch", *NEW_TORCH)
    assert code == 0, failures(result, MACHINE)
    assert changed(result, MACHINE) > 0
    assert len(torch_builds() - before["torch"]) == 1
    code, result = playbook_json("site.yml", "--tags", "pytorch", *NEW_TORCH)
    assert code == 0 and changed(result, MACHINE) == 0, failures(result, MACHINE)
    assert ssh("test -e /var/lib/instinct-stack/rollout.lock && echo held", check=False) == ""


def test_a_power_cut_during_the_stack_install_leaves_the_old_stack_serving(before):
    # The build play alone (--tags build) builds, installs and verifies the stack beside the one in service.
    rollout = start_playbook("site.yml", "--tags", "build", *NEW_TORCH)
    try:
        wait_for("the new stack's install", lambda: any(unverified_stacks()), timeout=600, rollout=rollout)
        nspawn("poweroff")
    finally:
        code, result = finish(rollout)
    assert code != 0 and result["stats"][MACHINE]["unreachable"] > 0
    nspawn("boot")
    # systemd starts the enabled service from the current link: the stack served before the cut.
    wait_for("the service's /health after the boot", lambda: serving()["health"] == "200", timeout=300, every=1)
    assert serving()["current"] == before["current"]
    assert len(unverified_stacks()) == 1


def test_the_mirror_going_away_fails_pip_apt_and_git_and_the_stack_keeps_serving(before):
    (left,) = unverified_stacks().values()
    rollout = start_playbook("site.yml", "--tags", "build", *NEW_TORCH)
    try:
        # The run removes what the power cut left and installs the stack afresh: the mirror goes away then.
        wait_for(
            "the new stack's install",
            lambda: unverified_stacks() and left not in unverified_stacks().values(),
            timeout=600,
            rollout=rollout,
        )
        mirror("unserve")
    finally:
        code, result = finish(rollout)
    try:
        assert code != 0
        message = failed_messages(result)
        assert "locked closure" in message or "stack's virtualenv" in message, message
        assert mirror_address() in message, message
        assert serving() == {key: before[key] for key in ("current", "active", "health")}
        for tags, task in (("rocm", "apt"), ("pytorch", "git")):
            code, result = playbook_json("site.yml", "--tags", tags, *NEW_TORCH)
            assert code != 0
            message = failed_messages(result)
            assert mirror_address() in message, (task, message)
            assert serving() == {key: before[key] for key in ("current", "active", "health")}
    finally:
        mirror("serve")
    assert len(unverified_stacks()) == 1


def test_with_the_mirror_back_the_rerun_switches_prunes_and_converges(before):
    # An older verified stack (a copy of the one in service, its record two days old), for the pruning after the
    # switch: with vllm_stack_keep 0 only the current and the previous stack stay.
    old = STACK_ROOT + "/stacks/instinct-fault-old"
    ssh("cp -a %s %s && touch -d '-2 days' %s/.verified" % (before["current"], old, old))
    keep_none = ["-e", '{"vllm_stack_keep": 0}']
    code, result = playbook_json("site.yml", *NEW_TORCH, *keep_none, *NO_DRIVER)
    assert code == 0, failures(result, MACHINE)
    assert changed(result, MACHINE) > 0
    after = serving()
    assert after["current"] != before["current"] and after["health"] == "200"
    assert unverified_stacks() == {}
    assert ssh("readlink -f %s/previous" % STACK_ROOT) == before["current"]
    assert ssh("ls %s/stacks" % STACK_ROOT).split() == sorted(
        os.path.basename(s) for s in (before["current"], after["current"])
    )
    code, result = playbook_json("site.yml", *NEW_TORCH, *keep_none, *NO_DRIVER)
    assert code == 0 and changed(result, MACHINE) == 0, failures(result, MACHINE)
