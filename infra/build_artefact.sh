#!/usr/bin/env bash
# Build the versioned Spark artefact of the jobs package (see jobs/artefact.py):
#   bash infra/build_artefact.sh [--out DIR]
# writes DIR/recrawl_jobs-<version>.zip (--py-files) and DIR/recrawl_jobs-<version>.py (the
# driver entry spark-submit runs), version from pyproject.toml; DIR defaults to dist/.
# Then upload both side by side and set airflow.py_files to the zip's URI.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"                # VENV: RECRAWL_VENV, else the checkout's .venv
python="${PYTHON:-$VENV/bin/python}"
cd "$here/.."
exec "$python" -m jobs.artefact "$@"
