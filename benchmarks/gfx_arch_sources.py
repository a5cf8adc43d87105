"""Time instinct.stack.gfx_arch's detection per source, on captured MI300X (8 GPUs) outputs.

    .venv/bin/python -m benchmarks.gfx_arch_sources [--repeat N]

Two figures per source: the detection itself (module_utils, in process, best of N runs of 200 calls),
and the module end to end as a playbook task on localhost (`ansible localhost -m`, best of N), which
adds Ansible's own start-up, the AnsiballZ packaging and a Python start on the target.
"""

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import timeit

from instinct_stack.collection import collection_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
detect = collection_module("gfx_detect").detect
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def pci_tree(tmp):
    with open(os.path.join(FIXTURES, "pci", "mi300x-2gpu.json")) as handle:
        devices = json.load(handle)
    for address, files in devices.items():
        device = os.path.join(tmp, "bus", "pci", "devices", address)
        os.makedirs(device)
        for name, value in files.items():
            with open(os.path.join(device, name), "w") as handle:
                handle.write(value + "\n")
    return tmp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    rocminfo = os.path.join(tmp, "rocminfo")
    with open(rocminfo, "w") as handle:
        handle.write("#!/bin/sh\ncat %s\n" % os.path.join(FIXTURES, "rocminfo", "mi300x-8gpu.txt"))
    os.chmod(rocminfo, 0o700)
    kfd_root = os.path.join(FIXTURES, "kfd", "mi300x-8gpu")
    pci_root = pci_tree(os.path.join(tmp, "sys"))
    with open(os.path.join(FIXTURES, "rocminfo", "mi300x-8gpu.txt")) as handle:
        rocminfo_text = handle.read()
    cases = {
        "kfd": (kfd_root, None, "source=kfd sysfs_root=%s" % kfd_root),
        "rocminfo (parse only)": (tmp, lambda: (0, rocminfo_text, ""), None),
        "rocminfo (runs the binary)": (
            tmp,
            lambda: tuple([0, subprocess.run([rocminfo], capture_output=True, text=True, check=True).stdout, ""]),
            None,
        ),
        "rocminfo": (None, None, "source=rocminfo rocminfo_path=%s" % rocminfo),
        "pci": (pci_root, None, "source=pci sysfs_root=%s" % pci_root),
    }
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    print("%-28s %16s %18s" % ("source", "detect() [ms]", "module task [ms]"))
    for name, (root, runner, adhoc) in cases.items():
        source = name.split()[0]
        in_process = "-"
        if root is not None:
            calls = 200 if "binary" not in name else 20
            call = functools.partial(detect, source, root, runner)
            best = min(timeit.repeat(call, number=calls, repeat=args.repeat))
            in_process = "%.3f" % (best / calls * 1000)
        end_to_end = "-"
        if adhoc:
            runs = []
            for _run in range(args.repeat):
                start = time.perf_counter()
                subprocess.run(
                    [ansible, "localhost", "-m", "instinct.stack.gfx_arch", "-a", adhoc],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    check=True,
                )
                runs.append(time.perf_counter() - start)
            end_to_end = "%.0f" % (min(runs) * 1000)
        print("%-28s %16s %18s" % (name, in_process, end_to_end))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
