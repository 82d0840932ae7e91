# Sourced by the demo, the tests and CI: one place for the environment the jobs need.
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RECRAWL_VENV:-$REPO/.venv}"
export PATH="$VENV/bin:$PATH"                      # spark-submit, airflow, moto_server
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYSPARK_PYTHON="$VENV/bin/python"           # executors run the venv's interpreter
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
export SPARK_LOCAL_IP=127.0.0.1
export AWS_EC2_METADATA_DISABLED=true
if [ -z "${JAVA_HOME:-}" ] && command -v java >/dev/null 2>&1; then
  export JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
fi
