# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the stack's source builds are the pairing the pinned vLLM was released with.

Each vLLM release's requirements/rocm-build.txt pins the torch, torchvision and triton it builds against (v0.11.0:
torch==2.8.0, torchvision==0.23.0, triton==3.3.0; v0.11.1: torch==2.9.0, torchvision==0.24.0, triton==3.5.0). A
torch or a Triton of another release builds, then fails at run time ("kernel not found", missing operators): the
check compares the releases (2.9.0a0 and 2.9.0+rocm7.0.2 are 2.9.0) before anything builds.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The components the stack builds from source, by the names vLLM's requirements pin them.
BUILT_COMPONENTS = ("torch", "torchvision", "triton")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][^\s;#]*)")
_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


def release(version):
    """The release numbers of a version or a tag (v2.9.0, 2.9.0a0, 2.9.0+rocm7.0.2, v0.24.0-fixture), or None."""
    match = _RELEASE.match(str(version).strip())
    if not match:
        return None
    parts = [int(part) for part in match.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def pinned_versions(requirements_text):
    """name -> version of each exact pin (name==version) in a requirements file; options and comments are skipped."""
    pins = {}
    for line in str(requirements_text).splitlines():
        match = _PIN.match(line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def pairing_problems(requirements_text, built, source="requirements/rocm-build.txt"):
    """One sentence per component whose built release differs from the release the requirements pin.

    built maps component names (torch, torchvision, triton) to the version or tag the stack builds; a component
    missing from built, or not pinned in the requirements, is not compared.
    """
    pins = pinned_versions(requirements_text)
    problems = []
    for name in BUILT_COMPONENTS:
        if name not in pins or not built.get(name):
            continue
        wanted, have = release(pins[name]), release(built[name])
        if have is None:
            continue
        if wanted != have:
            problems.append(
                "%s pins %s==%s, but the stack builds %s %s" % (source, name, pins[name], name, built[name])
            )
    return problems
