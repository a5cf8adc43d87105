"""Fixture triton: the version and build commit of a ROCm Triton."""

from triton._build_info import backend, commit  # noqa: F401

__version__ = "3.5.0"
