#!/usr/bin/env bash
# The main job on its embedded default target: detect the GPUs of this machine and of a
# captured 8x MI300X topology through ansible-runner. Pass other arguments to change it, e.g.
#   scripts/run.sh detect -i inventories/cluster --json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if (($#)); then
  exec .venv/bin/instinct-stack "$@"
fi
exec .venv/bin/instinct-stack detect -i inventories/demo
