#!/usr/bin/env bash
# A Spark standalone cluster on 127.0.0.1 from the venv's pyspark (a master, two workers of
# 1 core / 1 GiB each), for running the DAG against a real cluster on one machine:
#   bash infra/cluster.sh start [--dir DIR] [--workers N] [--conf KEY=VALUE ...]  # prints state JSON
#   bash infra/cluster.sh status [--dir DIR]
#   bash infra/cluster.sh stop [--dir DIR]
# DIR defaults to var/cluster (logs, work dirs, conf/spark-defaults.conf, the cluster's python).
# Submit to it with SPARK_CONF_DIR=DIR/conf and master spark://127.0.0.1:<port> from the JSON.
# Logic lives in infra/local_cluster.py; tests/ops/test_cluster.py runs the DAG on it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
exec "$VENV/bin/python" "$here/local_cluster.py" "$@"
