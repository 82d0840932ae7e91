#!/usr/bin/env bash
# The test command: set up (idempotently), then run every test in two tiers, the fast default
# tier first (`pytest tests`, so a broken build fails in minutes), then the end-to-end tier
# (`pytest -m e2e tests`: the real DAG run, the backtest, the Spark cluster, SIGKILL fault
# injection). Extra arguments go to both pytest runs; a tier they select nothing from is skipped.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh"
source "$here/env.sh"
cd "$REPO"

tier() {
  local name="$1" rc=0
  shift
  echo "== $name tier =="
  "$VENV/bin/python" -m pytest -q --durations=15 "$@" tests || rc=$?
  if [ "$rc" -eq 5 ]; then  # pytest: no tests collected (e.g. -k matched only the other tier)
    echo "== $name tier: no test selected =="
    rc=0
  fi
  return "$rc"
}

tier fast "$@"
tier e2e -m e2e "$@"
