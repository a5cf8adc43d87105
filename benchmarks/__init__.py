"""The benchmarks, run as modules from the checkout's root with the project's .venv python:
`.venv/bin/python -m benchmarks.scale --hosts 1 4 16` (BENCHMARKS.md). ssh_meter.py alone also runs by its path:
scale gives it to Ansible's ssh as a ProxyCommand."""
