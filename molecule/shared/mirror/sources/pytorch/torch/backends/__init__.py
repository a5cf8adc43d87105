"""Fixture torch.backends."""

from torch.backends import cuda  # noqa: F401
