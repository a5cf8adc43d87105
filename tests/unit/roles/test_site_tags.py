"""The site playbook's tags, and the fact finding that lets a role run without the roles before it.

Every play has a tag (prepare, build, serve) and every role its name, so `--tags vllm_service` redeploys the
services alone. Checked with `ansible-playbook --list-tags` and `--list-tasks --tags TAG` against a tiny inventory:
each tag selects all of its roles' tasks and nothing else, besides Ansible's own argument validation of every role
(which Ansible tags `always`; it reads no host). The build roles are the one documented exception: triton and vllm
build against the pytorch and triton roles' results, so their tags run those roles too. The rollout lock's plays,
the first (take it on every host) and the last (give it back), are tagged always: every tagged run holds the lock.
So is site.yml's second play, the converged fast path's check, and the record before the lock's give-back: their
tasks run (skipped) under every tag, and only a whole run checks and records.
"""

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / "playbooks" / "site.yml"
ROLLBACK = ROOT / "playbooks" / "rollback.yml"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

PLAYS = {
    "prepare": ["rocm", "toolchain", "ldconfig"],
    "build": ["build", "pytorch", "triton", "vllm", "models"],
    "serve": ["vllm_service"],
}
ROLES = [role for roles in PLAYS.values() for role in roles]
# Every role depends on it for the shared values (roles/common/defaults); it has no tasks but its argument validation.
COMMON = "common"
# The roles each tag runs: a role's tag runs the role, after the build plan every build reads (the build role), and
# for triton and vllm the build roles they build against.
SELECTS = {
    "rocm": ["rocm"],
    "toolchain": ["toolchain"],
    "ldconfig": ["ldconfig"],
    "pytorch": ["build", "pytorch"],
    "triton": ["build", "pytorch", "triton"],
    "vllm": ["build", "pytorch", "triton", "vllm"],
    "models": ["models"],
    "vllm_service": ["vllm_service"],
    **PLAYS,
}
# The role tags of each play's tasks.
SELECTS_BY_PLAY = {
    play: {tag for tag, roles in SELECTS.items() if tag not in PLAYS and set(roles) & set(members)}
    for play, members in PLAYS.items()
}
# What a role reads that an earlier role sets in the same run, and finds itself (its tasks/facts.yml) when that
# role did not run: the fact whose absence makes it look, and what it looks at.
FACT_FINDING = {
    "toolchain": {"rocm_installed_version": "ansible.builtin.slurp"},
    "ldconfig": {"rocm_installed_prefix": "ansible.builtin.stat"},
    "build": {"rocm_pytorch_rocm_arch": "instinct.stack.gfx_arch", "rocm_installed_version": "ansible.builtin.slurp"},
    "vllm_service": {"rocm_gpus": "instinct.stack.gfx_arch"},
}
VALIDATION = "Validating arguments against arg spec"
# The tasks of the first play (playbooks/tasks/rollout_lock.yml, a block's tasks in order) and of the last one.
# site.yml's first play (playbooks/check_inputs.yml): every role's inputs for every host, before any host changes.
CHECK_INPUTS = [
    "Read the roles' argument specs once",
    "Refuse the build variables that 0.3.0 renamed",
    "Check the given variables against the roles' argument specs",
    "Stop on a variable the roles' argument specs refuse",
    "Check the vLLM instances' names, ports and options",
]
# site.yml's second play: every host's Python ABI (instinct.stack.python_abi), one for the whole fleet.
PYTHON_ABI = ["Find the host's Python ABI", "Refuse hosts of several Python ABIs"]
TAKE_LOCK = [
    "Take the rollout lock",
    "Give back the rollout lock taken on the other hosts",
    "Stop the run on the other hosts",
]
GIVE_BACK_LOCK = ["Give back the rollout lock"]
# site.yml's second play (the converged fast path) and the record before the give-back, tagged always too.
FAST_PATH = [
    "Check whether the host is as the last whole rollout left it",
    "Put the converged hosts in the group instinct_converged",
    "Keep the build host where it would be with every host in the run",
    "Name the converged hosts, which this run leaves alone",
]
RECORD = ["Record the hosts that ran the whole rollout, for the next run's check"]
# The play before the one that switches stacks (site.yml's serve play, rollback.yml's): each serving group's nodes in
# one batch (playbooks/tasks/serve_order.yml), under the serve play's tags.
SERVE_ORDER = ["Order the hosts, each serving group's nodes together"]
SERVE_ORDER_TAGS = {"serve", "vllm_service"}
TASK_LINE = re.compile(r"^ {6}(?:instinct\.stack\.(?P<role>\w+) : )?(?P<name>.*?)\tTAGS: \[(?P<tags>[^\]]*)\]$")


@pytest.fixture(scope="module")
def ansible(tmp_path_factory):
    """Run ansible-playbook outside the checkout (no ansible.cfg of it) with the checkout as instinct.stack."""
    work = tmp_path_factory.mktemp("site-tags")
    inventory = work / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {"prep1": {}},
                    "children": {
                        "build_hosts": {"hosts": {"node1": {}}},
                        "inference_hosts": {"hosts": {"node1": {}, "node2": {}}},
                    },
                }
            }
        )
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")

    outputs = {}

    def run(*args, playbook=SITE):
        if (args, playbook) in outputs:  # the listings do not change within a session
            return outputs[args, playbook]
        proc = subprocess.run(
            [str(PLAYBOOK), "-i", str(inventory), str(playbook), *args],
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs[args, playbook] = proc.stdout
        return proc.stdout

    run.work = work
    return run


def listed_tasks(output):
    """(play number, role, task name, tags) of every task --list-tasks shows; an include_role line is its role's."""
    tasks, play, role = [], 0, None
    for line in output.splitlines():
        if line.startswith("  play #"):
            play, role = play + 1, None
            continue
        match = TASK_LINE.match(line)
        if match:
            role = match["role"] or role
            tags = {tag.strip() for tag in match["tags"].split(",") if tag.strip()}
            tasks.append((play, role, match["name"], frozenset(tags)))
    return tasks


@pytest.fixture(scope="module")
def every_task(ansible):
    tasks = listed_tasks(ansible("--list-tasks"))
    # The lock's and the fast path's tasks belong to no role.
    assert {role for _play, role, _name, _tags in tasks} == set(ROLES) | {COMMON, None}
    assert {name for _play, role, name, _tags in tasks if role == COMMON} <= {
        name for name in (task[2] for task in tasks) if name.startswith(VALIDATION)
    }
    return tasks


def own(tasks):
    """The roles' own tasks: neither Ansible's argument validation nor the lock's and fast path's plays' tasks."""
    return [task for task in tasks if not task[2].startswith(VALIDATION) and task[1] is not None]


def lock_tasks(tasks):
    """(play, name) of the lock's and the fast path's plays' tasks, and whether every one is tagged always."""
    lock = [task for task in tasks if task[1] is None and task[2] not in SERVE_ORDER]
    return [(play, name) for play, _role, name, _tags in lock], all(tags == {"always"} for *_rest, tags in lock)


def expected_lock_tasks(last_play):
    """rollback.yml's: the lock alone."""
    return [(1, name) for name in TAKE_LOCK] + [(last_play, name) for name in GIVE_BACK_LOCK]


def expected_site_tasks():
    """site.yml's: the inputs' check (play 1), the Python ABI's (play 2), the lock (play 3), the fast path's check
    (play 4), the record and the lock's give-back (the last play)."""
    last = len(PLAYS) + 6  # with the serve order's play
    return (
        [(1, name) for name in CHECK_INPUTS]
        + [(2, name) for name in PYTHON_ABI]
        + [(3, name) for name in TAKE_LOCK]
        + [(4, name) for name in FAST_PATH]
        + [(last, name) for name in RECORD + GIVE_BACK_LOCK]
    )


def test_list_tags_shows_every_play_and_role_tag(ansible):
    output = ansible("--list-tags")
    plays = re.findall(r"^  play #\d+ \(.*?\): .*\tTAGS: \[(.*)\]$", output, re.MULTILINE)
    assert [set(play.split(",")) for play in plays] == [{"always"}] * 4 + [
        {"prepare"},
        {"build"},
        SERVE_ORDER_TAGS,
        {"serve"},
        {"always"},
    ]
    task_tags = re.findall(r"^\s+TASK TAGS: \[(.*)\]$", output, re.MULTILINE)
    expected = [{"always", play, *SELECTS_BY_PLAY[play]} for play in PLAYS]
    expected.insert(2, SERVE_ORDER_TAGS)
    assert [set(tags.split(", ")) for tags in task_tags] == [{"always"}] * 4 + [*expected, {"always"}]


@pytest.mark.parametrize("tag", list(SELECTS))
def test_a_tag_selects_exactly_its_roles_tasks(ansible, every_task, tag):
    selected = listed_tasks(ansible("--list-tasks", "--tags", tag))
    expected = [task for task in own(every_task) if task[1] in SELECTS[tag]]
    assert [task[:3] for task in own(selected)] == [task[:3] for task in expected]
    # The rollout lock is taken first and given back last under every tag; the fast path's tasks are listed (a
    # tagged run skips them: they check and record a whole run only).
    assert lock_tasks(selected) == (expected_site_tasks(), True)
    # Besides them only Ansible's validation of each role's arguments, tagged always by Ansible itself.
    assert {task[1] for task in selected if task[2].startswith(VALIDATION)} <= set(ROLES) | {COMMON}
    assert all("always" in task[3] for task in selected if task[2].startswith(VALIDATION))


def test_vllm_service_alone_runs_only_its_role_and_its_fact_finding(ansible, every_task):
    selected = own(listed_tasks(ansible("--list-tasks", "--tags", "vllm_service")))
    assert {play for play, _role, _name, _tags in selected} == {8}  # the serve play, after the checks', the lock's
    # and the serve order's, which runs under the serve play's tags
    order = [task for task in listed_tasks(ansible("--list-tasks", "--tags", "vllm_service")) if task[0] == 7]
    assert [(name, tags) for _play, _role, name, tags in order] == [(SERVE_ORDER[0], SERVE_ORDER_TAGS)]
    names = [name for _play, _role, name, _tags in selected]
    facts = [task["name"] for task in yaml.safe_load((ROOT / "roles/vllm_service/tasks/facts.yml").read_text())]
    assert names[: len(facts)] == facts  # found first, before the instances are checked against the GPUs


def test_only_the_inputs_check_the_rollout_lock_and_the_fast_path_are_tagged_always(every_task):
    # Besides Ansible's own argument validation, the lock's and the fast path's tasks are the only ones every tag runs.
    assert [task for task in own(every_task) if "always" in task[3]] == []
    assert lock_tasks(every_task) == (expected_site_tasks(), True)
    shared = yaml.safe_load((ROOT / "playbooks" / "tasks" / "rollout_lock.yml").read_text())
    assert [task["name"] for task in shared[:1] + shared[1]["block"]] == TAKE_LOCK


@pytest.mark.parametrize("tags", [(), ("--tags", "vllm_service"), ("--tags", "no-such-tag")])
def test_the_rollback_holds_the_rollout_lock_under_every_tag(ansible, tags):
    tasks = listed_tasks(ansible("--list-tasks", *tags, playbook=ROLLBACK))
    lock = [task for task in tasks if task[0] != 3]  # the rollback play's own pre_tasks belong to no role either
    assert lock_tasks(lock) == (expected_lock_tasks(4), True)
    assert [name for play, _role, name, _tags in tasks if play == 2] == SERVE_ORDER  # each group in one batch
    rollback = [name for play, _role, name, _tags in tasks if play == 3]
    assert ("Refuse a host without a previous verified stack" in rollback) == (not tags)


@pytest.mark.parametrize("role", list(FACT_FINDING))
def test_each_role_finds_what_an_earlier_role_would_have_set(ansible, role):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "facts.yml").read_text())
    main = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    assert main[0]["ansible.builtin.import_tasks"] == "facts.yml"  # before anything reads them
    for fact, action in FACT_FINDING[role].items():
        (finder,) = [task for task in tasks if action in task and fact in str(task.get("when", ""))]
        # Skipped in a whole run, where the earlier role set the fact.
        assert fact + " is not defined" in str(finder["when"])
    selected = listed_tasks(ansible("--list-tasks", "--tags", role))
    assert {task["name"] for task in tasks} <= {name for _play, _role, name, _tags in selected}


def test_the_defaults_take_the_rocm_roles_facts_else_the_found_ones(ansible):
    """The roles' variables resolve in the three states: before facts.yml ran (what the argument validation
    templates), after the rocm role ran (the finding skipped), and after the finding ran without it."""
    rocm_info = {"content": base64.b64encode(b"7.0.2-56\n").decode()}
    states = [
        ("before the finding", {}, [0, "", [], "/opt/rocm", "7.0.2"]),
        (
            "after the rocm role",
            {
                "rocm_gpus": [{"gfx": "gfx942"}],
                "rocm_hip_visible_devices": "0",
                "rocm_installed_prefix": "/opt/rocm-7.0.2",
                "rocm_installed_version": "7.0.2",
                "vllm_service_gfx": {"skipped": True},
                "ldconfig_rocm_link": {"skipped": True},
                "toolchain_rocm_info": {"skipped": True},
            },
            [1, "0", ["gfx942"], "/opt/rocm-7.0.2", "7.0.2"],
        ),
        (
            "found on the host",
            {
                "vllm_service_gfx": {"gpus": [{"gfx": "gfx942"}, {"gfx": "gfx90a"}], "hip_visible_devices": "1,2"},
                "ldconfig_rocm_link": {"stat": {"exists": True, "islnk": True, "lnk_source": "/opt/rocm-7.1.0"}},
                "toolchain_rocm_info": rocm_info,
            },
            [2, "1,2", ["gfx942", "gfx90a"], "/opt/rocm-7.1.0", "7.0.2"],
        ),
        (
            "nothing installed",
            {"toolchain_rocm_info": {"failed": True, "msg": "file not found"}, "rocm_version": "7.1.0"},
            [0, "", [], "/opt/rocm", "7.1.0"],
        ),
    ]
    playbook = ansible.work / "defaults.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Resolve the roles' variables",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars": {"rocm_version": "7.0.2"},
                    "vars_files": [
                        str(ROOT / "roles/vllm_service/defaults/main.yml"),
                        str(ROOT / "roles/ldconfig/defaults/main.yml"),
                        str(ROOT / "roles/toolchain/vars/main.yml"),
                    ],
                    "tasks": [
                        {
                            "name": "Check the variables " + name,
                            "ansible.builtin.assert": {
                                "that": [
                                    "[vllm_service_gpu_count | int, vllm_service_hip_devices, vllm_service_gpu_archs,"
                                    " ldconfig_rocm_prefix, toolchain_rocm_version] == expected"
                                ],
                                "fail_msg": "{{ [vllm_service_gpu_count, vllm_service_hip_devices,"
                                " vllm_service_gpu_archs, ldconfig_rocm_prefix, toolchain_rocm_version] | to_json }}",
                            },
                            "vars": dict(state, expected=expected),
                        }
                        for name, state, expected in states
                    ],
                }
            ]
        )
    )
    output = ansible(playbook=playbook)
    assert "failed=0" in output


def test_the_fast_path_knows_every_tag_of_site_yml():
    # A run that skips any of them is not whole, so the converged fast path neither checks nor records it.
    plays = yaml.safe_load((ROOT / "playbooks/site.yml").read_text())
    (check_play,) = [
        play for play in plays if play["name"] == "Leave out the hosts the last whole rollout left converged"
    ]
    listed = set(check_play["vars"]["instinct_converged_site_tags"])
    assert listed == {"always", *PLAYS, *SELECTS}


def test_the_first_play_checks_every_role_before_any_host_changes():
    plays = yaml.safe_load((ROOT / "playbooks/site.yml").read_text())
    assert plays[0]["ansible.builtin.import_playbook"] == "check_inputs.yml"  # before the lock, the first play
    (check,) = yaml.safe_load((ROOT / "playbooks/check_inputs.yml").read_text())
    assert check["any_errors_fatal"] is True and check["gather_facts"] is False
    assert set(check["vars"]["instinct_checked_roles"]) == set(ROLES) | {COMMON}


def test_the_later_plays_do_not_check_the_role_specs_again(every_task):
    # The first play checked every role's spec for every host; a role's own check would be one more task run per host
    # and play (issue 29). common's stays: it comes with each role as a dependency, once per play.
    validated = [(play, role) for play, role, name, _tags in every_task if name.startswith(VALIDATION)]
    assert {role for _play, role in validated} == {COMMON}
    assert len({play for play, _role in validated}) == len(PLAYS)


@pytest.mark.parametrize(
    "extra, messages",
    [
        (
            {"rocm_reboot": "sometimes", "build_max_jobs": "many"},
            [
                "value of rocm_reboot must be one of: allow, never, defer, got: sometimes",
                "'build_max_jobs' is of type",
            ],
        ),
        ({"vllm_service_instances": [{"name": "Bad Name", "model": "m"}]}, ["vLLM instance name 'Bad Name' must be"]),
        # An inventory written for 0.2 names the build's shared inputs by their old pytorch_ names.
        (
            {"pytorch_pip_args": ["--no-index"], "pytorch_build_host": "b1", "pytorch_version": "v2.9.0"},
            ["pytorch_build_host is now build_host; pytorch_pip_args is now build_pip_args: rename these"],
        ),
    ],
    ids=["role-variables", "instances", "renamed"],
)
def test_bad_input_stops_the_run_in_the_first_play_on_every_host(ansible, extra, messages):
    """The run against hosts that do not exist: the first play needs no connection, so it is all that runs, and it
    names every refused variable at once."""
    proc = subprocess.run(
        [str(PLAYBOOK), "-i", str(ansible.work / "hosts.yml"), str(SITE), "-e", json.dumps(extra)],
        capture_output=True,
        text=True,
        cwd=ansible.work,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")},
             "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections")},
        timeout=300,
        check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for message in messages:
        assert message in output
    # Nothing after the first play ran: no host was connected to, no lock taken.
    assert "Take the rollout lock" not in output and "UNREACHABLE" not in output
