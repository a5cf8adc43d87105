#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_fetch
short_description: Fetch a model revision from a Hugging Face Hub into a models store, every file verified
version_added: "0.3.0"
description:
  - Resolves O(revision) (a commit, or a branch or tag, resolved once) to its commit with C(huggingface_hub), the
    Hub's maintained client, and downloads the files O(files) selects into O(root)/ORG--NAME/.COMMIT.partial.
  - Checks every file against what the Hub publishes for it - the sha256 of an LFS file (the weights), the git blob
    sha1 of any other - since the client checks only sizes; a file that differs is removed and the module fails,
    naming it. Then publishes the directory as O(root)/ORG--NAME/COMMIT with one rename and writes the manifest
    (every file's size and sha256) beside it as COMMIT.json, which the hosts pull by (M(instinct.stack.model_pull)).
  - A commit already published there (its manifest, the files of its sizes) is not fetched again.
  - Checks the free space of O(root) against the files' sizes before it downloads anything.
  - Runs with an interpreter that can import C(huggingface_hub) (set C(ansible_python_interpreter) for the task).
    The client makes no telemetry request and uses plain HTTP downloads (no Xet, no hf_transfer), so O(endpoint)
    can be a site's own Hub or mirror.
author:
  - instinct.stack contributors (@instinct-stack)
options:
  repo:
    description: The repository, ORG/NAME.
    type: str
    required: true
  revision:
    description: A commit (40 hex digits), or a branch or tag that is resolved to its commit now and reported.
    type: str
    required: true
  files:
    description: fnmatch patterns of the repository's paths to fetch (huggingface_hub's allow_patterns).
    type: list
    elements: str
    default: ["*.safetensors", "*.json", "tokenizer.model", "*.tiktoken", "merges.txt", "vocab.txt"]
  ignore:
    description: fnmatch patterns of paths to leave out, even when O(files) selects them.
    type: list
    elements: str
    default: ["original/*"]
  root:
    description: The models store, on this host.
    type: path
    required: true
  endpoint:
    description: The Hub's address (HF_ENDPOINT); empty for the public Hub.
    type: str
    default: ""
  token:
    description:
      - A Hub token for a gated or private repository (keep it in a vault). It goes to the client only, never into
        the result or a message.
    type: str
    default: ""
  keep:
    description: Published revisions of the repository kept besides O(protected), the newest first; older ones go.
    type: int
    default: 2
  protected:
    description: Revisions never pruned (the ones services use).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Resolves the revision and checks the space; downloads nothing.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
requirements:
  - huggingface_hub (0.36 or later) for the interpreter the module runs with
"""

EXAMPLES = r"""
- name: Fetch Llama 3.1 8B Instruct at a pinned commit into the store
  instinct.stack.model_fetch:
    repo: meta-llama/Llama-3.1-8B-Instruct
    revision: 0e9e39f249a16976918f6564b8830bc894c89659
    root: /var/lib/instinct-stack/store/models
    token: "{{ vault_hub_token }}"
  vars:
    ansible_python_interpreter: /var/lib/instinct-stack/hub-venv/bin/python
"""

RETURN = r"""
commit:
  description: The commit the revision names, which the store's directory and manifest are named for.
  returned: success
  type: str
  sample: 0e9e39f249a16976918f6564b8830bc894c89659
directory:
  description: The published directory.
  returned: success
  type: str
size:
  description: Bytes of the selected files.
  returned: success
  type: int
files:
  description: How many files the revision holds.
  returned: success
  type: int
pruned:
  description: Revisions (and leftover partial directories) removed.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.instinct.stack.plugins.module_utils import model_hub, models


def main():
    module = AnsibleModule(
        argument_spec={
            "repo": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "str", "default": models.DEFAULT_FILES},
            "ignore": {"type": "list", "elements": "str", "default": models.DEFAULT_IGNORE},
            "root": {"type": "path", "required": True},
            "endpoint": {"type": "str", "default": ""},
            "token": {"type": "str", "default": "", "no_log": True},
            "keep": {"type": "int", "default": 2},
            "protected": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    spec = {key: params[key] for key in ("repo", "revision", "files", "ignore")}
    try:
        result = model_hub.fetch(
            params["root"],
            spec,
            endpoint=params["endpoint"] or None,
            token=params["token"] or None,
            keep=params["keep"],
            protected=params["protected"],
            check_mode=module.check_mode,
        )
    except models.ModelError as exc:
        module.fail_json(msg=str(exc))
    # "directory", not "path": exit_json would add the path's own stat (its size among it) to the result.
    result["directory"] = result.pop("path")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
