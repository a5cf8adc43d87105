#!/usr/bin/env bash
# The whole test suite: lint (ruff, yamllint, ansible-lint production profile, changelog),
# ansible-test sanity and the plugins' unit tests on every claimed ansible-core (nox), unit tests,
# then the molecule scenarios: cluster and airgapped on systemd-nspawn machines, default on a qemu VM
# beside an nspawn build host. Ends with each stage's time and the total.
# INSTINCT_TEST_STAGES limits the stages (space separated), e.g. "lint unit"; "molecule:cluster"
# runs one scenario.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
started=$SECONDS
setup_start=$SECONDS
scripts/setup.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH"

stages=${INSTINCT_TEST_STAGES:-lint sanity unit molecule}
passed=0 failed=0 failures=()
timings=("$(printf '%-24s %-6s %6d s' setup ok $((SECONDS - setup_start)))")
stage() {
  local name=$1; shift
  [[ " $stages " == *" ${name%%:*} "* || " $stages " == *" $name "* ]] || return 0
  echo "=== $name: $*"
  local start=$SECONDS result
  if "$@"; then
    passed=$((passed + 1)); result=passed
  else
    failed=$((failed + 1)); failures+=("$name"); result=FAILED
  fi
  echo "=== $name $result ($((SECONDS - start)) s)"
  timings+=("$(printf '%-24s %-6s %6d s' "$name" "${result/passed/ok}" $((SECONDS - start)))")
}

sanity() {
  # The compatibility matrix (noxfile.py): ansible-test sanity and the plugins' unit tests on every ansible-core
  # release meta/runtime.yml claims that this Python runs, each in its own virtualenv.
  nox --envdir build/nox -s compat
}

molecule_scenario() {
  local scenario=$1 rc=0 log=build/molecule-$1.log
  mkdir -p build
  molecule test -s "$scenario" 2>&1 | python benchmarks/molecule_phases.py --stamp "$log"
  ((PIPESTATUS[0] == 0)) || rc=1
  # The scenarios give their services a canary API key: it must never reach Ansible's output.
  if grep -q molecule-canary-key "$log"; then
    echo "molecule $scenario: the API key appears in the output ($log)"; rc=1
  fi
  # Each phase's wall time, from the stamps in the log.
  python benchmarks/molecule_phases.py "$log" || true
  return $rc
}

stage "lint:ruff" ruff check .
stage "lint:ruff-format" ruff format --check .
stage "lint:yamllint" yamllint -s .
stage "lint:ansible-lint" ansible-lint
stage "lint:changelog" antsibull-changelog lint
stage "sanity" sanity
stage "unit" env PYTHONPATH="$PWD/collections" pytest
# Every scenario in molecule/, the qemu one (default) last: the ones on systemd-nspawn machines fail fastest.
scenarios=()
for config in molecule/*/molecule.yml; do
  scenario=$(basename "$(dirname "$config")")
  [[ $scenario == default ]] || scenarios+=("$scenario")
done
[[ -f molecule/default/molecule.yml ]] && scenarios+=(default)
for scenario in "${scenarios[@]}"; do
  stage "molecule:$scenario" molecule_scenario "$scenario"
done

echo
echo "=== times"
printf '%s\n' "${timings[@]}"
printf '%-24s %-6s %6d s (%d min %d s)\n' total "" $((SECONDS - started)) $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
((failed)) && echo "failed stages: ${failures[*]}"
echo "stages: $passed passed, $failed failed"
((failed == 0))
