"""Hosts booted from the guest image that take everything from the fixture mirror, outside molecule.

benchmarks/scale.py and scripts/demo_target.py (scripts/run.sh) share this: the guest image and the
fixture mirror (built once, then cached), the mirror served on a bridge's address, the variables the
roles need against that mirror (the cluster scenario's, molecule/cluster/molecule.yml), the inventory
of a set of nspawnctl machines, the Ansible environment of one run, and the prepare step that points
the hosts' Debian sources at the mirror (molecule/shared/prepare.yml). Run it with the project's
.venv python: build_mirror imports the instinct-stack package.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import urllib.parse

from tests import harness
from tests.harness import build_mirror
from tests.harness.nspawnctl import SSH_OPTIONS

ROOT = harness.ROOT
SHARED = os.path.join(ROOT, "molecule", "shared")
BUILD_IMAGE = os.path.join(SHARED, "vm", "build-image.sh")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PREPARE_PLAYBOOK = os.path.join(SHARED, "prepare.yml")


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, text=True, **kwargs)


def guest_image(on_build=None):
    """The guest image's directory (build-image.sh); on_build(line) hears its 'building guest image' line."""
    script = subprocess.Popen([BUILD_IMAGE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr = []
    for line in script.stderr:
        stderr.append(line)
        if on_build is not None and line.startswith("building guest image"):
            on_build(line.strip())
    stdout = script.stdout.read()
    if script.wait() != 0:
        raise RuntimeError("build-image.sh failed (exit %d):\n%s" % (script.returncode, "".join(stderr)[-3000:]))
    return stdout.splitlines()[-1]


def mirror_cache():
    """Where build_mirror keeps its mirrors when given no cache directory."""
    return build_mirror.default_cache()


def mirror_cached(image_dir):
    """Whether build_mirror will reuse a cached mirror for this image and the fixtures as they are now."""
    key = build_mirror.recipe_key(os.path.join(image_dir, "packages.txt"))
    return os.path.isfile(os.path.join(mirror_cache(), "mirror-" + key, "rocm", "rocm.gpg.key"))


def fixture_mirror(image_dir):
    """The fixture mirror's directory: build_mirror builds it, or reuses the cached one."""
    return run(harness.argv("build_mirror", image_dir), capture_output=True, env=harness.env()).stdout.splitlines()[-1]


def serve_mirror(mirror_dir, workdir, bind):
    """Serves the mirror on bind (a bridge's address) from a background server; its JSON (port, guest_url ...)."""
    argv = harness.argv("vmctl", "serve", mirror_dir, "--workdir", workdir, "--bind", bind)
    return json.loads(run(argv, capture_output=True, env=harness.env()).stdout)


def unserve_mirror(workdir, name="mirror"):
    argv = harness.argv("vmctl", "unserve", "--workdir", workdir, "--name", name)
    subprocess.run(argv, capture_output=True, check=False, env=harness.env())


def serve_hub(workdir, bind):
    """Writes the fixture Hub's repository under workdir/hub and serves it on bind from a background server; its
    JSON (port, guest_url, repo, commits {branch: commit})."""
    root = os.path.join(workdir, "hub")
    made = run(harness.argv("fixture_hub", "make", root), capture_output=True, env=harness.env())
    argv = harness.argv("vmctl", "serve", root, "--hub", "--name", "hub", "--workdir", workdir)
    served = run([*argv, "--bind", bind], capture_output=True, env=harness.env())
    return dict(json.loads(served.stdout), **json.loads(made.stdout))


def fixture_vars(identity, mirror_url):
    """The variables every host needs to take the stack from the fixture mirror at mirror_url (the cluster
    scenario's), reached over ssh with identity."""
    refs = build_mirror.SOURCE_REFS
    return {
        "ansible_user": "ansible",
        "ansible_ssh_private_key_file": identity,
        "ansible_ssh_common_args": " ".join(SSH_OPTIONS),
        # prepare.yml points the Debian sources here.
        "instinct_molecule_mirror": {"guest_url": mirror_url},
        "rocm_repo_base_url": mirror_url,
        # The hosts share this machine's kernel; the mirror has no headers package for it.
        "rocm_install_kernel_headers": False,
        # The amdgpu module never loads on these hosts: the reboot stays pending, and they build anyway.
        "rocm_reboot": "defer",
        "rocm_users": ["ansible"],
        "pytorch_git_url": mirror_url + "/git/pytorch.git",
        # The fixture PyTorch's .gitmodules name https://github.com/ as upstream's do; the mirror serves them.
        "build_git_rewrites": {"https://github.com/": mirror_url + "/git/github.com/"},
        "pytorch_version": refs["pytorch"],
        "build_pip_args": [
            "--no-index",
            "--find-links",
            mirror_url + "/wheels/",
            "--trusted-host",
            urllib.parse.urlsplit(mirror_url).hostname,
        ],
        "build_downloads_mirror_url": mirror_url,
        "pytorch_vision_git_url": mirror_url + "/git/vision.git",
        "pytorch_vision_version": refs["vision"],
        "triton_git_url": mirror_url + "/git/triton.git",
        "vllm_git_url": mirror_url + "/git/vllm.git",
        "vllm_version": refs["vllm"],
    }


def inventory(hosts, variables, build_host=None):
    """Every host (nspawnctl Machines) an inference host, build_host (default: the first) the build host."""
    build_host = build_host or hosts[0]
    return {
        "all": {
            "vars": variables,
            "children": {
                "inference_hosts": {"hosts": {host.name: {"ansible_host": host.address} for host in hosts}},
                "build_hosts": {"hosts": {build_host.name: {}}},
            },
        }
    }


def ansible_env(workdir, run_name, forks=20, profile=False):
    """Each run starts from an empty fact cache and ssh control socket directory."""
    state = {part: os.path.join(workdir, part, run_name) for part in ("facts", "cp")}
    for path in state.values():
        shutil.rmtree(path, ignore_errors=True)
    env = dict(
        os.environ,
        ANSIBLE_FORKS=str(forks),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_CACHE_PLUGIN_CONNECTION=state["facts"],
        ANSIBLE_SSH_CONTROL_PATH_DIR=state["cp"],
    )
    if profile:
        # profile_tasks times each task in the log; the benchmarks' task_cpu writes each task's controller CPU to
        # the file INSTINCT_TASK_CPU_FILE names (benchmarks/callback_plugins/task_cpu.py).
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.builtin.profile_tasks,task_cpu"
        env["ANSIBLE_CALLBACK_PLUGINS"] = os.path.join(ROOT, "benchmarks", "callback_plugins")
    return env


def close_ssh_masters(workdir, run_name):
    """Ends the ssh connections ansible keeps open (ControlPersist) to hosts about to stop."""
    for socket in glob.glob(os.path.join(workdir, "cp", run_name, "*")):
        subprocess.run(["ssh", "-o", "ControlPath=" + socket, "-O", "exit", "host"], capture_output=True, check=False)


def prepare_argv(inventory_path):
    """The ansible-playbook command line of the prepare step: the hosts' Debian sources point at the mirror."""
    return [ANSIBLE_PLAYBOOK, "-i", inventory_path, PREPARE_PLAYBOOK]
