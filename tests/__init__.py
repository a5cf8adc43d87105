"""The checkout's tests: a package only so that the harness imports as tests.harness from the checkout's root."""
