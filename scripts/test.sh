#!/usr/bin/env bash
# The whole test suite: lint (ruff, yamllint, ansible-lint production profile, changelog),
# ansible-test sanity and the plugins' unit tests on every claimed ansible-core (nox), unit tests,
# then the molecule scenarios: cluster and airgapped on systemd-nspawn machines, default on a qemu VM
# beside an nspawn build host. Ends with each stage's time and the total.
# INSTINCT_TEST_STAGES limits the stages (space separated), e.g. "lint unit"; "molecule:cluster"
# runs one scenario.
#
# Three lanes run at once, each stage after the one before it in its lane: the qemu scenario (default) in one, the
# nspawn scenarios (airgapped, then cluster) in another, and the checks (the mixed fleet's Debian 13 image, lint,
# sanity, unit) in a third at a lower CPU priority (nice). Neither scenario lane keeps both cores busy (a TCG guest and
# an Ansible controller wait on each other, as do an Ansible controller and its nspawn machines;
# benchmarks/results/history.md, "The test command in two lanes"), and the nspawn lane is the longest: the checks
# take the cycles the scenarios leave and never slow the nspawn lane as an equal would. The scenarios share nothing
# but the guest image and the fixture mirror, which setup builds before the lanes start. Each lane's output goes to
# build/lane-NAME.log and is printed whole at the end; a line per stage says when it ends. INSTINCT_TEST_LANES=1
# runs every stage in one lane, one after another (each stage's own time, with nothing beside it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
started=$SECONDS
stages=${INSTINCT_TEST_STAGES:-lint sanity unit molecule}
# setup runs whatever the selection.
selected() { [[ $1 == setup || " $stages " == *" ${1%%:*} "* || " $stages " == *" $1 "* ]]; }
mkdir -p build
results=build/test-results
rm -f "$results" build/lane-*.log
exec 3>&1  # the terminal: each stage's end is said there while the lanes write their logs

# One stage: its output to the lane's log, its result and time to $results (one short line, appended).
stage() {
  local name=$1; shift
  selected "$name" || return 0
  echo "=== $name: $*"
  local start=$SECONDS result
  if "$@"; then result=ok; else result=FAILED; fi
  echo "=== $name $result ($((SECONDS - start)) s)"
  # Said on the terminal too when the stage runs in a lane, whose output goes to its log.
  [[ /proc/$BASHPID/fd/1 -ef /proc/$BASHPID/fd/3 ]] || echo "=== $name $result ($((SECONDS - start)) s, at $((SECONDS - started)) s)" >&3
  printf '%-24s %-6s %6d s\n' "$name" "$result" $((SECONDS - start)) >>"$results"
}

setup() {
  scripts/setup.sh || return 1
  export PATH="$PWD/.venv/bin:$PATH"
  # The guest image and the fixture mirror, which every scenario's create playbook would otherwise build at once
  # (each is cached, keyed by its recipe; a second run finds them).
  if selected molecule; then
    local image
    image=$(molecule/shared/vm/build-image.sh) || return 1
    # build-image.sh prints the image's directory and nothing else on stdout.
    [[ -f $image/disk.img ]] || { echo "setup: build-image.sh printed '$image', not an image directory"; return 1; }
    python -m tests.harness.build_mirror "$image" >/dev/null
  fi
}

sanity() {
  # The compatibility matrix (noxfile.py): ansible-test sanity and the plugins' unit tests on every ansible-core
  # release meta/runtime.yml claims that this Python runs, each in its own virtualenv.
  nox --envdir build/nox -s compat
}

molecule_scenario() {
  local scenario=$1 rc=0 log=build/molecule-$1.log
  molecule test -s "$scenario" 2>&1 | python -m benchmarks.molecule_phases --stamp "$log"
  ((PIPESTATUS[0] == 0)) || rc=1
  # The scenarios give their services a canary API key: it must never reach Ansible's output.
  if grep -q molecule-canary-key "$log"; then
    echo "molecule $scenario: the API key appears in the output ($log)"; rc=1
  fi
  # Each phase's wall time, from the stamps in the log.
  python -m benchmarks.molecule_phases "$log" || true
  return $rc
}

checks() {
  stage "lint:ruff" ruff check .
  stage "lint:ruff-format" ruff format --check .
  stage "lint:yamllint" yamllint -s .
  stage "lint:ansible-lint" ansible-lint
  stage "lint:changelog" antsibull-changelog lint
  stage "sanity" sanity
  stage "unit" env PYTHONPATH="$PWD/collections" pytest
}

# Every scenario in molecule/: the qemu one (default) in the first lane, the ones on systemd-nspawn machines in the
# second.
nspawn_scenarios=()
for config in molecule/*/molecule.yml; do
  scenario=$(basename "$(dirname "$config")")
  [[ $scenario == default ]] || nspawn_scenarios+=("$scenario")
done
qemu_scenario() {
  [[ ! -f molecule/default/molecule.yml ]] || stage "molecule:default" molecule_scenario default
}
checks_lane() {
  # The Debian 13 image of the cluster scenario's mixed fleet (molecule/cluster/tests/test_mixed_fleet.py), first:
  # built long before the cluster scenario's verifier needs it; the test builds it itself when this stage did not run.
  stage "molecule:trixie-image" env INSTINCT_GUEST_SUITE=trixie molecule/shared/vm/build-image.sh
  checks
}
nspawn_lane() {
  local scenario
  for scenario in "${nspawn_scenarios[@]}"; do
    stage "molecule:$scenario" molecule_scenario "$scenario"
  done
}

stage setup setup
if grep -q "^setup .*FAILED" "$results"; then
  echo "setup failed: no stage runs"
  exit 1
fi
export PATH="$PWD/.venv/bin:$PATH"
if [[ ${INSTINCT_TEST_LANES:-2} == 1 ]]; then
  { checks; nspawn_lane; qemu_scenario; } >build/lane-serial.log 2>&1
else
  qemu_scenario >build/lane-qemu.log 2>&1 &
  qemu_pid=$!
  # renice: the lane's subshell, and so every process it starts, below the scenarios.
  (renice -n 10 -p "$BASHPID" >/dev/null && checks_lane) >build/lane-checks.log 2>&1 &
  checks_pid=$!
  nspawn_lane >build/lane-nspawn.log 2>&1
  wait "$qemu_pid" "$checks_pid"
fi
for log in build/lane-*.log; do
  echo
  echo "=== output of ${log#build/}"
  cat "$log"
done

echo
echo "=== times"
cat "$results"
printf '%-24s %-6s %6d s (%d min %d s)\n' total "" $((SECONDS - started)) $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
passed=$(grep -c ' ok ' "$results")
failed=$(grep -c ' FAILED ' "$results")
((failed)) && echo "failed stages: $(grep ' FAILED ' "$results" | cut -d' ' -f1 | tr '\n' ' ')"
echo "stages: $passed passed, $failed failed"
((failed == 0))
