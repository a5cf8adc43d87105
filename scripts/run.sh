#!/usr/bin/env bash
# The main job on its embedded default target: set up, boot a throwaway local host (a systemd-nspawn
# container from the molecule guest image), serve it the fixture mirror, run `instinct-stack rollout`
# against it, ask the vLLM service it started for an OpenAI chat completion, print the answer and the
# report, tear everything down (scripts/demo_target.py, run as a module of the checkout). Root, or sudo.
#   scripts/run.sh                 # the rollout demo, about 4 min once the guest image and mirror are cached
#   scripts/run.sh --keep          # the same, leaving the host up; scripts/run.sh --teardown removes it
#   scripts/run.sh ARGS...         # anything else goes to instinct-stack, e.g.
#   scripts/run.sh detect -i inventories/demo
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m scripts.demo_target "$@"
