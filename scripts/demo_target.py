"""scripts/run.sh's embedded default target: the real rollout on a throwaway local host.

    scripts/run.sh               # set up, roll out, ask the vLLM service, tear down
    scripts/run.sh --keep        # the same, but leave the host up (prints how to reach it)
    scripts/run.sh --teardown    # tear down a host that --keep left up
    scripts/run.sh ARGS...       # anything else: instinct-stack ARGS...

The host is a systemd-nspawn container booted from the molecule guest image (systemd as PID 1, sshd,
the ansible user with sudo) in a network namespace of its own on the bridge instdemo0 (10.236.0.0/24),
as benchmarks/scale.py starts its hosts (tests/harness: nspawnctl, fixture_hosts). The fixture
mirror is served on the bridge's address; `instinct-stack rollout` runs site.yml against the host with
its live progress, then this sends an OpenAI chat-completions request with the run's API key to the
vLLM service the rollout started, and prints the answer and the rollout report's summary. No AMD GPU is
here: the answer comes from the fixture vLLM, a small OpenAI-compatible server, not from a model.

The API key is new for every run; it reaches the roles only through a 0600 vars file in the work
directory (build/demo-target) and the request only through its Authorization header. SIGTERM, Ctrl-C
or a failure still stops the host and removes its overlay mount, namespace, veth, the bridge, the image
mount and the mirror server. Run as root (it re-runs itself through sudo otherwise).

scripts/run.sh runs it as a module from the checkout's root, `.venv/bin/python -m scripts.demo_target ARGS...`: it
imports the harness as tests.harness.
"""

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTINCT_STACK = os.path.join(os.path.dirname(sys.executable), "instinct-stack")
WORKDIR = os.path.join(ROOT, "build", "demo-target")
# tests.harness.nspawnctl (the machines) and tests.harness.fixture_hosts (image, mirror, inventory) are imported
# where needed: the arguments for instinct-stack go on without loading them.
# A bridge and network of its own: no molecule scenario (10.232-10.234) nor benchmark (10.231) uses them.
BRIDGE_NAME = "instdemo0"
BRIDGE_ADDRESS = "10.236.0.1"
HOST_INTERFACE = "10.236.0.11/24"
MACHINE = "instinct-demo"
RUN = "demo"  # the Ansible state directories' name under the work directory
# The model: the fixture Hub's repository (tests/harness/fixture_hub.py, served on the bridge like the mirror) at its
# main branch, which the rollout resolves to a commit, fetches, verifies and pulls; the service is asked for it by the
# repository's name.
MODEL_REPO = "instinct-fixtures/tiny-llama"
SERVICE = {"name": "demo", "model": {"repo": MODEL_REPO, "revision": "main"}, "port": 8000}
PROMPT = "Hello from scripts/run.sh: which stack and which model revision are serving this request?"
# What the first run builds, and how long it took on this project's 2-core machine (BENCHMARKS.md).
IMAGE_BUILD = (
    "the guest image %s, once: debootstrap of a minimal Debian 12: systemd, sshd, sudo, python3 "
    "(about 2.5 min here; later runs reuse it)"
)
MIRROR_BUILD = (
    "the fixture mirror, once for these fixtures: ROCm packages, the PyTorch, Triton and vLLM git repositories, "
    "the wheelhouse of vLLM's closure (about 30 s here with the wheels in pip's cache; downloading them, about "
    "600 MB, adds minutes the first time)"
)


class DemoError(Exception):
    """A step failed; the message says which and where its log is."""


def demo_mode(argv):
    """'run', 'keep' or 'teardown' for the demo's own arguments; None when argv is for instinct-stack."""
    if not argv:
        return "run"
    if argv == ["--keep"]:
        return "keep"
    if argv == ["--teardown"]:
        return "teardown"
    return None


def say(message):
    print("==> " + message, flush=True)


class Phases:
    """Wall time of each phase of the run, for the table at its end."""

    def __init__(self):
        self.rows = []

    @contextlib.contextmanager
    def __call__(self, name, what):
        say("%s: %s" % (name, what))
        started = time.monotonic()
        note = {"state": "ok"}
        try:
            yield note
        except (KeyboardInterrupt, SystemExit):
            note["state"] = "interrupted"
            raise
        except BaseException:
            note["state"] = "FAILED"
            raise
        finally:
            self.rows.append((name, time.monotonic() - started, note.get("detail", ""), note["state"]))

    def table(self):
        lines = ["%-10s %9s  %s" % ("phase", "wall [s]", "")]
        for name, seconds, detail, state in self.rows:
            lines.append("%-10s %9.1f  %s" % (name, seconds, ", ".join(part for part in (state, detail) if part)))
        lines.append("%-10s %9.1f" % ("total", sum(row[1] for row in self.rows)))
        return "\n".join(lines)


def write_inventory(directory, host, identity, mirror_url, api_key, hub_url):
    """The inventory directory the rollout reads: hosts.json with the host, the fixture mirror's variables and the
    fixture Hub's address, and group_vars/all/vllm_service.json, mode 0600, the only file that holds the API key.
    Returns the directory."""
    from tests.harness import fixture_hosts

    shutil.rmtree(directory, ignore_errors=True)
    secret_dir = os.path.join(directory, "group_vars", "all")
    os.makedirs(secret_dir, mode=0o700)
    variables = dict(fixture_hosts.fixture_vars(identity, mirror_url), models_hub_endpoint=hub_url)
    with open(os.path.join(directory, "hosts.json"), "w") as handle:
        json.dump(fixture_hosts.inventory([host], variables), handle, indent=2)
    # The service listens on the host's bridge address, where this machine sends the request.
    service = dict(SERVICE, host=host.address, api_key=api_key)
    write_private(os.path.join(secret_dir, "vllm_service.json"), json.dumps({"vllm_service_instances": [service]}))
    return directory


def write_private(path, content):
    """A new file that only its owner reads, from its creation on."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(content)


def chat_request(base_url, api_key, model, prompt):
    """The OpenAI chat-completions request, the key only in its Authorization header."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 128}
    return urllib.request.Request(  # noqa: S310 - an http:// URL this script builds
        base_url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + api_key, "Content-Type": "application/json"},
        method="POST",
    )


def ask(base_url, api_key, model, prompt, timeout=30):
    try:
        with urllib.request.urlopen(chat_request(base_url, api_key, model, prompt), timeout=timeout) as response:  # noqa: S310
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise DemoError("the service answered HTTP %d: %s" % (error.code, error.read()[:500])) from error
    except (OSError, ValueError) as error:
        raise DemoError("no answer from %s: %s" % (base_url, error)) from error


def status_without_key(base_url, timeout=10):
    """The HTTP status of an unauthenticated request (401 when the key is enforced)."""
    request = urllib.request.Request(base_url + "/v1/models")  # noqa: S310 - an http:// URL this script builds
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def format_answer(response, base_url, prompt):
    """What the service answered, and plainly where the answer comes from."""
    try:
        choice = response["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise DemoError("not a chat completion: %s" % json.dumps(response)[:500]) from error
    usage = response.get("usage") or {}
    lines = [
        "POST %s/v1/chat/completions (model %s, Bearer API key): %s" % (base_url, response.get("model"), prompt),
        "answer (%s, finish_reason %s, %s tokens):"
        % (choice["message"].get("role"), choice.get("finish_reason"), usage.get("total_tokens", "?")),
    ]
    lines += textwrap.wrap(content, 96, initial_indent="    ", subsequent_indent="    ")
    lines += textwrap.wrap(
        "No AMD GPU is here: the answer comes from the fixture vLLM, the small OpenAI-compatible server that "
        "the fixture mirror's vLLM source builds, after it checked the model directory the rollout fetched, "
        "verified and pulled as vLLM does (config.json, safetensors headers, tokenizer); no model ran. On a GPU "
        "server the same rollout builds upstream vLLM and the service answers from the model.",
        100,
    )
    return lines


def format_summary(report, report_path):
    """The rollout report, one line per host and its stack."""
    lines = [
        "rollout %s (ansible-playbook rc %s), report %s"
        % ("ok" if report.get("ok") else "FAILED", report.get("rc"), report_path)
    ]
    for host, entry in sorted((report.get("hosts") or {}).items()):
        stack = entry.get("stack") or {}
        reboot = entry.get("reboot") or {}
        parts = [
            "%d changed tasks" % entry.get("changed", 0),
            "gfx %s" % (",".join(entry.get("gfx_arch") or []) or "-"),
        ]
        for name, model in sorted((entry.get("models") or {}).items()):
            parts.append("vllm-%s serves %s" % (name, model))
        if stack:
            parts.append(
                "stack %s: torch %s (HIP %s), triton %s, torchvision %s, vllm %s, platform %s"
                % tuple(
                    stack.get(name, "-")
                    for name in ("arch", "torch", "hip", "triton", "torchvision", "vllm", "platform")
                )
            )
        parts.append("reboot pending: %s" % reboot["reason"] if reboot.get("pending") else "no reboot pending")
        lines.append("  %s: %s" % (host, "; ".join(parts)))
        if reboot.get("pending"):
            lines.append(
                "    (the demo host is a container on this machine's kernel: the fixture driver's module never loads "
                "there, and the services run without it)"
            )
        for failure in entry.get("failures") or []:
            lines.append("    FAILED %s: %s" % (failure.get("task"), failure.get("msg")))
    return lines


def demo_machine(workdir, lower="", public_key=""):
    from tests.harness.nspawnctl import Bridge, Machine

    return Machine(MACHINE, workdir, lower, HOST_INTERFACE, Bridge(BRIDGE_NAME, BRIDGE_ADDRESS + "/24"), public_key)


def leftovers(workdir):
    """What of a demo host is still on this machine: its process, mounts, namespace, bridge, mirror server."""
    machine = demo_machine(workdir)
    found = []
    if machine.running_pid() is not None:
        found.append("the host %s" % MACHINE)
    with open("/proc/self/mounts") as handle:
        found += ["the mount " + line.split()[1] for line in handle if line.split()[1].startswith(workdir + "/")]
    if os.path.exists("/run/netns/" + machine.netns):
        found.append("the network namespace " + machine.netns)
    if os.path.exists("/sys/class/net/" + BRIDGE_NAME):
        found.append("the bridge " + BRIDGE_NAME)
    if os.path.exists(os.path.join(workdir, "mirror.pid")):
        found.append("the mirror server")
    if os.path.exists(os.path.join(workdir, "hub.pid")):
        found.append("the fixture Hub")
    return found


def subreaper(on):
    """While on, orphans of what this script starts become its children, not init's: ansible-playbook's workers
    (each in a session of its own) when the rollout is cut short, ssh's connection masters. end_adopted() ends
    them. Only around the rollout: the mirror server, orphaned on purpose, stays init's (vmctl.py stops it)."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1 if on else 0, 0, 0, 0)


def own_children(live=False):
    """The ids of this process's children, from /proc; with live, not the ones that have exited (zombies)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and not (live and fields[0] == "Z"):
            children.append(int(entry))
    return children


def end_adopted(wait_s=10):
    """Ends every child still left (after teardown, only adopted orphans are), SIGTERM then SIGKILL; reaps them.
    Returns the ids that would not end."""
    pending = set(own_children())
    for number in (signal.SIGTERM, signal.SIGKILL):
        for pid in pending:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)
        deadline = time.monotonic() + wait_s
        while pending and time.monotonic() < deadline:
            for pid in list(pending):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                pending.discard(pid)
            time.sleep(0.1)
        if not pending:
            break
    return pending


def teardown(workdir, machine=None):
    """Stops the host and removes everything the demo made but the caches; quiet about what is gone already."""
    from tests.harness import fixture_hosts
    from tests.harness.nspawnctl import ImageMount

    machine = machine or demo_machine(workdir)
    fixture_hosts.close_ssh_masters(workdir, RUN)
    machine.stop()
    fixture_hosts.unserve_mirror(workdir)
    fixture_hosts.unserve_mirror(workdir, "hub")
    shutil.rmtree(os.path.join(workdir, "hub"), ignore_errors=True)
    ImageMount("", os.path.join(workdir, "image")).unmount()
    machine.bridge.down()
    # The key is worth nothing once the host is gone; remove it anyway.
    shutil.rmtree(os.path.join(workdir, "inventory"), ignore_errors=True)
    for name in ("auth.header", "id_ed25519", "id_ed25519.pub"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(workdir, name))


def run_quiet(argv, log_path, **kwargs):
    with open(log_path, "w") as log:
        result = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False, **kwargs)
    if result.returncode != 0:
        with open(log_path) as log:
            tail = log.read()[-2000:]
        raise DemoError(
            "%s failed (exit %d), see %s:\n%s" % (os.path.basename(argv[0]), result.returncode, log_path, tail)
        )


def run_cancellable(argv, stop_wait_s=30, **kwargs):
    """Runs argv to its end; when this script is stopped first, stops it with SIGTERM (ansible-runner's cancel,
    which ends ansible-playbook in its own session too) and SIGKILL only if that does not end it in time."""
    process = subprocess.Popen(argv, **kwargs)
    try:
        return process.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=stop_wait_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise


def roll_out(workdir, phases, keep):
    from tests.harness import fixture_hosts
    from tests.harness.nspawnctl import ImageMount

    def building_image(line):
        # build-image.sh: "building guest image KEY in DIR (...)"
        say("building " + IMAGE_BUILD % line.split()[3])

    with phases("image", "the guest image the host boots") as note:
        image_dir = fixture_hosts.guest_image(on_build=building_image)
        note["detail"] = image_dir
    with phases("mirror", "the fixture mirror the host installs from") as note:
        if fixture_hosts.mirror_cached(image_dir):
            note["detail"] = "cached"
        else:
            say("building " + MIRROR_BUILD)
            note["detail"] = "built"
        mirror_dir = fixture_hosts.fixture_mirror(image_dir)
    identity = os.path.join(workdir, "id_ed25519")
    for stale in (identity, identity + ".pub"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", MACHINE, "-f", identity], check=True)  # noqa: S607
    with open(identity + ".pub") as handle:
        public_key = handle.read()
    api_key = secrets.token_urlsafe(32)

    image = ImageMount(image_dir, os.path.join(workdir, "image"))
    machine = demo_machine(workdir, "", public_key)
    kept = False
    try:
        with phases("boot", "%s, a systemd-nspawn container on %s (%s)" % (MACHINE, BRIDGE_NAME, HOST_INTERFACE)):
            machine.lower = image.mount()
            machine.bridge.down()
            machine.bridge.up()
            served = fixture_hosts.serve_mirror(mirror_dir, workdir, BRIDGE_ADDRESS)
            hub = fixture_hosts.serve_hub(workdir, BRIDGE_ADDRESS)
            machine.start()
            machine.wait_for_ssh(identity)
        inventory = write_inventory(
            os.path.join(workdir, "inventory"),
            machine,
            identity,
            served["guest_url"],
            api_key,
            hub["guest_url"],
        )
        env = fixture_hosts.ansible_env(workdir, RUN)
        with phases("prepare", "the host's Debian sources point at the mirror (%s)" % served["guest_url"]):
            run_quiet(fixture_hosts.prepare_argv(inventory), os.path.join(workdir, "prepare.log"), cwd=ROOT, env=env)
        report_path = os.path.join(workdir, "report.json")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(report_path)
        argv = [INSTINCT_STACK, "rollout", "-i", inventory, "--report", report_path]
        with phases(
            "rollout", " ".join(os.path.relpath(part, ROOT) if part.startswith("/") else part for part in argv)
        ) as note:
            subreaper(True)
            try:
                returncode = run_cancellable(argv, cwd=ROOT, env=env)
            finally:
                subreaper(False)
            if returncode != 0:
                note["state"] = "FAILED"
        report = {}
        if os.path.exists(report_path):
            with open(report_path) as handle:
                report = json.load(handle)
            if api_key in json.dumps(report):
                raise DemoError("the API key appears in the report %s" % report_path)
        if returncode != 0:
            print("\n".join(format_summary(report, report_path)) if report else "", flush=True)
            raise DemoError("instinct-stack rollout failed (exit %d)" % returncode)

        base_url = "http://%s:%d" % (machine.address, SERVICE["port"])
        with phases("request", "OpenAI chat completion from the service vllm-%s" % SERVICE["name"]):
            unauthorized = status_without_key(base_url)
            if unauthorized != 401:
                raise DemoError("the service answered HTTP %d without the API key, not 401" % unauthorized)
            answer = ask(base_url, api_key, MODEL_REPO, PROMPT)
        print()
        say("the vLLM service on %s answered (without the API key: HTTP 401)" % MACHINE)
        print("\n".join(format_answer(answer, base_url, PROMPT)))
        print()
        say("rollout report")
        print("\n".join(format_summary(report, report_path)), flush=True)
        if keep:
            header = os.path.join(workdir, "auth.header")
            write_private(header, "Authorization: Bearer %s\n" % api_key)
            kept = True
            print()
            say("--keep: %s stays up" % MACHINE)
            print(
                "  ssh:      ssh -i %s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null ansible@%s\n"
                "  service:  curl -H @%s %s/v1/models   (the API key is in that 0600 file)\n"
                "  inventory: %s   (instinct-stack status|rollout -i ...)\n"
                "  teardown: scripts/run.sh --teardown" % (identity, machine.address, header, base_url, inventory)
            )
    finally:
        if not kept:
            # A second Ctrl-C or SIGTERM must not cut the teardown short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with phases(
                "teardown", "stop the host; remove its mounts, namespace, bridge, the mirror server and the fixture Hub"
            ) as note:
                teardown(workdir, machine)
                left = leftovers(workdir)
                adopted = own_children(live=True)
                stray = end_adopted()
                if stray:
                    left.append("processes " + " ".join(map(str, sorted(stray))))
                note["detail"] = "left: " + ", ".join(left) if left else "nothing left"
                if adopted:
                    note["detail"] += " (%d processes the run left behind ended)" % len(adopted)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    mode = demo_mode(argv)
    if mode is None:
        os.execv(INSTINCT_STACK, [INSTINCT_STACK, *argv])  # noqa: S606 - the same arguments, as typed
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            sys.exit("scripts/run.sh: the demo host is a systemd-nspawn container: run it as root")
        # As a module of the checkout again, from its root (sudo drops PYTHONPATH); the demo's arguments name no path.
        os.chdir(ROOT)
        os.execvp("sudo", ["sudo", sys.executable, "-m", "scripts.demo_target", *argv])  # noqa: S606, S607
    if shutil.which("systemd-nspawn") is None:
        sys.exit("scripts/run.sh: systemd-nspawn is missing (scripts/setup.sh installs systemd-container)")
    # A plain kill or a closed terminal still tears the host down.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, frame: sys.exit(128 + number))
    workdir = WORKDIR
    os.makedirs(workdir, exist_ok=True)
    left = leftovers(workdir)
    if left or mode == "teardown":
        say("tearing down what an earlier run left up: %s" % (", ".join(left) or "nothing"))
        teardown(workdir)
        left = leftovers(workdir)
        if left:
            sys.exit("scripts/run.sh: could not remove %s" % ", ".join(left))
        if mode == "teardown":
            say("torn down: no host, mount, namespace, bridge or mirror server of the demo is left")
            return 0
    say(
        "the rollout on a throwaway local host: %s (systemd-nspawn), the fixture mirror on %s; "
        "no AMD GPU here, the fixture packages stand in for ROCm and the GPUs" % (MACHINE, BRIDGE_ADDRESS)
    )
    phases = Phases()
    try:
        roll_out(workdir, phases, keep=mode == "keep")
    except DemoError as error:
        print("scripts/run.sh: %s" % error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scripts/run.sh: interrupted", file=sys.stderr)
        return 130
    finally:
        print()
        say("phases")
        print(phases.table(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
