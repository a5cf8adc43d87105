"""Drive the instinct.stack Ansible collection through ansible-runner."""

__version__ = "0.1.0"
