"""Builds the fixture triton wheel (ROCm backend)."""

import os
import subprocess

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
commit = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.strip()
with open(os.path.join(ROOT, "triton", "_build_info.py"), "w") as handle:
    handle.write('commit = "%s"\nbackend = "hip"\n' % commit)

setup(name="triton", version="3.5.0+git%s" % commit[:8], packages=["triton"])
