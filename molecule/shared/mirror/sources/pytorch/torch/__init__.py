"""Fixture torch: the package layout and version attributes of a ROCm build of PyTorch."""

import ctypes
import os

from torch import cuda, version  # noqa: F401

_C = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_C.so"))
_C.torch_fixture_backend.restype = ctypes.c_char_p
__version__ = version.__version__


def backend():
    return _C.torch_fixture_backend().decode()
