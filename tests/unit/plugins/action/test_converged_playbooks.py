"""The converged fast path in real ansible-playbook runs of site.yml's own plays, on local-connection hosts.

The playbook is playbooks/site.yml with each role play's roles (imported in its tasks) replaced by a stand-in debug
task that says the play ran on the host (the build play's names the host build_host resolves to, with the build role's
own default), and without become. Everything else is site.yml's: the lock play, the check play, the host patterns that
leave out the converged hosts, the record before the lock's give-back. The hosts' records, locks and stacks live under
tmp_path; a systemctl on PATH answers for the services from a file. Shown: a whole run records each host; the next
skips the role plays on a converged host and keeps the build host where it was; a changed input, a changed recorded
file, a moved current link (a rollback) or a stopped unit runs that host in full again; tags, --check and
instinct_converged_check=false run every host in full and record nothing new; a host that failed is not recorded;
the API key of an instance reaches neither the output nor the record.
"""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
SITE = ROOT / "playbooks" / "site.yml"
ROLE_PLAYS = ("prepare", "build", "serve")
SECRET = "converged-canary-key-7d41"  # noqa: S105 - a test value, searched for in the output
UNIT = "vllm-fixture.service"


def stand_in_site():
    """site.yml with a stand-in task for each role play's roles (no become: the hosts are this user's)."""
    build_host = yaml.safe_load((ROOT / "roles" / "build" / "defaults" / "main.yml").read_text())["build_host"]
    plays = yaml.safe_load(SITE.read_text())
    for play in plays:
        if "ansible.builtin.import_playbook" in play:  # the inputs' check, site.yml's own
            play["ansible.builtin.import_playbook"] = str(ROOT / "playbooks" / play["ansible.builtin.import_playbook"])
            continue
        play["become"] = False
        for task in play.get("tasks", []):
            if "ansible.builtin.import_tasks" in task:
                task["ansible.builtin.import_tasks"] = str(ROOT / "playbooks" / task["ansible.builtin.import_tasks"])
        # The role plays, which import their roles in their tasks (site.yml's prepare, build and serve).
        if play.get("tags") not in [[tag] for tag in ROLE_PLAYS]:
            continue
        (tag,) = play["tags"]
        assert all("ansible.builtin.import_role" in task for task in play["tasks"]), play["name"]
        play["tasks"] = [
            {
                "name": "Fail where the inventory says so",
                "ansible.builtin.fail": {"msg": "stand-in failure"},
                "when": "stand_in_fail | default('') == '%s'" % tag,
            },
            {
                # A debug task: the output says where the play ran, at no cost on the host.
                "name": "Stand in for the %s roles" % tag,
                "ansible.builtin.debug": {
                    "msg": "stand-in %s ran on {{ inventory_hostname }}, built on {{ build_host }}" % tag
                    if tag == "build"
                    else "stand-in %s ran on {{ inventory_hostname }}" % tag
                },
                "vars": {"build_host": build_host} if tag == "build" else {},
            },
        ]
        if tag == "prepare":
            # What the rocm role leaves for the record's summary.
            play["tasks"].append(
                {
                    "name": "Stand in for the rocm role's facts",
                    "ansible.builtin.set_fact": {
                        "rocm_gfx_arch": ["gfx942"],
                        "rocm_pytorch_rocm_arch": "gfx942",
                        "rocm_driver": {"reboot_pending": True, "load_failed": False, "reason": "reboot to load it"},
                    },
                }
            )
    return plays


class Site:
    def __init__(self, path, hosts):
        self.path, self.hosts = path, hosts
        self.playbook = path / "site.yml"
        self.playbook.write_text(yaml.safe_dump(stand_in_site(), sort_keys=False))
        bin_dir = path / "bin"
        bin_dir.mkdir()
        self.units = bin_dir / "active-units"
        self.set_units([UNIT])
        systemctl = bin_dir / "systemctl"
        systemctl.write_text(
            '#!/bin/sh\n# list-units: the active units listed in active-units\ncat "%s"\n' % self.units
        )
        systemctl.chmod(systemctl.stat().st_mode | stat.S_IXUSR)
        self.hostvars = {}
        for name in hosts:
            stacks = self.stacks(name)
            for key in ("A", "B"):
                (stacks / "stacks" / key).mkdir(parents=True)
                (stacks / "stacks" / key / ".verified").write_text(json.dumps({"key": key, "vllm": "0.11.0"}))
            (stacks / "current").symlink_to(stacks / "stacks" / "A")
            (stacks / "previous").symlink_to(stacks / "stacks" / "B")
            self.hostvars[name] = {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "vllm_stack_root": str(stacks),
                "instinct_rollout_lock_path": str(path / name / "rollout.lock"),
                "instinct_converged_path": str(path / name / "converged.json"),
                "vllm_service_instances": [{"name": "fixture", "model": "fixture-model", "api_key": SECRET}],
            }
        self.write_inventory()
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
        self.env.update(
            ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
            ANSIBLE_NOCOLOR="1",
            PATH="%s:%s" % (bin_dir, os.environ["PATH"]),
        )
        self.output = ""

    def stacks(self, name):
        return self.path / name / "stack"

    def write_inventory(self):
        inventory = {"inference_hosts": {"hosts": self.hostvars}}
        (self.path / "hosts.yml").write_text(yaml.safe_dump(inventory))

    def set_units(self, units):
        self.units.write_text("".join("%s loaded active running vLLM\n" % unit for unit in units))

    def run(self, *args):
        proc = subprocess.run(
            [str(PLAYBOOK), "-i", str(self.path / "hosts.yml"), str(self.playbook), *args],
            capture_output=True,
            text=True,
            cwd=self.path,
            env=self.env,
            timeout=180,
            check=False,  # the tests read the exit code
        )
        self.output = proc.stdout + proc.stderr
        return proc.returncode, self.output

    def ran(self, name):
        """The role plays that ran on host name in the last run."""
        return [tag for tag in ROLE_PLAYS if "stand-in %s ran on %s" % (tag, name) in self.output]

    def build_host(self, name):
        return re.search(r"stand-in build ran on %s, built on (\w+)" % name, self.output).group(1)

    def record(self, name):
        path = self.path / name / "converged.json"
        return json.loads(path.read_text()) if path.exists() else None


@pytest.fixture
def site(tmp_path):
    return lambda count: Site(tmp_path, tuple("gpu%d" % number for number in range(1, count + 1)))


def flat(text):
    """The output without whitespace: the default callback wraps long lines."""
    return "".join(text.split())


def converged_line(name):
    return flat("%s is converged: nothing to do (instinct_converged_check=false forces a full run)" % name)


def recap(output, name):
    match = re.search(r"^%s\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)" % name, output, re.M)
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()), strict=True))


def test_a_whole_run_records_and_the_next_skips_the_converged_hosts(site):
    site = site(3)
    # gpu3 fails in the prepare play: it leaves the rollout and is not recorded.
    site.hostvars["gpu3"]["stand_in_fail"] = "prepare"
    site.write_inventory()
    code, output = site.run()
    assert code == 2 and "stand-in failure" in output, output
    assert "is converged" not in output
    for name in ("gpu1", "gpu2"):
        assert site.ran(name) == list(ROLE_PLAYS)
        assert site.build_host(name) == "gpu1"  # no build_hosts group: the first host of the play
        record = site.record(name)
        assert re.match(r"^[0-9a-f]{64}$", record["fingerprint"]) and record["units"] == [UNIT]
        assert record["current"] == str(site.stacks(name) / "stacks" / "A")
        assert record["summary"] == {
            "gfx_arch": ["gfx942"],
            "pytorch_rocm_arch": "gfx942",
            "reboot": {"pending": True, "load_failed": False, "reason": "reboot to load it"},
        }
        assert stat.S_IMODE((site.path / name / "converged.json").stat().st_mode) == 0o600
    assert site.record("gpu3") is None
    first = {name: site.record(name) for name in ("gpu1", "gpu2")}

    # gpu1 and gpu2 are converged; gpu3 has no record and runs in full (it takes over the failed run's lock).
    del site.hostvars["gpu3"]["stand_in_fail"]
    site.write_inventory()
    code, output = site.run("-v")
    assert code == 0, output
    for name in ("gpu1", "gpu2"):
        assert site.ran(name) == []
        assert converged_line(name) in flat(output)
        assert recap(output, name)["changed"] == 0
        assert site.record(name) == first[name]  # not rewritten
    assert site.ran("gpu3") == list(ROLE_PLAYS) and converged_line("gpu3") not in flat(output)
    assert flat('"reasons": ["no record"]') in flat(output)
    # The build play runs on gpu3 alone and still builds on gpu1, the first host it would have in a full run.
    assert site.build_host("gpu3") == "gpu1"
    # A converged host is left out of the role plays' host patterns, which name no missing group.
    assert "Could not match supplied host pattern" not in output
    assert site.record("gpu3")

    # gpu2's input changed; at -vvv the API key of its instances shows nowhere, and no record holds it.
    site.hostvars["gpu2"]["build_rocm_arch"] = "gfx90a"
    site.write_inventory()
    code, output = site.run("-vvv")
    assert code == 0, output
    assert [site.ran(name) for name in site.hosts] == [[], list(ROLE_PLAYS), []]
    assert flat('"reasons": ["the inputs changed"]') in flat(output)
    assert site.build_host("gpu2") == "gpu1"
    assert site.record("gpu2")["fingerprint"] != first["gpu2"]["fingerprint"]
    assert SECRET not in output
    for name in site.hosts:
        assert SECRET not in (site.path / name / "converged.json").read_text()


def test_a_changed_host_runs_in_full_again(site):
    site = site(3)
    code, output = site.run()
    assert code == 0, output
    # gpu1: a file the record holds changed. gpu2: a rollback swapped its current and previous links, as
    # playbooks/rollback.yml does. gpu3: its current stack lost its record of verification.
    (site.stacks("gpu1") / "stacks" / "A" / ".verified").write_text(json.dumps({"key": "A", "vllm": "0.12.0"}))
    for link, key in (("current", "B"), ("previous", "A")):
        (site.stacks("gpu2") / link).unlink()
        (site.stacks("gpu2") / link).symlink_to(site.stacks("gpu2") / "stacks" / key)
    (site.stacks("gpu3") / "stacks" / "A" / ".verified").unlink()
    code, output = site.run("-v")
    assert code == 0, output
    assert [site.ran(name) for name in site.hosts] == [list(ROLE_PLAYS)] * 3
    reasons = {
        "gpu1": ["%s/current/.verified changed" % site.stacks("gpu1")],
        "gpu2": ["current moved", "%s/current/.verified changed" % site.stacks("gpu2"), "previous moved"],
        "gpu3": ["stacks/A has no .verified"],
    }
    for name, expected in reasons.items():
        assert flat('"reasons": %s' % json.dumps(expected)) in flat(output), name
    assert site.record("gpu2")["current"] == str(site.stacks("gpu2") / "stacks" / "B")

    # The service stopped everywhere: every host runs in full.
    site.set_units([])
    code, output = site.run("-v")
    assert code == 0, output
    assert [site.ran(name) for name in site.hosts] == [list(ROLE_PLAYS)] * 3
    assert flat('"reasons": ["%s is not active"]' % UNIT) in flat(output)
    assert site.record("gpu1")["units"] == []


def test_tags_check_mode_and_the_switch_run_every_host_in_full(site):
    site = site(2)
    code, output = site.run()
    assert code == 0, output
    records = {name: site.record(name) for name in site.hosts}
    for args, plays in (
        (("--tags", "serve"), ["serve"]),
        (("--skip-tags", "build"), ["prepare", "serve"]),
        (("--check",), list(ROLE_PLAYS)),
        (("-e", "instinct_converged_check=false"), list(ROLE_PLAYS)),
    ):
        code, output = site.run(*args)
        assert code == 0, output
        assert "is converged" not in output, args
        assert [site.ran(name) for name in site.hosts] == [plays] * 2, args
        # Recorded again only by the run that checked (the switch off): the same fingerprint and host, no change.
        assert {name: site.record(name) for name in site.hosts} == records, args
        if args[0] != "-e":
            assert re.search(
                r"TASK \[Record the hosts that ran the whole rollout.*\n(skipping: \[gpu\d\]\n){2}", output
            )
    # Every host converged: each role play matches no host; skipping tags that select nothing in site.yml (as
    # molecule's converge does) keeps the run whole.
    code, output = site.run("--skip-tags", "molecule-notest,notest")
    assert code == 0, output
    assert [site.ran(name) for name in site.hosts] == [[]] * 2
    assert output.count("skipping: no hosts matched") == 4  # prepare, build, the serve order, serve
