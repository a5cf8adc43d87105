"""instinct.stack.converged's action plugin: the fingerprint from the task's variables, the tree digest, the watch list.

The module's run on the host is replaced by a recorder of its arguments; the variables are templated by a real
Templar, as in a run.
"""

import json
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.release import __version__ as ansible_version
from ansible.template import Templar

from ansible_collections.instinct.stack.plugins.action import converged as action
from ansible_collections.instinct.stack.plugins.module_utils import converged

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core 2.18 templates any string

    def trust_as_template(value):
        return value


# The root of the collection the plugin was loaded from: this checkout, or the copy the compat matrix tests.
ROOT = Path(action.__file__).resolve().parents[2]
SECRET = "action-canary-key-0b9e"  # noqa: S105 - a test value, searched for


def host_vars(**extra):
    base = {
        "inventory_hostname": "gpu1",
        "group_names": ["inference_hosts"],
        "groups": {"all": ["gpu1"], "inference_hosts": ["gpu1"], "build_hosts": ["gpu1"]},
        "stack_base": "/srv",
        "vllm_stack_root": trust_as_template("{{ stack_base }}/instinct"),
        "vllm_service_instances": [{"name": "fixture", "model": "m", "api_key": SECRET}],
        "rocm_version": "7.0.2",
        "instinct_rollout_lock": {"run_id": "abc"},
    }
    base.update(extra)
    return base


class Harness:
    def __init__(self, task_vars, args=None, check_mode=False):
        self.task_vars = task_vars
        task = MagicMock(async_val=0, check_mode=check_mode, action="instinct.stack.converged")
        task.args = {} if args is None else args
        connection = MagicMock()
        connection._shell.tmpdir = None
        templar = Templar(loader=DataLoader(), variables=task_vars)
        self.plugin = action.ActionModule(task, connection, MagicMock(), DataLoader(), templar, None)
        self.plugin._remove_tmp_path = lambda *args, **kwargs: None
        self.plugin._execute_module = self.execute_module
        self.calls = []

    def execute_module(self, module_name, module_args, task_vars):
        self.calls.append((module_name, module_args))
        return {"changed": False, "converged": False, "reasons": ["no record"]}

    def run(self):
        return self.plugin.run(task_vars=self.task_vars)


def expected_fingerprint(**inputs):
    variables = dict(
        inputs, group_names=["inference_hosts"], groups={"build_hosts": ["gpu1"]}
    )  # what the action hands desired_fingerprint
    return converged.desired_fingerprint(
        variables, converged.tree_digest(str(ROOT)), runtime="ansible-core %s" % ansible_version
    )


def test_a_check_sends_the_fingerprint_and_the_watch_list_never_an_input():
    harness = Harness(host_vars(), {"path": "/var/lib/instinct-stack/converged.json"})
    result = harness.run()
    ((name, args),) = harness.calls
    assert name == "instinct.stack.converged"
    fingerprint = expected_fingerprint(
        vllm_stack_root="/srv/instinct",
        vllm_service_instances=[{"name": "fixture", "model": "m", "api_key": SECRET}],
        rocm_version="7.0.2",
    )
    assert args["fingerprint"] == fingerprint == result["fingerprint"]
    assert args["state"] == "check" and args["path"] == "/var/lib/instinct-stack/converged.json"
    watch = converged.watch_list({"vllm_stack_root": "/srv/instinct"})
    assert {key: args[key] for key in watch} == watch
    assert "/srv/instinct/current/.verified" in args["files"] and "summary" not in args
    assert SECRET not in json.dumps(args) and SECRET not in json.dumps(result)
    assert result["converged"] is False and result["reasons"] == ["no record"]


def test_the_fingerprint_follows_the_resolved_inputs():
    base = Harness(host_vars()).run()["fingerprint"]
    # A variable that only feeds an input (not an input itself) changes the fingerprint through it.
    assert Harness(host_vars(stack_base="/opt")).run()["fingerprint"] != base
    assert Harness(host_vars(rocm_version="7.1.0")).run()["fingerprint"] != base
    assert Harness(host_vars(group_names=["build_hosts"])).run()["fingerprint"] != base
    # The run's own controls and results do not.
    unchanged = host_vars(
        instinct_rollout_lock={"run_id": "another"},
        instinct_converged_check=False,
        instinct_converged_state={"converged": True},
        ansible_host="10.0.0.9",
    )
    assert Harness(unchanged).run()["fingerprint"] == base


def test_an_input_that_cannot_be_resolved_yet_counts_by_its_text():
    needs_facts = trust_as_template("linux-headers-{{ ansible_facts['kernel'] }}")
    first = Harness(host_vars(rocm_extra=needs_facts)).run()
    assert not first.get("failed") and first["fingerprint"] == Harness(host_vars(rocm_extra=needs_facts)).run()[
        "fingerprint"]  # fmt: skip
    other = trust_as_template("linux-image-{{ ansible_facts['kernel'] }}")
    assert Harness(host_vars(rocm_extra=other)).run()["fingerprint"] != first["fingerprint"]


def test_an_input_that_fails_otherwise_is_a_doubt(tmp_path):
    """A lookup that cannot read its file, say: the roles might resolve it, the check cannot, so it is no match."""

    class Harness2(Harness):
        def execute_module(self, module_name, module_args, task_vars):
            self.calls.append((module_name, module_args))
            return {"changed": False, "converged": True, "reasons": [], "summary": {}, "stack": {"key": "A"}}

    missing = trust_as_template("{{ lookup('ansible.builtin.file', '%s') }}" % (tmp_path / "absent"))
    result = Harness2(host_vars(vllm_service_api_key=missing)).run()
    assert result["converged"] is False and not result.get("failed")
    assert len(result["reasons"]) == 1
    assert result["reasons"][0].startswith(
        "the role input vllm_service_api_key cannot be resolved before the roles run ("
    )
    assert "summary" not in result and "stack" not in result and str(tmp_path) not in result["reasons"][0]
    # Not defined yet is no doubt: the module's answer stands.
    later = trust_as_template("{{ ansible_facts['kernel'] }}")
    assert Harness2(host_vars(rocm_kernel=later)).run()["converged"] is True


def test_an_input_that_cannot_be_read_fails_the_task():
    class Sealed:
        def __str__(self):
            raise ValueError("Attempting to decrypt but no vault secrets found")

    harness = Harness(host_vars(vllm_service_instances=[{"api_key": Sealed()}]))
    harness.plugin._templar = MagicMock(template=MagicMock(side_effect=ValueError("no vault secrets")))
    result = harness.run()
    assert result["failed"] and harness.calls == []
    assert result["msg"].startswith("gpu1: the role input ")
    assert "Attempting to decrypt but no vault secrets found" in result["msg"]


def test_a_record_takes_the_checks_fingerprint_and_the_summary():
    fingerprint = "e" * 64
    driver = {"reboot_pending": True, "load_failed": False, "reason": "reboot to load it"}
    # The roles set facts named like the inputs; given the check's fingerprint, they are not even resolved.
    facts = host_vars(rocm_gfx_arch=["gfx942"], rocm_driver=driver, build_arch=trust_as_template("{{ undefined }}"))
    harness = Harness(facts, {"state": "record", "fingerprint": fingerprint})
    result = harness.run()
    ((_name, args),) = harness.calls
    assert args["state"] == "record" and args["fingerprint"] == fingerprint == result["fingerprint"]
    assert args["stack_root"] == "/srv/instinct"
    assert args["summary"] == {
        "gfx_arch": ["gfx942"],
        "pytorch_rocm_arch": None,
        "reboot": {"pending": True, "load_failed": False, "reason": "reboot to load it"},
    }


@pytest.mark.parametrize(
    "args, message",
    [
        ({"state": "present"}, "state must be check or record, not 'present'"),
        ({"path": "converged.json"}, "path must be an absolute path on the host, not 'converged.json'"),
        ({"state": "record", "fingerprint": "abc"}, "fingerprint must be the sha256 (64 lower-case hex digits)"),
    ],
    ids=["state", "path", "fingerprint"],
)
def test_bad_arguments_are_refused_before_the_host(args, message):
    harness = Harness(host_vars(), args)
    result = harness.run()
    assert result["failed"] and message in result["msg"] and harness.calls == []


def test_an_unknown_argument_is_refused():
    from ansible.errors import AnsibleActionFail

    with pytest.raises(AnsibleActionFail, match="Invalid options for instinct.stack.converged: units"):
        Harness(host_vars(), {"units": ["x"]}).run()


def test_the_tree_digest_is_computed_once_per_process(monkeypatch):
    assert Path(action.COLLECTION_ROOT).resolve() == ROOT
    assert (ROOT / "roles").is_dir() and (ROOT / "playbooks" / "site.yml").is_file()
    assert action.collection_digest() == converged.tree_digest(str(ROOT))
    calls = []
    monkeypatch.setattr(action, "_TREE_DIGESTS", {})
    monkeypatch.setattr(action, "tree_digest", lambda root: calls.append(root) or "f" * 64)
    for _host in range(3):
        Harness(host_vars()).run()
    assert calls == [action.COLLECTION_ROOT]
