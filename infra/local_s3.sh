#!/usr/bin/env bash
# Local S3 for demos and tests: moto in server mode on 127.0.0.1.
#   infra/local_s3.sh start [PORT]    # idempotent; prints the endpoint URL
#   infra/local_s3.sh status [PORT]
#   infra/local_s3.sh stop [PORT]
# PORT defaults to $LOCAL_S3_PORT, else 9000. Logic lives in infra/local_s3.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"                # VENV: RECRAWL_VENV, else the checkout's .venv
python="${PYTHON:-$VENV/bin/python}"
command="${1:-start}"
port="${2:-${LOCAL_S3_PORT:-9000}}"
exec "$python" "$here/local_s3.py" "$command" --port "$port"
