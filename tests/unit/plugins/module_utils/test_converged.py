"""module_utils.converged: the fingerprint, the watch list, the host's observation, the record and the check."""

import json
import os
import stat

import pytest

from ansible_collections.instinct.stack.plugins.module_utils import converged

TREE = "0" * 64
SECRET = "s3cret-api-key"  # noqa: S105 - a test value, searched for


def variables(**extra):
    base = {
        "rocm_version": "7.0.2",
        "vllm_service_instances": [{"name": "fixture", "model": "m", "api_key": SECRET}],
        "group_names": ["inference_hosts"],
        "groups": {"all": ["gpu1", "gpu2"], "build_hosts": ["gpu1"]},
        "inventory_hostname": "gpu1",
        "ansible_host": "10.0.0.1",
    }
    base.update(extra)
    return base


# The fingerprint -----------------------------------------------------------------------------------------------------


def test_the_fingerprint_is_a_stable_sha256_whatever_the_order():
    one = converged.desired_fingerprint(variables(), TREE)
    reordered = dict(reversed(list(variables().items())))
    assert one == converged.desired_fingerprint(reordered, TREE)
    assert len(one) == 64 and int(one, 16) >= 0
    nested = variables(vllm_service_instances=[{"api_key": SECRET, "model": "m", "name": "fixture"}])
    assert converged.desired_fingerprint(nested, TREE) == one


@pytest.mark.parametrize(
    "change",
    [
        {"rocm_version": "7.1.0"},
        {"toolchain_version": "12"},
        {"ldconfig_profile": False},
        {"pytorch_version": "v2.10.0"},
        {"triton_version": "abc"},
        {"vllm_version": "v0.12.0"},
        {"vllm_service_instances": [{"name": "fixture", "model": "m", "api_key": "another"}]},
        {"instinct_mirror_url": "http://mirror"},
        {"group_names": ["build_hosts", "inference_hosts"]},
        {"groups": {"all": ["gpu1", "gpu2"], "build_hosts": ["gpu2"]}},
    ],
    ids=lambda change: next(iter(change)),
)
def test_every_role_input_changes_the_fingerprint(change):
    assert converged.desired_fingerprint(variables(**change), TREE) != converged.desired_fingerprint(variables(), TREE)


@pytest.mark.parametrize(
    "change",
    [
        {"ansible_host": "10.0.0.2"},
        {"inventory_hostname": "gpu2"},
        {"groups": {"all": ["gpu1", "gpu2", "gpu3"], "build_hosts": ["gpu1"], "instinct_converged": ["gpu2"]}},
        {"instinct_rollout_lock": {"run_id": "abc"}},
        {"instinct_rollout_lock_break": True},
        {"instinct_rollout_lock_path": "/srv/lock"},
        {"instinct_converged_check": False},
        {"instinct_converged_path": "/srv/record"},
        {"instinct_converged_state": {"converged": True}},
        {"rocmish": 1},
    ],
    ids=lambda change: next(iter(change)),
)
def test_what_is_not_a_role_input_leaves_the_fingerprint(change):
    assert converged.desired_fingerprint(variables(**change), TREE) == converged.desired_fingerprint(variables(), TREE)


def test_the_tree_and_the_runtime_change_the_fingerprint():
    base = converged.desired_fingerprint(variables(), TREE)
    assert converged.desired_fingerprint(variables(), "1" * 64) != base
    assert converged.desired_fingerprint(variables(), TREE, runtime="ansible-core 2.19.1") != base


def test_the_tree_digest_covers_roles_plugins_and_playbooks_but_not_bytecode(tmp_path):
    for part in ("roles/rocm/tasks", "plugins/modules", "playbooks", "docs"):
        (tmp_path / part).mkdir(parents=True)
    (tmp_path / "roles/rocm/tasks/main.yml").write_text("---\n")
    (tmp_path / "plugins/modules/m.py").write_text("x = 1\n")
    (tmp_path / "playbooks/site.yml").write_text("---\n")
    first = converged.tree_digest(str(tmp_path))
    (tmp_path / "docs/index.rst").write_text("docs\n")
    (tmp_path / "plugins/modules/__pycache__").mkdir()
    (tmp_path / "plugins/modules/__pycache__/m.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "plugins/modules/m.pyc").write_bytes(b"\0")
    assert converged.tree_digest(str(tmp_path)) == first
    (tmp_path / "roles/rocm/tasks/main.yml").write_text("---\n# changed\n")
    second = converged.tree_digest(str(tmp_path))
    assert second != first
    (tmp_path / "roles/rocm/tasks/main.yml").rename(tmp_path / "roles/rocm/tasks/other.yml")
    assert converged.tree_digest(str(tmp_path)) not in (first, second)


def test_canonical_makes_plain_json_types():
    class Tagged(str):
        pass

    value = {
        "b": (1, 2),
        "a": {Tagged("x"): {3, 1}},
        "c": object.__new__(type("Opaque", (), {"__str__": lambda s: "O"})),
    }
    assert converged.canonical(value) == {"b": [1, 2], "a": {"x": [1, 3]}, "c": "O"}
    assert converged.canonical_json({"b": 1, "a": 2}) == '{"a":2,"b":1}'


# The watch list ----------------------------------------------------------------------------------------------------


def test_the_watch_list_names_what_the_roles_manage():
    watch = converged.watch_list({})
    files = watch["files"]
    for path in (
        "/etc/apt/sources.list.d/rocm.sources",
        "/etc/apt/sources.list.d/amdgpu.sources",
        "/etc/apt/keyrings/rocm.asc",
        "/etc/apt/preferences.d/rocm-pin",
        "/var/lib/dpkg/info/rocm.list",
        "/var/lib/dpkg/info/amdgpu-dkms.list",
        "/sys/module/amdgpu/initstate",
        "/etc/ld.so.conf.d/20-instinct-rocm.conf",
        "/etc/profile.d/instinct-rocm.sh",
        "/etc/systemd/system/vllm-*.service",
        "/etc/systemd/system/vllm-*.service.d/*",
        "/etc/instinct-stack/vllm/*",
        "/etc/systemd/system/instinct-stack-store.service",
        # The artifact store's server and its configuration.
        "/etc/instinct-stack/store/nginx.conf",
        "/var/lib/dpkg/info/nginx.list",
        "/opt/instinct-stack/current/.verified",
        # What an inference host needs to run a stack, and the mirror's distribution source (minimal hosts).
        "/var/lib/dpkg/info/python3-venv.list",
        "/var/lib/dpkg/info/python3-dev.list",
        "/etc/apt/sources.list.d/instinct-distribution.sources",
    ):
        assert path in files
    assert sorted(watch["links"]) == ["/opt/instinct-stack/previous", "/opt/rocm", "/usr/bin/c++", "/usr/bin/cc",
                                      "/usr/bin/g++", "/usr/bin/gcc",
                                      "/var/lib/instinct-stack/models/served/*"]  # fmt: skip
    assert sorted(watch["units"]) == ["instinct-stack-store.service", "vllm-*.service"]
    # Each path once, though two roles declare it or a package is named twice.
    assert len(files) == len(set(files)) and len(watch["links"]) == len(set(watch["links"]))
    assert watch["stack_root"] == "/opt/instinct-stack"


def test_the_watch_list_follows_the_inventory():
    watch = converged.watch_list(
        {
            "vllm_stack_root": "/srv/stack/",
            "rocm_packages": ["rocm-hip-runtime"],
            "vllm_store_unit": "store.service",
            "vllm_host_packages": ["python3.12-venv"],
        }
    )
    assert "/var/lib/dpkg/info/python3.12-venv.list" in watch["files"]
    assert "/var/lib/dpkg/info/python3-venv.list" not in watch["files"]
    assert "/srv/stack/current/.verified" in watch["files"] and "/srv/stack/previous" in watch["links"]
    assert "/var/lib/dpkg/info/rocm-hip-runtime.list" in watch["files"]
    assert "/var/lib/dpkg/info/rocm.list" not in watch["files"]
    assert "/etc/systemd/system/store.service" in watch["files"] and "store.service" in watch["units"]
    assert watch["stack_root"] == "/srv/stack"
    # What the declarations read: their placeholders, and the shared value vllm_stack_root's default names.
    assert set(converged.declared_inputs()) == {
        "vllm_stack_root",
        "instinct_stack_root",
        "rocm_packages",
        "rocm_keyring_path",
        "rocm_distribution_sources_path",
        "vllm_store_unit",
        "vllm_store_nginx_config",
        "vllm_host_packages",
        "models_root",
        "instinct_model_root",
        "vllm_service_model_root",
    }
    # A models directory of the inventory's: its manifests and the instances' links there.
    moved = converged.watch_list({"instinct_model_root": "/data/models"})
    assert "/data/models/*/*.json" in moved["files"] and "/data/models/served/*" in moved["links"]
    assert converged.watch_list({"instinct_stack_root": "/data/stacks"})["stack_root"] == "/data/stacks"


def test_a_declaration_reads_plain_values_and_names_what_it_cannot_read():
    declarations = {"demo": {"files": ["/etc/{{ demo_dir }}/a", "{{ demo_list }}"], "packages": ["{{ demo_pkgs }}"]}}
    defaults = {"demo_dir": "{{ demo_base }}", "demo_base": "x", "demo_list": ["/l1", "/l2"], "demo_pkgs": ["p"]}
    watch = converged.watch_list({}, declarations, defaults)
    assert watch["files"][:3] == ["/etc/x/a", "/l1", "/l2"] and "/var/lib/dpkg/info/p.list" in watch["files"]
    assert converged.watch_list({"demo_dir": "y"}, declarations, defaults)["files"][0] == "/etc/y/a"
    with pytest.raises(converged.DeclarationError, match="demo's declaration names demo_dir, whose default is an"):
        converged.watch_list({}, declarations, dict(defaults, demo_dir="{{ demo_base | upper }}"))
    with pytest.raises(converged.DeclarationError, match="demo's declaration names demo_dir, which no role defines"):
        converged.watch_list({}, declarations, {})
    two = dict(declarations, other={"stack_root": "/b"}, demo=dict(declarations["demo"], stack_root="/a"))
    with pytest.raises(converged.DeclarationError, match="several stack roots: /a, /b"):
        converged.watch_list({}, two, defaults)


def test_the_summary_takes_the_last_driver_check():
    found = {"reboot_pending": True, "load_failed": False, "reason": "reboot to load it"}
    after = {"reboot_pending": False, "load_failed": False, "reason": "the loaded amdgpu module is the installed one"}
    facts = {"rocm_gfx_arch": ["gfx942"], "rocm_pytorch_rocm_arch": "gfx942", "rocm_driver": found}
    assert converged.summary(facts) == {
        "gfx_arch": ["gfx942"],
        "pytorch_rocm_arch": "gfx942",
        "reboot": {"pending": True, "load_failed": False, "reason": "reboot to load it"},
    }
    assert converged.summary(dict(facts, rocm_driver_after_reboot=after))["reboot"]["pending"] is False
    skipped = dict(facts, rocm_driver_after_reboot={"skipped": True})
    assert converged.summary(skipped)["reboot"]["pending"] is True
    assert converged.summary({}) == {"gfx_arch": None, "pytorch_rocm_arch": None, "reboot": None}


# Observing the host ------------------------------------------------------------------------------------------------


@pytest.fixture
def host(tmp_path):
    """A host's watched files under tmp_path: a config file, two unit files, a stack with current and previous."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "rocm.conf").write_text("/opt/rocm-7.0.2/lib\n")
    (tmp_path / "units").mkdir()
    (tmp_path / "units" / "vllm-a.service").write_text("[Service]\n")
    (tmp_path / "units" / "vllm-b.service").write_text("[Service]\n")
    for key in ("A", "B"):
        (tmp_path / "stack" / "stacks" / key).mkdir(parents=True)
        stack = {"key": key, "vllm": "0.11.0", "lock": {"packages": {"x": {}}}}
        (tmp_path / "stack" / "stacks" / key / ".verified").write_text(json.dumps(stack))
    (tmp_path / "stack" / "current").symlink_to(tmp_path / "stack" / "stacks" / "A")
    (tmp_path / "stack" / "previous").symlink_to(tmp_path / "stack" / "stacks" / "B")
    (tmp_path / "gcc-12").write_text("")
    (tmp_path / "gcc").symlink_to(tmp_path / "gcc-12")
    return tmp_path


def watch(root):
    return {
        "files": [
            str(root / "etc" / "rocm.conf"),
            str(root / "etc" / "absent.conf"),
            str(root / "units" / "vllm-*.service"),
            str(root / "stack" / "current" / ".verified"),
        ],
        "links": [str(root / "gcc"), str(root / "stack" / "previous")],
        "units": ["vllm-*.service"],
        "stack_root": str(root / "stack"),
    }


def units(names):
    return lambda patterns: (list(names), None)


def observe(root, active=("vllm-a.service",)):
    return converged.observe(watch(root), units(active))


def test_observe_hashes_files_resolves_links_and_lists_units(host):
    seen = observe(host)
    files = seen["files"]
    assert files[str(host / "etc" / "rocm.conf")] == converged.file_digest(str(host / "etc" / "rocm.conf"))
    assert len(files[str(host / "etc" / "rocm.conf")]) == 64
    assert files[str(host / "etc" / "absent.conf")] is None
    assert {str(host / "units" / "vllm-a.service"), str(host / "units" / "vllm-b.service")} <= set(files)
    assert seen["links"] == {str(host / "gcc"): str(host / "gcc-12"), str(host / "stack" / "previous"): str(
        host / "stack" / "stacks" / "B")}  # fmt: skip
    assert seen["current"] == str(host / "stack" / "stacks" / "A")
    assert seen["units"] == ["vllm-a.service"] and seen["units_error"] is None


def test_the_units_that_cannot_be_listed_say_why(host):
    seen = converged.observe(watch(host), lambda patterns: (None, "System has not been booted with systemd"))
    assert seen["units"] is None and seen["units_error"] == "System has not been booted with systemd"
    assert converged.observe(dict(watch(host), units=[]), None)["units"] == []


def test_parse_units():
    output = "vllm-a.service loaded active running vLLM a\nvllm-b.service loaded active running vLLM b\n\n"
    assert converged.parse_units(output) == ["vllm-a.service", "vllm-b.service"]


def test_read_stack_leaves_out_the_lock(host):
    assert converged.read_stack(str(host / "stack")) == {"key": "A", "vllm": "0.11.0"}
    assert converged.read_stack(str(host / "nothing")) is None


# The check ---------------------------------------------------------------------------------------------------------

FINGERPRINT = "a" * 64


def recorded(host, **kwargs):
    return converged.make_record(FINGERPRINT, observe(host, **kwargs), {"gfx_arch": ["gfx942"]}, now=0)


def test_an_unchanged_host_is_converged(host):
    assert converged.check(recorded(host), FINGERPRINT, observe(host)) == (True, [])


@pytest.mark.parametrize(
    "record, reason",
    [
        (None, "no record"),
        ({"unreadable": "not JSON: Expecting value"}, "the record is unreadable (not JSON: Expecting value)"),
        ({"format": 0, "fingerprint": FINGERPRINT}, "the record is of another format"),
        ({"format": 1, "fingerprint": FINGERPRINT}, "the record is of another format"),
    ],
    ids=["none", "unreadable", "old format", "incomplete"],
)
def test_no_usable_record_is_not_converged(host, record, reason):
    assert converged.check(record, FINGERPRINT, observe(host)) == (False, [reason])


def test_changed_inputs(host):
    assert converged.check(recorded(host), "b" * 64, observe(host)) == (False, ["the inputs changed"])


def test_a_changed_appeared_or_removed_file(host):
    record = recorded(host)
    (host / "etc" / "rocm.conf").write_text("/opt/rocm-7.1.0/lib\n")
    (host / "etc" / "absent.conf").write_text("")
    (host / "units" / "vllm-b.service").unlink()
    (host / "units" / "vllm-c.service").write_text("")
    assert converged.check(record, FINGERPRINT, observe(host)) == (
        False,
        [
            "%s appeared" % (host / "etc" / "absent.conf"),
            "%s changed" % (host / "etc" / "rocm.conf"),
            "%s is gone" % (host / "units" / "vllm-b.service"),
            "%s appeared" % (host / "units" / "vllm-c.service"),
        ],
    )


def test_a_rollback_moves_current_and_previous(host):
    record = recorded(host)
    for link, key in (("current", "B"), ("previous", "A")):
        (host / "stack" / link).unlink()
        (host / "stack" / link).symlink_to(host / "stack" / "stacks" / key)
    converged_now, reasons = converged.check(record, FINGERPRINT, observe(host))
    assert not converged_now
    assert reasons == ["current moved", "%s changed" % (host / "stack" / "current" / ".verified"), "previous moved"]


def test_a_current_stack_without_its_record(host):
    record = recorded(host)
    (host / "stack" / "stacks" / "A" / ".verified").unlink()
    assert converged.check(record, FINGERPRINT, observe(host)) == (False, ["stacks/A has no .verified"])


def test_a_moved_link(host):
    record = recorded(host)
    (host / "gcc-11").write_text("")
    (host / "gcc").unlink()
    (host / "gcc").symlink_to(host / "gcc-11")
    assert converged.check(record, FINGERPRINT, observe(host)) == (False, ["%s moved" % (host / "gcc")])


def test_units(host):
    record = recorded(host)
    assert converged.check(record, FINGERPRINT, observe(host, active=())) == (False, ["vllm-a.service is not active"])
    assert converged.check(record, FINGERPRINT, observe(host, active=("vllm-a.service", "vllm-b.service"))) == (
        False,
        ["vllm-b.service became active after the record"],
    )
    unknown = converged.observe(watch(host), lambda patterns: (None, "Failed to connect to bus"))
    assert converged.check(record, FINGERPRINT, unknown) == (
        False,
        ["the units cannot be listed (Failed to connect to bus)"],
    )
    without = converged.make_record(FINGERPRINT, unknown, now=0)
    assert converged.check(without, FINGERPRINT, observe(host)) == (False, ["the record has no units"])


def test_a_file_that_cannot_be_read_is_doubt(host):
    record = recorded(host)
    seen = observe(host)
    seen["files"][str(host / "etc" / "rocm.conf")] = converged.UNREADABLE
    assert converged.check(record, FINGERPRINT, seen) == (False, ["%s cannot be read" % (host / "etc" / "rocm.conf")])
    doubtful = converged.make_record(FINGERPRINT, seen, now=0)
    assert not converged.check(doubtful, FINGERPRINT, seen)[0]


def test_several_reasons_at_once(host):
    record = recorded(host)
    (host / "etc" / "rocm.conf").unlink()
    converged_now, reasons = converged.check(record, "b" * 64, observe(host, active=()))
    assert reasons == [
        "the inputs changed",
        "%s is gone" % (host / "etc" / "rocm.conf"),
        "vllm-a.service is not active",
    ]


# The record on disk ------------------------------------------------------------------------------------------------


def test_the_record_is_written_atomically_0600(host, tmp_path):
    path = str(tmp_path / "var" / "lib" / "instinct-stack" / "converged.json")
    old_umask = os.umask(0o000)
    try:
        converged.write_record(path, recorded(host))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert converged.read_record(path) == recorded(host)
    assert os.listdir(os.path.dirname(path)) == ["converged.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_record_and_no_temporary_file(host, tmp_path, monkeypatch):
    (tmp_path / "record").mkdir()
    path = str(tmp_path / "record" / "converged.json")
    converged.write_record(path, {"format": 1})

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError):
        converged.write_record(path, recorded(host))
    assert converged.read_record(path) == {"format": 1}
    assert os.listdir(str(tmp_path / "record")) == ["converged.json"]


def test_read_record(tmp_path):
    path = tmp_path / "converged.json"
    assert converged.read_record(str(path)) is None
    path.write_text("{broken")
    assert converged.read_record(str(path))["unreadable"].startswith("not JSON: ")
    path.write_text("[]")
    assert converged.read_record(str(path)) == {"unreadable": "not a JSON object"}


def test_same_record_ignores_when(host):
    one = recorded(host)
    other = dict(one, recorded_at="2030-01-01T00:00:00Z")
    assert converged.same_record(one, other) and not converged.same_record(None, one)
    assert not converged.same_record(one, dict(one, fingerprint="b" * 64))


def test_no_secret_in_a_record_or_a_check(host):
    fingerprint = converged.desired_fingerprint(variables(), TREE)
    record = converged.make_record(fingerprint, observe(host), converged.summary(variables()), now=0)
    assert SECRET not in json.dumps(record)
    assert SECRET not in json.dumps(converged.check(record, fingerprint, observe(host)))


def test_the_default_stack_root_is_the_common_roles():
    import pathlib

    import yaml

    root = pathlib.Path(__file__).resolve().parents[4]
    shared = yaml.safe_load((root / "roles" / "common" / "defaults" / "main.yml").read_text())
    assert shared["instinct_stack_root"] == converged.DEFAULT_STACK_ROOT
    assert converged.watch_list({"instinct_stack_root": "/srv/stacks/"})["stack_root"] == "/srv/stacks"
    assert converged.watch_list({"instinct_stack_root": "/srv", "vllm_stack_root": "/x"})["stack_root"] == "/x"


def test_a_glob_of_links_keeps_the_target_of_each_link_it_matches(tmp_path):
    (tmp_path / "rev1").mkdir()
    (tmp_path / "served").mkdir()
    os.symlink(str(tmp_path / "rev1"), str(tmp_path / "served" / "llama"))
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "served" / "broken"))
    seen = converged.observe({"links": [str(tmp_path / "served" / "*")]}, lambda patterns: ([], None))
    assert seen["links"] == {
        str(tmp_path / "served" / "broken"): None,
        str(tmp_path / "served" / "llama"): str(tmp_path / "rev1"),
    }
