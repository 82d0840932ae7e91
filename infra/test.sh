#!/usr/bin/env bash
# The test command: set up (idempotently), then run every test.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh"
source "$here/env.sh"
cd "$REPO"
exec "$VENV/bin/python" -m pytest -q "$@" tests
