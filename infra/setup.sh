#!/usr/bin/env bash
# Idempotent set-up: a JDK 17 (installed with apt when missing and we are root) and the
# virtual environment in .venv, rebuilt only when requirements or constraints change.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$REPO"

if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing a JDK 17 (openjdk-17-jre-headless)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Java 17 is required; install openjdk-17-jre-headless" >&2; exit 1
  fi
fi

PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
stamp="$VENV/.recrawl-stamp"
want="$(cat requirements.txt constraints.txt | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: building $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -r requirements.txt -c constraints.txt
  # The Spark provider pulls in pyspark-client, which overwrites pyspark's Python side.
  pyspark_pin="$(grep -E '^pyspark==' requirements.txt)"
  "$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$pyspark_pin"
  echo "$want" > "$stamp"
fi
