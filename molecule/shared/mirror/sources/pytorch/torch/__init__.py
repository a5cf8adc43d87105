"""Fixture torch: the package layout and version attributes of a ROCm build of PyTorch."""

import ctypes
import os

# The real `import torch` loads typing_extensions and sympy (symbolic shapes): a stack without torch's runtime
# requirements fails here, as it would with the real wheel.
import sympy  # noqa: F401
import typing_extensions  # noqa: F401

from torch import backends, cuda, version  # noqa: F401

_KERNELS = set()  # (operator, dispatch key) pairs that libraries registered, as torch's dispatcher records them


class _CModule:
    """torch._C: the compiled library, and the dispatcher query that tells which backends an operator has."""

    def __init__(self, library):
        self._library = library
        library.torch_fixture_backend.restype = ctypes.c_char_p

    def torch_fixture_backend(self):
        return self._library.torch_fixture_backend()

    @staticmethod
    def _dispatch_has_kernel_for_dispatch_key(operator, key):
        return (operator, key) in _KERNELS


def _fixture_register_kernel(operator, key):
    """What TORCH_LIBRARY_IMPL does when an extension's library loads (torchvision's CPU and HIP operators)."""
    _KERNELS.add((operator, key))


_C = _CModule(ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_C.so")))
__version__ = version.__version__


def backend():
    return _C.torch_fixture_backend().decode()
