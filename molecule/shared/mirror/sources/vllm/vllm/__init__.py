"""Fixture vllm: built against the installed ROCm torch."""

__version__ = "0.11.1"
