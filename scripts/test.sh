#!/usr/bin/env bash
# The whole test suite: lint (ruff, yamllint, ansible-lint production profile, changelog),
# ansible-test sanity, unit tests, then the molecule scenarios on a real VM.
# INSTINCT_TEST_STAGES limits the stages (space separated), e.g. "lint unit".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH"

stages=${INSTINCT_TEST_STAGES:-lint sanity unit molecule}
passed=0 failed=0 failures=()
stage() {
  local name=$1; shift
  [[ " $stages " == *" ${name%%:*} "* ]] || return 0
  echo "=== $name: $*"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1)); echo "=== $name passed ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "=== $name FAILED ($((SECONDS - start)) s)"
  fi
}

sanity() {
  # ansible-test needs the collection at ansible_collections/NAMESPACE/NAME and lists files with git.
  local dest=build/sanity/ansible_collections/instinct/stack
  rm -rf build/sanity && mkdir -p "$dest"
  git ls-files -co --exclude-standard | grep -v '^collections/' | while IFS= read -r path; do
    [[ -e $path ]] && printf '%s\n' "$path"
  done | tar -cf - -T - | tar -xf - -C "$dest"
  (cd "$dest" && git init -q && git add -A && ansible-test sanity --python "$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" --color no)
}

molecule_all() {
  local scenario rc=0 log
  mkdir -p build
  for scenario in $(ls molecule | grep -v '^shared$'); do
    [[ -f molecule/$scenario/molecule.yml ]] || continue
    log=build/molecule-$scenario.log
    molecule test -s "$scenario" 2>&1 | tee "$log"
    ((PIPESTATUS[0] == 0)) || rc=1
    # The scenarios give their services a canary API key: it must never reach Ansible's output.
    if grep -q molecule-canary-key "$log"; then
      echo "molecule $scenario: the API key appears in the output ($log)"; rc=1
    fi
  done
  return $rc
}

stage "lint:ruff" ruff check .
stage "lint:ruff-format" ruff format --check .
stage "lint:yamllint" yamllint -s .
stage "lint:ansible-lint" ansible-lint
stage "lint:changelog" antsibull-changelog lint
stage "sanity" sanity
stage "unit" env PYTHONPATH="$PWD/collections" pytest
stage "molecule" molecule_all

echo
((failed)) && echo "failed stages: ${failures[*]}"
echo "stages: $passed passed, $failed failed"
((failed == 0))
