"""The molecule guests are minimal servers: the image holds what a minimal install holds, and nothing the roles need.

A package the image preinstalls hides a role that forgot to install it (python3-venv, python3-dev, git, the
compilers and python3-debian once hid exactly that). The roles install the rest themselves.
"""

import os
import re

from instinct_stack.collection import collection_module
from tests.harness import build_mirror

# Through the collection loader, which build_mirror's import of instinct_stack.mirror installs.
converged = collection_module("converged")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_IMAGE = os.path.join(ROOT, "molecule", "shared", "vm", "build-image.sh")
# A minimal Debian 12 or Ubuntu server (netinst with "SSH server" only, or Ubuntu Server minimized): the kernel and
# its boot, systemd, an SSH server, sudo, python3 for Ansible, and the base tools every such install has.
MINIMAL_SERVER = {
    "linux-image-amd64",
    "systemd-sysv",
    "udev",
    "dbus",
    "openssh-server",
    "sudo",
    "python3",
    "kmod",
    "iproute2",
    "ca-certificates",
    "procps",
    "less",
}
# The verifiers' own tool on the hosts, which no role may rely on (below).
VERIFIER_TOOLS = {"curl"}


def image_packages():
    with open(BUILD_IMAGE) as handle:
        text = handle.read()
    packages = set()
    for match in re.finditer(r"^packages\+?=(\S+)$", text, re.M):
        packages.update(name for name in match.group(1).split(",") if name)
    return packages


def test_the_guest_image_holds_a_minimal_server_and_the_verifiers_tools_only():
    packages = image_packages()
    assert packages - MINIMAL_SERVER - VERIFIER_TOOLS == set()
    for needed_by_the_roles in (
        "python3-venv",
        "python3-dev",
        "git",
        "g++",
        "make",
        "python3-debian",
        "python3-apt",
        "nginx",
    ):
        assert needed_by_the_roles not in packages


def test_no_role_relies_on_the_verifiers_tools():
    offenders = []
    for top, _dirs, names in os.walk(os.path.join(ROOT, "roles")):
        for name in names:
            path = os.path.join(top, name)
            with open(path, errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    if line.lstrip().startswith("#"):
                        continue
                    if any(re.search(r"\b%s\b" % tool, line) for tool in VERIFIER_TOOLS):
                        offenders.append("%s:%d" % (os.path.relpath(path, ROOT), number))
    assert offenders == []


def test_the_fixture_mirror_carries_every_distribution_package_the_roles_declare():
    # The roles' declarations (roles/*/meta/managed.yml, packages) at their defaults; the ROCm packages come from the
    # ROCm and amdgpu repositories, not from the distribution.
    prefix, suffix = "/var/lib/dpkg/info/", ".list"
    declared = {
        path[len(prefix) : -len(suffix)].split(":")[0]  # NAME.list and NAME:ARCH.list, dpkg's two names
        for path in converged.watch_list({})["files"]
        if path.startswith(prefix) and path.endswith(suffix)
    }
    assert "nginx" in declared
    assert declared - {"rocm", "amdgpu-dkms"} <= set(build_mirror.ROLE_PACKAGES)
