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
# The Spark driver JVM's class-data archive, when set-up recorded one (infra/spark_cds.py): each
# spark-submit and local session starts about 7 s sooner on two cores. A JVM that cannot use it
# (another JDK or class path) starts as before, without a word; results never depend on it.
if [ -f "$VENV/spark-driver.jsa" ] && [[ "${SPARK_SUBMIT_OPTS:-}" != *"$VENV/spark-driver.jsa"* ]]; then
  export SPARK_SUBMIT_OPTS="-XX:SharedArchiveFile=$VENV/spark-driver.jsa -Xlog:cds=off,cds+dynamic=off${SPARK_SUBMIT_OPTS:+ $SPARK_SUBMIT_OPTS}"
fi
