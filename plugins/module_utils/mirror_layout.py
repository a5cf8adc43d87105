# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where an upstream git repository (git/HOST/PATH.git) or file (files/HOST/PATH) lives inside an instinct-stack mirror.

`instinct-stack mirror build` lays repositories out with it and the roles find them with it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 controllers are not supported, targets never import this
    from urlparse import urlsplit  # type: ignore


def mirror_path(url):
    """git/HOST/PATH.git for an upstream URL such as https://github.com/pytorch/pytorch.git."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if not path.endswith(".git"):
        path += ".git"
    return "git/%s/%s" % (parts.hostname or "local", path)


def mirror_file_path(url):
    """files/HOST/PATH for an upstream file URL (a prebuilt LLVM, an AOTriton tarball), as the mirror stores it."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if not path or parts.scheme not in ("http", "https"):
        raise ValueError("not a file URL: %r" % (url,))
    return "files/%s/%s" % (parts.hostname, path)


def mirror_file_url(url, base):
    """The mirror's URL for an upstream file, or the upstream URL itself when there is no mirror."""
    if not base:
        return url
    return "%s/%s" % (base.rstrip("/"), mirror_file_path(url))


def mirror_url(url, base):
    """The mirror's URL for an upstream repository, or the upstream URL itself when there is no mirror."""
    if not base:
        return url
    return "%s/%s" % (base.rstrip("/"), mirror_path(url))


def git_repository_name(url):
    """The owner/name of a git repository URL (https://github.com/ROCm/pytorch.git, git@github.com:ROCm/pytorch,
    a mirror's .../git/github.com/ROCm/pytorch.git all give ROCm/pytorch); "" when the URL has no such two parts."""
    path = str(url or "").strip().rstrip("/")
    if "://" not in path and ":" in path:  # scp-like git@host:owner/name
        path = path.split(":", 1)[1]
    elif "://" in path:
        path = path.split("://", 1)[1].split("/", 1)[-1] if "/" in path.split("://", 1)[1] else ""
    if path.endswith(".git"):
        path = path[: -len(".git")]
    parts = [part for part in path.split("/") if part]
    return "/".join(parts[-2:]) if len(parts) >= 2 else ""


def git_mirror_rewrites(hosts, base):
    """git url.<base>.insteadOf rules that send every https://HOST/ URL of hosts to the mirror's git/HOST/.

    Submodules name their repositories with absolute upstream URLs (PyTorch's .gitmodules: https://github.com/...);
    rewriting by prefix sends them, and any repository on those hosts, to the mirror, where `instinct-stack mirror
    build` stored them at git/HOST/PATH.git. Empty without a mirror.
    """
    if not base:
        return {}
    return dict(("https://%s/" % host, "%s/git/%s/" % (base.rstrip("/"), host)) for host in hosts)


def git_config_env(rewrites):
    """Environment that gives git the rewrites as configuration (GIT_CONFIG_COUNT, git >= 2.31), for one command.

    Nothing is written to a gitconfig on the host, so the rewrites hold for the roles' clones and submodule updates
    and nothing else.
    """
    env = {}
    for index, prefix in enumerate(sorted(rewrites or {})):
        env["GIT_CONFIG_KEY_%d" % index] = "url.%s.insteadOf" % rewrites[prefix]
        env["GIT_CONFIG_VALUE_%d" % index] = prefix
    if env:
        env["GIT_CONFIG_COUNT"] = str(len(rewrites))
    return env
