#!/usr/bin/env bash
# The test command: set up (idempotently), then run every test in two tiers, the fast default
# tier first (`pytest tests`, so a broken build fails in minutes), then the end-to-end tier
# (`pytest -m e2e tests`: the real DAG run, the backtest, the Spark cluster, SIGKILL fault
# injection). Extra arguments go to both pytest runs. A tier that selects no test fails, unless
# the extra arguments narrowed the selection (-k/-m/a test path): then it is skipped. Each tier
# runs on RECRAWL_TEST_WORKERS pytest-xdist workers (default 2; 0 runs in one process), a test
# file's tests on one worker (tests/conftest.py groups them). On two cores the second worker
# cuts the fast tier by a third and the CPU-bound end-to-end tier by about 15 %.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh"
source "$here/env.sh"
cd "$REPO"

narrowed=0
for a in "$@"; do
  case "$a" in -k|-k*|-m|-m*|--keyword*|tests/*|*.py|*::*) narrowed=1 ;; esac
done

tier() {
  local name="$1" rc=0
  shift
  echo "== $name tier =="
  "$VENV/bin/python" -m pytest -q --durations=15 -n "${RECRAWL_TEST_WORKERS:-2}" \
    "$@" tests || rc=$?
  if [ "$rc" -eq 5 ]; then  # pytest: no tests collected
    if [ "$narrowed" -eq 1 ]; then
      echo "== $name tier: no test selected by the arguments given =="
      rc=0
    else
      echo "== $name tier: no test collected (a broken marker or conftest?): failing" >&2
    fi
  fi
  return "$rc"
}

tier fast "$@"
tier e2e -m e2e "$@"
