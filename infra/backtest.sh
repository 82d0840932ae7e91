#!/usr/bin/env bash
# One command for a closed-loop backtest and its HTML report (docs/quality.md):
#   bash infra/backtest.sh [--seeds 0 1 2] [--urls N] [--days N] [--out DIR] ...
# Writes var/backtest/report/report.html by default.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh"
source "$here/env.sh"
cd "$REPO"
exec "$VENV/bin/python" -m lab.backtest "$@"
