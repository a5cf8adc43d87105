# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Python ABI a host's stack runs on, and whether a fleet shares one.

The stack's wheels are built on a build host against its python3 and its C library: a CPython 3.11 wheel tagged
cp311-cp311-linux_x86_64 and linked against glibc 2.36 (Debian 12) does not install on CPython 3.10 (Ubuntu 22.04)
or 3.13 (Debian 13), and may not load on an older glibc. One rollout builds one stack per arch list, so the hosts that
build and the hosts that install must share one ABI: the interpreter tag (PEP 425, cp311), the platform
(sysconfig.get_platform(), the machine) and the C library with its version (platform.libc_ver()). Equal glibc versions
are asked for, not merely older-or-equal: the C++ runtime moves with a release too, and the check stays simple.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# Run by the python3 the stack's virtualenvs are made from; prints one JSON object.
PROBE = (
    "import json, platform, sys, sysconfig; "
    "print(json.dumps({'implementation': sys.implementation.name, 'version': platform.python_version(), "
    "'version_info': list(sys.version_info[:2]), 'soabi': sysconfig.get_config_var('SOABI'), "
    "'platform': sysconfig.get_platform(), 'libc': list(platform.libc_ver())}))"
)

# PEP 425 abbreviations of the implementations that tag wheels.
IMPLEMENTATION_TAGS = {"cpython": "cp", "pypy": "pp"}

# Hosts named in a refusal before the rest are counted.
NAMED_HOSTS = 5


def describe(probe_output):
    """The ABI from PROBE's output: {"key", "python", "interpreter", "platform", "libc", "soabi"}; key is what hosts
    must share (for example cp311-linux_x86_64-glibc2.36)."""
    try:
        found = json.loads(probe_output)
        implementation = found["implementation"]
        major, minor = found["version_info"]
        libc_name, libc_version = found["libc"]
        platform = str(found["platform"]).replace("-", "_").replace(".", "_")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("unexpected output from the Python ABI probe (%s): %r" % (exc, probe_output)) from None
    interpreter = "%s%d%d" % (IMPLEMENTATION_TAGS.get(implementation, implementation), major, minor)
    libc = "%s%s" % (libc_name, libc_version) if libc_name else "unknown-libc"
    return {
        "key": "%s-%s-%s" % (interpreter, platform, libc),
        "python": found.get("version"),
        "interpreter": interpreter,
        "platform": platform,
        "libc": libc,
        "soabi": found.get("soabi"),
    }


def _named(hosts):
    hosts = sorted(hosts)
    if len(hosts) <= NAMED_HOSTS:
        return ", ".join(hosts)
    return "%s and %d more" % (", ".join(hosts[:NAMED_HOSTS]), len(hosts) - NAMED_HOSTS)


def fleet_problem(abis):
    """A sentence naming the ABIs and their hosts when the hosts (host name to describe()'s dict, or None for a host
    not probed) do not share one; "" when they do."""
    unknown = sorted(host for host, abi in abis.items() if not abi or not abi.get("key"))
    if unknown:
        return "the Python ABI of %s is unknown: run instinct.stack.python_abi on it first" % _named(unknown)
    by_key = {}
    for host, abi in abis.items():
        by_key.setdefault(abi["key"], []).append(host)
    if len(by_key) <= 1:
        return ""
    groups = "; ".join(
        "%s (Python %s): %s" % (key, abis[hosts[0]].get("python"), _named(hosts))
        for key, hosts in sorted(by_key.items(), key=lambda item: (-len(item[1]), item[0]))
    )
    return (
        "the hosts run Pythons of %d ABIs, and a stack built on one installs on that ABI only: %s. Roll out the hosts "
        "of each ABI as a run of their own, with a build host of that ABI (for example an inventory or --limit per "
        "distribution release)" % (len(by_key), groups)
    )
