"""Fixture triton's runtime: the launcher compile that real Triton runs on a host at its first kernel."""
