"""The checkout's scripts: demo_target runs as a module from the checkout's root (scripts/run.sh), so that it imports
the harness as tests.harness."""
