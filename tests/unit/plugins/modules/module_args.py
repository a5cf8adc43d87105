"""patch_module_args for every ansible-core the collection claims: ansible.module_utils.testing has it from 2.19 on;
before, a module read its arguments from ansible.module_utils.basic._ANSIBLE_ARGS, which this sets the same way."""

import contextlib
import json

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.18

    @contextlib.contextmanager
    def patch_module_args(args=None):
        from ansible.module_utils import basic

        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved


__all__ = ["patch_module_args"]
