#!/usr/bin/env bash
# Idempotent set-up: a JDK 17 and headless Chromium with its driver (installed with apt when
# missing and we are root), the virtual environment in .venv, rebuilt only when requirements
# or constraints change, and
# this project installed into it editable (the `recrawl` command in .venv/bin), reinstalled
# only when the venv was rebuilt or pyproject.toml changed.
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

# Headless Chromium and its driver for the report's browser test (tests/ops/test_report.py).
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing chromium and chromium-driver (the report's browser test)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: the browser test needs chromium and chromium-driver (apt-get install -y chromium chromium-driver)" >&2
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

# The project, editable and without dependencies (they are the pins above). The venv's own
# setuptools builds it offline when it can (>= 70.1, or >= 64 with wheel: PEP 660); otherwise
# pip fetches the build backend pyproject.toml names into an isolated build environment.
project_stamp="$VENV/.recrawl-project-stamp"
project_want="$(cat "$stamp" pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/recrawl" ] || [ "$(cat "$project_stamp" 2>/dev/null)" != "$project_want" ]; then
  echo "setup: installing recrawl (editable) into $VENV" >&2
  if "$VENV/bin/python" - 2>/dev/null <<'PYEOF'
import importlib.util, sys, setuptools
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
sys.exit(0 if v >= (70, 1) or (v >= (64, 0) and importlib.util.find_spec("wheel")) else 1)
PYEOF
  then
    "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  else
    "$VENV/bin/python" -m pip install -q --no-deps -e .
  fi
  echo "$project_want" > "$project_stamp"
fi

# The Spark driver JVM's class-data archive (infra/spark_cds.py; infra/env.sh uses it),
# recorded again when the JDK, the pins or the recording script change. It only speeds up start-up:
# when it cannot be recorded, set-up says so and goes on.
cds="$VENV/spark-driver.jsa"
cds_stamp="$VENV/.recrawl-cds-stamp"
cds_want="$({ java -version 2>&1; cat "$stamp" infra/spark_cds.py; } | sha256sum | cut -c1-16)"
if [ ! -f "$cds" ] || [ "$(cat "$cds_stamp" 2>/dev/null)" != "$cds_want" ]; then
  echo "setup: recording the Spark driver's class-data archive (about a minute)" >&2
  rm -f "$cds" "$cds.tmp"
  if SPARK_SUBMIT_OPTS="-XX:ArchiveClassesAtExit=$cds.tmp -Xlog:cds=off,cds+dynamic=off" \
      "$VENV/bin/python" infra/spark_cds.py >"$VENV/spark-cds.log" 2>&1 && [ -s "$cds.tmp" ]; then
    mv "$cds.tmp" "$cds"
    echo "$cds_want" > "$cds_stamp"
  else
    rm -f "$cds.tmp"
    echo "setup: could not record the archive ($VENV/spark-cds.log); Spark starts without it" >&2
  fi
fi
