"""What one task run costs the controller, by kind of task: the figure that decides which tasks to fold (issue 29).

A playbook of TASKS tasks of one kind runs against HOSTS inventory hosts; the controller CPU of the run
(ansible-playbook and every process it started, from getrusage) less that of the same playbook with no task, divided by
HOSTS x TASKS, is the cost of one task run on one host.

    .venv/bin/python -m benchmarks.task_cost --hosts 8 --tasks 40          # local connection
    .venv/bin/python -m benchmarks.task_cost --ssh --hosts 4 --tasks 20    # nspawn hosts over ssh, as root

Without --ssh the hosts use the local connection: no ssh is in the figures, and a kind that runs a module includes the
module's own run on the "host", here the controller. With --ssh they are the systemd-nspawn machines benchmarks.scale
boots (its image, bridge and ssh settings, pipelining and ControlPersist as ansible.cfg), so a module runs on the host
and the figure is the controller's side alone: the worker, the ssh client, the payload and the result.

Kinds: skipped (a task whose `when` is false), set_fact, assert, debug, loop4 (one set_fact task over a loop of four
items, per item), and the modules stat, file, copy (a file's content) and template.
"""

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

KINDS = {
    "skipped": '- name: "Skipped {n}"\n  ansible.builtin.set_fact:\n    fact_{n}: 1\n  when: false\n',
    "set_fact": '- name: "Set {n}"\n  ansible.builtin.set_fact:\n    fact_{n}: "{{{{ inventory_hostname }}}}"\n',
    "assert": (
        '- name: "Assert {n}"\n  ansible.builtin.assert:\n    that: inventory_hostname | length > 0\n    quiet: true\n'
    ),
    "debug": '- name: "Debug {n}"\n  ansible.builtin.debug:\n    msg: "{{{{ inventory_hostname }}}}"\n',
    "stat": '- name: "Stat {n}"\n  ansible.builtin.stat:\n    path: /etc/hostname\n    get_checksum: false\n',
    "file": '- name: "File {n}"\n  ansible.builtin.file:\n    path: /tmp\n    state: directory\n',
    "copy": (
        '- name: "Copy {n}"\n  ansible.builtin.copy:\n    content: "{{{{ inventory_hostname }}}}\\n"\n'
        '    dest: /tmp/task-cost-{n}\n    mode: "0644"\n'
    ),
    "template": (
        '- name: "Template {n}"\n  ansible.builtin.template:\n    src: "{{{{ playbook_dir }}}}/line.j2"\n'
        '    dest: /tmp/task-cost-{n}.t\n    mode: "0644"\n'
    ),
    "loop4": (
        '- name: "Loop {n}"\n  ansible.builtin.set_fact:\n    fact_{n}: "{{{{ item }}}}"\n  loop: [1, 2, 3, 4]\n'
    ),
}


def playbook(kind, tasks, become):
    body = "".join(KINDS[kind].format(n=n) for n in range(tasks)) if kind else ""
    head = "- name: Task cost\n  hosts: all\n  gather_facts: false\n  become: %s\n  tasks:\n" % str(become).lower()
    if not body:
        return head + "    - name: Nothing\n      ansible.builtin.meta: noop\n"
    return head + "".join("    " + line + "\n" for line in body.splitlines())


def local_inventory(workdir, hosts):
    inventory = os.path.join(workdir, "hosts.ini")
    with open(inventory, "w") as handle:
        handle.write("[all]\n")
        for number in range(hosts):
            handle.write("h%d ansible_connection=local ansible_python_interpreter=%s\n" % (number, sys.executable))
    return inventory, dict(os.environ)


@contextlib.contextmanager
def ssh_hosts(workdir, count, forks):
    """count nspawn machines as benchmarks.scale boots them; yields their inventory and ansible's environment."""
    from benchmarks import scale
    from tests.harness import fixture_hosts
    from tests.harness.nspawnctl import ImageMount

    scale.install_stop_handlers()
    identity = os.path.join(workdir, "id_ed25519")
    scale.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", identity])
    image = ImageMount(fixture_hosts.guest_image(), os.path.join(workdir, "image"))
    image.unmount()
    lower = image.mount()
    try:
        with scale.BRIDGE, scale.hosts_running(workdir, lower, count, identity) as hosts:
            inventory = os.path.join(workdir, "hosts.json")
            scale.write_inventory(inventory, hosts, identity, "http://%s:1" % scale.BRIDGE_ADDRESS)
            yield inventory, fixture_hosts.ansible_env(workdir, "task-cost", forks, False)
            fixture_hosts.close_ssh_masters(workdir, "task-cost")
    finally:
        image.unmount()


def run(workdir, kind, inventory, env, tasks, forks, become):
    """One playbook run; become as site.yml's plays over ssh (sudo on the host), the local hosts run as root."""
    path = os.path.join(workdir, "play-%s.yml" % (kind or "none"))
    with open(path, "w") as handle:
        handle.write(playbook(kind, tasks, become))
    with open(os.path.join(workdir, "line.j2"), "w") as handle:
        handle.write("{{ inventory_hostname }}\n")
    env = dict(env, ANSIBLE_FORKS=str(forks), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.null")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, path], check=True, env=env, stdout=subprocess.DEVNULL)  # noqa: S603
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=list(KINDS))
    parser.add_argument("--ssh", action="store_true", help="nspawn hosts over ssh (as root) instead of local ones")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="task-cost-") as workdir:
        hosts = (
            ssh_hosts(workdir, args.hosts, args.forks)
            if args.ssh
            else contextlib.nullcontext(local_inventory(workdir, args.hosts))
        )
        with hosts as (inventory, env):
            # The first run opens the ssh masters (and finds the interpreter): left out of every figure.
            run(workdir, None, inventory, env, args.tasks, args.forks, args.ssh)
            _seconds, base_cpu = run(workdir, None, inventory, env, args.tasks, args.forks, args.ssh)
            print("no task: controller CPU %.2f s (subtracted below)" % base_cpu)
            print("%-9s %9s %9s %22s" % ("kind", "wall s", "CPU s", "CPU ms per task run"))
            for kind in args.kinds:
                seconds, cpu = run(workdir, kind, inventory, env, args.tasks, args.forks, args.ssh)
                runs = args.hosts * args.tasks * (4 if kind == "loop4" else 1)
                print("%-9s %9.1f %9.2f %22.1f" % (kind, seconds, cpu, 1000 * (cpu - base_cpu) / runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
