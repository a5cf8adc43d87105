"""The models role's pull (tasks/pull.yml) and the vllm_service role's model links (tasks/switch.yml and the model part
of tasks/recover.yml), run by ansible-playbook on localhost against a store served over HTTP from a temporary
directory: what the role changes, in check mode and on a rerun.
"""

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from ansible_collections.instinct.stack.plugins.module_utils import models

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "roles" / "models" / "tasks"
SERVICE = ROOT / "roles" / "vllm_service" / "tasks"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
REPO = "acme/tiny-llama"
OLD, NEW = "a" * 40, "b" * 40


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@pytest.fixture
def store(tmp_path):
    """A store holding OLD and NEW of REPO in the models layout, over HTTP."""
    root = tmp_path / "store"
    (root / "acme--tiny-llama").mkdir(parents=True)
    for commit in (OLD, NEW):
        staging = tmp_path / ("staging-" + commit)
        staging.mkdir()
        (staging / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "rev": commit}))
        (staging / "model.safetensors").write_bytes(os.urandom(64 << 10))
        models.publish(str(root), REPO, commit, str(staging), models.manifest(REPO, commit, str(staging)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1], root
    server.shutdown()


def play(tmp_path, variables, tasks, check=False):
    """Run the tasks on localhost; (rc, output, {task name: [results]})."""
    path = tmp_path / "play.yml"
    base = {"name": "Test", "hosts": "localhost", "connection": "local", "gather_facts": False}
    variables = dict(variables, ansible_python_interpreter=sys.executable)
    path.write_text(yaml.safe_dump([dict(base, vars=variables, tasks=tasks)]))
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    # A systemctl that fails every call: the services' restarts never reach this machine's systemd.
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "systemctl").write_text("#!/bin/sh\necho 'fake systemctl: no units here' >&2\nexit 1\n")
    (fake / "systemctl").chmod(0o755)
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_NOCOLOR="1",
        PATH=str(fake) + os.pathsep + env.get("PATH", ""),
    )
    argv = [str(PLAYBOOK), "-i", "localhost,", str(path)] + (["--check"] if check else [])
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)  # noqa: S603
    results = {}
    try:
        output = json.loads(proc.stdout)
    except ValueError:
        return proc.returncode, proc.stdout + proc.stderr, results
    for task in output["plays"][0]["tasks"]:
        results.setdefault(task["task"]["name"], []).append(task["hosts"].get("localhost", {}))
    return proc.returncode, proc.stdout + proc.stderr, results


def pull(tmp_path, url, commit, check=False, keep=1):
    root = tmp_path / "host"
    variables = {
        "models_wanted": [{"repo": REPO, "revision": commit, "key": "%s@%s" % (REPO, commit)}],
        "models_commits": {"%s@%s" % (REPO, commit): commit},
        "models_root": str(root),
        "models_keep": keep,
        "models_mirror_url": "",
        "models_store": {"host": "localhost", "url": url},
    }
    tasks = [
        {"name": "Pull", "ansible.builtin.include_tasks": str(MODELS / "pull.yml")},
        {"name": "Show", "ansible.builtin.debug": {"var": "models_pulled"}},
    ]
    return play(tmp_path, variables, tasks, check=check)


def changed(results, name):
    return [result.get("changed", False) for result in results.get(name, [])]


PULL = "Pull each model the host serves, every file checked against the store's manifest"


def test_the_pull_publishes_the_revision_once_and_check_mode_changes_nothing(tmp_path, store):
    url, _root = store
    rc, output, results = pull(tmp_path, url, OLD, check=True)
    assert rc == 0, output
    assert changed(results, PULL) == [True] and not (tmp_path / "host" / "acme--tiny-llama").exists()
    rc, output, results = pull(tmp_path, url, OLD)
    assert rc == 0, output
    assert changed(results, PULL) == [True]
    directory = str(tmp_path / "host" / "acme--tiny-llama" / OLD)
    assert results["Show"][0]["models_pulled"] == {"%s@%s" % (REPO, OLD): directory}
    assert models.published(str(tmp_path / "host"), REPO, OLD, full=True) is not None
    rc, output, results = pull(tmp_path, url, OLD)
    assert rc == 0 and changed(results, PULL) == [False], output


def test_a_served_revision_survives_the_prune_and_an_unserved_one_goes(tmp_path, store):
    url, _root = store
    assert pull(tmp_path, url, OLD)[0] == 0
    served = tmp_path / "host" / "served"
    served.mkdir()
    os.symlink(str(tmp_path / "host" / "acme--tiny-llama" / OLD), str(served / "llama"))
    rc, output, _results = pull(tmp_path, url, NEW, keep=0)
    assert rc == 0, output
    assert (tmp_path / "host" / "acme--tiny-llama" / OLD).is_dir()
    os.unlink(str(served / "llama"))
    rc, output, results = pull(tmp_path, url, NEW, keep=0)
    assert rc == 0, output
    assert results[PULL][0]["results"][0]["pruned"] == [OLD]


def links(tmp_path, target, recover=False, check=False):
    """switch.yml's model tasks for one instance serving target (then, with recover, the model part of recover.yml
    as the role's rescue runs it); the instance is what instinct.stack.vllm_instances makes of it."""
    model_root = tmp_path / "host"
    variables = {
        "vllm_service_model_root": str(model_root),
        "vllm_service_model_dirs": {"%s@%s" % (REPO, target): str(model_root / "acme--tiny-llama" / target)},
        "vllm_service_instances": [{"name": "llama", "model": {"repo": REPO, "revision": target}}],
        # Nothing else of the stack switch: the current stack stays.
        "vllm_service_stack": str(tmp_path / "current"),
        "vllm_service_to": "/s",
        "vllm_service_from": "/s",
    }
    validated = (
        "{{ vllm_service_instances | instinct.stack.vllm_instances(1, '0', ['gfx942'], vllm_service_model_root) }}"
    )
    tasks = [
        {"name": "Validate", "ansible.builtin.set_fact": {"vllm_service_validated": validated}},
        {
            "name": "Find the revision each instance serves now",
            "ansible.builtin.stat": {"path": "{{ item.model_path }}", "follow": False, "get_checksum": False},
            "loop": "{{ vllm_service_validated }}",
            "register": "vllm_service_model_links",
        },
        {"name": "Switch", "ansible.builtin.include_tasks": str(SERVICE / "switch.yml")},
    ]
    if recover:
        tasks.append(
            {
                "name": "Recover",
                "block": [{"name": "Fail", "ansible.builtin.fail": {"msg": "vllm-llama did not answer /health"}}],
                "rescue": [{"name": "Recover", "ansible.builtin.include_tasks": str(SERVICE / "recover.yml")}],
                "vars": {"vllm_service_from_verified": True, "vllm_service_previous_from": ""},
            }
        )
    return play(tmp_path, variables, tasks, check=check)


SWITCH = "Point each instance's model link at the revision to serve"


def test_a_model_change_moves_the_link_keeps_the_previous_one_and_a_rerun_changes_nothing(tmp_path, store):
    url, _root = store
    for commit in (OLD, NEW):
        assert pull(tmp_path, url, commit, keep=2)[0] == 0
    link = tmp_path / "host" / "served" / "llama"
    rc, output, results = links(tmp_path, OLD)
    assert rc == 0 and changed(results, SWITCH) == [True], output
    assert os.readlink(str(link)).endswith("/" + OLD) and not os.path.lexists(str(link) + ".previous")
    rc, output, results = links(tmp_path, NEW, check=True)
    assert rc == 0 and changed(results, SWITCH) == [True], output
    assert os.readlink(str(link)).endswith("/" + OLD)  # check mode moved nothing
    rc, output, results = links(tmp_path, NEW)
    assert rc == 0 and changed(results, SWITCH) == [True], output
    assert os.readlink(str(link)).endswith("/" + NEW) and os.readlink(str(link) + ".previous").endswith("/" + OLD)
    rc, output, results = links(tmp_path, NEW)
    assert rc == 0 and changed(results, SWITCH) == [False], output


def test_a_service_that_fails_on_the_new_revision_gets_its_link_back(tmp_path, store):
    url, _root = store
    for commit in (OLD, NEW):
        assert pull(tmp_path, url, commit, keep=2)[0] == 0
    assert links(tmp_path, OLD)[0] == 0
    # The fake systemctl fails the restart, which the rescue's message reports after the link went back.
    rc, output, results = links(tmp_path, NEW, recover=True)
    assert rc != 0
    link = tmp_path / "host" / "served" / "llama"
    assert os.readlink(str(link)).endswith("/" + OLD), output
    back = results["Point each model link back at the revision served before"][0]
    assert back["results"][0]["changed"] is True, back
    assert "fake systemctl" in output
