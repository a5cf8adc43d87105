"""Fixture torch: the package layout and version attributes of a ROCm build of PyTorch."""

import ctypes
import os

# The real `import torch` loads typing_extensions and sympy (symbolic shapes): a stack without torch's runtime
# requirements fails here, as it would with the real wheel.
import sympy  # noqa: F401
import typing_extensions  # noqa: F401

from torch import cuda, version  # noqa: F401

_C = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_C.so"))
_C.torch_fixture_backend.restype = ctypes.c_char_p
__version__ = version.__version__


def backend():
    return _C.torch_fixture_backend().decode()
