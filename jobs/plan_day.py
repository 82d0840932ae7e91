"""Run update_state, allocate and build_schedule for date D in one Spark session.

The DAG's ``airflow.spark_session = "run"`` mode: one spark-submit (one JVM start, one
Python import of the jobs, one Spark session) per day instead of three. Each stage is still
its own transaction over the day's partitions, committed before the next stage starts and
read back through its commit marker like in the three-task DAG, so a retry of this task
reruns all three and rewrites identical partitions (every stage is idempotent). A stage
that fails stops the chain; the ones before it stay committed and the ones after are not
run, so nothing downstream reads a half-made day.
"""
from __future__ import annotations

import sys

from jobs.cli import stage_main
from jobs.config import Config
from jobs.dag_tasks import SPARK_STAGES

def run(cfg: Config, run_date: str, spark=None) -> dict:
    """The three stages' run records, by stage name, in one session."""
    import importlib

    from jobs.spark_session import get_spark

    spark = spark or get_spark(cfg, "plan_day")
    records = {}
    for stage in SPARK_STAGES:
        print(f"[plan_day] {run_date}: {stage}", file=sys.stderr, flush=True)
        records[stage] = importlib.import_module(f"jobs.{stage}").run(cfg, run_date, spark)
    return records


def main(argv=None) -> int:
    return stage_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
