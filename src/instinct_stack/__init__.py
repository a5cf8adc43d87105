"""Drive the instinct.stack Ansible collection through ansible-runner."""

__version__ = "0.2.0"  # the collection's version (galaxy.yml); tests/unit/packaging/test_cli_wheel.py checks it
