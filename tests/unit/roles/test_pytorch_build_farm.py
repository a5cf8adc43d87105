"""The build farm (the build role's plan, the pytorch role's builds), run by ansible-playbook against local hosts.

Four inference hosts with three distinct arch lists and two build hosts: the build role's plan.yml assigns them
round-robin (instinct.stack.build_farm), and build.yml starts a wave's torch builds at once, each delegated to its
arch list's build host, before it waits for them. Every host is this machine (a local connection); each build host
has its own Python interpreter wrapper, which logs the host's name, so the test sees where each build ran, and its
own staging directory, so the two builds of a wave do not wait on each other's lock as they would in one directory.
The fake checkout's "build" logs its start and end around a pause: the two builds of the first wave overlap.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

# The fixture build logs its start, holds until every build the test expects in its wave has started (60 s at most),
# and logs its end: a wave's builds overlap however late a loaded machine starts the second one, where a fixed sleep
# raced with it, and a role that ran them one after another still shows as start, end, start.
SETUP = """
import json, os, time
from setuptools import setup
arch = os.environ["PYTORCH_ROCM_ARCH"]
log = %r
with open(%r) as handle:
    wave = set(json.load(handle)[arch])
with open(log, "a") as handle:
    handle.write("start %%s max_jobs=%%s\\n" %% (arch, os.environ["MAX_JOBS"]))
deadline = time.time() + 60
while time.time() < deadline:
    with open(log) as handle:
        if wave <= set(line.split()[1] for line in handle if line.startswith("start ")):
            break
    time.sleep(0.1)
time.sleep(0.5)
with open(log, "a") as handle:
    handle.write("end %%s\\n" %% arch)
setup(name="torch", version="0.0.1+" + arch.replace(";", "."), py_modules=[])
"""

WRAPPER = """#!/bin/sh
echo {host} >> {log}
exec {python} "$@"
"""


def run(tmp_path, inventory, tasks, extra_vars=None):
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Farm",
                    "hosts": "inference_hosts",
                    "gather_facts": False,
                    "vars": extra_vars or {},
                    "tasks": tasks,
                }
            ]
        )
    )
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(
        os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections")
    )
    proc = subprocess.run(
        [str(PLAYBOOK), "-i", str(tmp_path / "inventory.yml"), str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def inventory(tmp_path, build_hosts):
    hosts = {}
    for host in build_hosts:
        wrapper = tmp_path / ("python-" + host)
        wrapper.write_text(WRAPPER.format(host=host, log=tmp_path / "delegated.log", python=sys.executable))
        wrapper.chmod(0o755)
        hosts[host] = {"ansible_python_interpreter": str(wrapper)}
    return {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {
                "inference_hosts": {
                    "hosts": {
                        "i1": {"build_rocm_arch": "gfx942"},
                        "i2": {"build_rocm_arch": "gfx90a"},
                        "i3": {"build_rocm_arch": "gfx942"},
                        "i4": {"build_rocm_arch": "gfx90a;gfx942"},
                    }
                },
                "build_hosts": {"hosts": hosts},
            },
        }
    }


def role_tasks(*files):
    """ROLE/FILE: the role's task file, with its defaults, kept for the files after it (as a play's roles are)."""
    return [
        {
            "ansible.builtin.include_role": {
                "name": "instinct.stack." + name.split("/")[0],
                "tasks_from": name.split("/")[1],
                "public": True,
            }
        }
        for name in files
    ]


def facts(result, name):
    """The last debug message of each host."""
    for play in result["plays"]:
        for task in reversed(play["tasks"]):
            if task["task"]["name"] == name:
                return dict((host, value["msg"]) for host, value in task["hosts"].items())
    raise AssertionError(name)


def farm(tmp_path, build_hosts, waves):
    """Assign and build the four hosts' arch lists on build_hosts, waves being the arch lists the test expects to
    build at once; each host's facts, the builds' log lines, and the build hosts the builds ran on, once per module
    run."""
    work = tmp_path / "w"
    (work / "src" / "tools" / "amd_build").mkdir(parents=True)
    (work / "src" / "tools" / "amd_build" / "build_amd.py").write_text("")
    (work / "venv" / "bin").mkdir(parents=True)
    # The build virtualenv's python: this one (a wrapper, as a symlink would lose its virtualenv and setuptools).
    (work / "venv" / "bin" / "python").write_text('#!/bin/sh\nexec %s "$@"\n' % sys.executable)
    (work / "venv" / "bin" / "python").chmod(0o755)
    log = tmp_path / "builds.log"
    peers = tmp_path / "waves.json"
    peers.write_text(json.dumps({arch: wave for wave in waves for arch in wave}))
    (work / "src" / "setup.py").write_text(SETUP % (str(log), str(peers)))
    show = {
        "name": "Show",
        "ansible.builtin.debug": {
            "msg": "{{ {'assigned': build_arch_hosts, 'farm': build_farm_hosts,"
            " 'mine': build_arch_host, 'built': pytorch_build.build_info.metadata.arch,"
            " 'ccache': pytorch_build.build_info.ccache} }}"
        },
    }
    result = run(
        tmp_path,
        inventory(tmp_path, build_hosts),
        role_tasks("build/plan.yml", "pytorch/build.yml") + [show],
        {
            "pytorch_src_dir": str(work / "src"),
            # Per build host, as on separate machines: pytorch_build_on is the build host of the build at hand.
            "build_staging_dir": str(work) + "/staging-{{ pytorch_build_on }}",
            "build_wheel_cache": str(work / "cache"),
            "build_venv": str(work / "venv"),
            "build_ccache_dir": str(work / "ccache"),
            "pytorch_build_poll_seconds": 1,
            "pytorch_checkout": {"before": None},
            "pytorch_commit": "0" * 40,
            "build_rocm_version": "7.0.2",
            "build_jobs_by_host": {"b1": 2, "b2": 3},
        },
    )
    return facts(result, "Show"), log.read_text().splitlines(), (tmp_path / "delegated.log").read_text().split()


def test_two_build_hosts_get_distinct_arch_lists_and_build_a_wave_at_once(tmp_path):
    shown, lines, delegated = farm(tmp_path, ["b1", "b2"], [["gfx90a", "gfx90a;gfx942"], ["gfx942"]])
    assigned = {"gfx90a": "b1", "gfx90a;gfx942": "b2", "gfx942": "b1"}
    assert shown["i1"]["assigned"] == assigned and shown["i1"]["farm"] == ["b1", "b2"]
    assert {host: shown[host]["mine"] for host in shown} == {"i1": "b1", "i2": "b1", "i3": "b1", "i4": "b2"}
    assert {host: shown[host]["built"] for host in shown} == {
        "i1": "gfx942",
        "i2": "gfx90a",
        "i3": "gfx942",
        "i4": "gfx90a;gfx942",
    }
    # Wave one: gfx90a on b1 (MAX_JOBS 2) and gfx90a;gfx942 on b2 (MAX_JOBS 3) at once; wave two: gfx942 on b1.
    assert sorted(lines[:2]) == ["start gfx90a max_jobs=2", "start gfx90a;gfx942 max_jobs=3"]
    assert sorted(lines[2:4]) == ["end gfx90a", "end gfx90a;gfx942"]
    assert lines[4:] == ["start gfx942 max_jobs=2", "end gfx942"]
    # Each build started and was polled on its own build host.
    assert delegated.count("b1") >= 4 and delegated.count("b2") >= 2
    # ccache on (the default): the build recorded its statistics, or null where this machine has no ccache.
    assert all(
        value["ccache"] is None or set(value["ccache"]) == {"hits", "misses", "hit_rate"} for value in shown.values()
    )


def test_one_build_host_builds_every_arch_list_one_after_another(tmp_path):
    shown, lines, delegated = farm(tmp_path, ["b1"], [["gfx90a"], ["gfx90a;gfx942"], ["gfx942"]])
    assert shown["i1"]["assigned"] == dict.fromkeys(["gfx90a", "gfx90a;gfx942", "gfx942"], "b1")
    assert shown["i1"]["farm"] == ["b1"] and {value["mine"] for value in shown.values()} == {"b1"}
    assert lines == [
        "start gfx90a max_jobs=2",
        "end gfx90a",
        "start gfx90a;gfx942 max_jobs=2",
        "end gfx90a;gfx942",
        "start gfx942 max_jobs=2",
        "end gfx942",
    ]
    assert set(delegated) == {"b1"}
