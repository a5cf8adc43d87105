"""Offline stand-in for ansible-test's pip bootstrap script (get-pip.py).

ansible-test downloads get-pip.py from a host that package-registry-only networks cannot reach.
This script has the same interface (pip install arguments on the command line): it installs
pip from the interpreter's bundled ensurepip wheel, then runs pip install with those arguments
against the configured package index.
"""

import subprocess
import sys

IGNORED = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install", *[arg for arg in sys.argv[1:] if arg not in IGNORED]])
