# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where an upstream git repository lives inside an instinct-stack mirror (git/HOST/PATH.git).

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


def mirror_url(url, base):
    """The mirror's URL for an upstream repository, or the upstream URL itself when there is no mirror."""
    if not base:
        return url
    return "%s/%s" % (base.rstrip("/"), mirror_path(url))
