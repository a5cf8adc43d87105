#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_pull
short_description: Pull a model revision from a models store or mirror, every file checked against its manifest
version_added: "0.3.0"
description:
  - Reads the revision's manifest (every file's size and sha256) from O(url)/ORG--NAME/COMMIT.json, the layout
    M(instinct.stack.model_fetch) publishes and C(instinct-stack mirror build) mirrors.
  - Checks the free space of O(root) against the bytes still to download first, and fails with what to do.
  - Downloads into O(root)/ORG--NAME/.COMMIT.partial (a file cut short is resumed with an HTTP range request), checks
    every file's sha256, and publishes the directory as O(root)/ORG--NAME/COMMIT with one rename and the manifest
    beside it. A file that differs from the manifest is removed and named in the failure.
  - A host that holds the revision already (its manifest, the files of its sizes) downloads nothing.
  - Prunes the repository's older revisions down to O(keep), never one of O(protected).
author:
  - instinct.stack contributors (@instinct-stack)
options:
  url:
    description: Where the models are served, the base of ORG--NAME/COMMIT.json.
    type: str
    required: true
  repo:
    description: The repository, ORG/NAME.
    type: str
    required: true
  revision:
    description: The commit (40 hex digits).
    type: str
    required: true
  root:
    description: The models directory on this host.
    type: path
    required: true
  keep:
    description: Published revisions of the repository kept besides O(protected), the newest first.
    type: int
    default: 2
  protected:
    description: Revisions never pruned (the one a service uses and the previous one).
    type: list
    elements: str
    default: []
  served:
    description:
      - A directory of links to revision directories (the vLLM instances' model links); every revision of O(repo)
        a link there resolves to is protected like those in O(protected).
    type: path
attributes:
  check_mode:
    description: Reads the manifest and checks the space; downloads nothing.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
"""

EXAMPLES = r"""
- name: Pull the model from the build host's store
  instinct.stack.model_pull:
    url: http://10.0.0.5:8070/models
    repo: meta-llama/Llama-3.1-8B-Instruct
    revision: 0e9e39f249a16976918f6564b8830bc894c89659
    root: /var/lib/instinct-stack/models
"""

RETURN = r"""
directory:
  description: The revision's directory on the host, which a service serves.
  returned: success
  type: str
size:
  description: Bytes of the revision's files.
  returned: success
  type: int
downloaded:
  description: Bytes downloaded by this run.
  returned: success
  type: int
pruned:
  description: Revisions (and leftover partial directories) removed.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils import model_pull, models


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "repo": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "root": {"type": "path", "required": True},
            "keep": {"type": "int", "default": 2},
            "protected": {"type": "list", "elements": "str", "default": []},
            "served": {"type": "path"},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        models.check_repo(params["repo"])
        result = model_pull.pull(
            params["url"],
            params["root"],
            params["repo"],
            params["revision"],
            keep=params["keep"],
            protected=params["protected"],
            check_mode=module.check_mode,
            served=params["served"],
        )
    except models.ModelError as exc:
        module.fail_json(msg=str(exc))
    # "directory", not "path": exit_json would add the path's own stat (its size among it) to the result.
    result["directory"] = result.pop("path")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
