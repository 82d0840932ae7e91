#!/usr/bin/env bash
# The demo command: set up (idempotently), generate a sample web's history, start S3 on
# loopback, run the daily DAG for one date with `airflow dags test`, print the summary.
# Options (all optional): --date YYYY-MM-DD --urls N --hosts H --days D --seed S
#   --set section.key=value (any config key, repeatable)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh"
source "$here/env.sh"
cd "$REPO"
exec "$VENV/bin/python" -m lab.tools.demo "$@"
