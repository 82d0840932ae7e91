"""recrawl_daily: one date's logs -> state -> allocation -> schedule -> S3 -> verify.

Wiring only. Each task is an idempotent transaction over the logical date's partition;
the Spark stages go through SparkSubmitOperator, whose connection decides local[2] or a
cluster. The config file comes from $RECRAWL_CONFIG (defaults from jobs/config.py).
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta

import pendulum

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: E402
from airflow.providers.standard.operators.python import PythonOperator  # noqa: E402
from airflow.providers.standard.sensors.python import PythonSensor  # noqa: E402
from airflow.sdk import DAG  # noqa: E402

from jobs import dag_tasks  # noqa: E402
from jobs.config import load_config  # noqa: E402

CONFIG_PATH = os.environ.get("RECRAWL_CONFIG", "")
cfg = load_config(CONFIG_PATH or None)
date_args = {"date": "{{ ds }}", "config_path": CONFIG_PATH}


def spark_stage(stage: str) -> SparkSubmitOperator:
    return SparkSubmitOperator(
        task_id=stage,
        application=os.path.join(REPO, "jobs", f"{stage}.py"),
        conn_id=cfg.airflow.spark_conn_id,
        name=f"{cfg.spark.app_name}-{stage}",
        application_args=["--date", "{{ ds }}"] + (["--config", CONFIG_PATH] if CONFIG_PATH else []),
        py_files=cfg.airflow.py_files or None,
        conf=dict(cfg.spark.settings),
        env_vars={"PYTHONPATH": REPO, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)},
    )


with DAG(
    dag_id="recrawl_daily",
    schedule="@daily",
    start_date=pendulum.parse(cfg.airflow.start_date, tz="UTC"),
    catchup=cfg.airflow.catchup,
    max_active_runs=1,
    # D+1 never runs on top of a failed D: each task waits for its own previous run to have
    # succeeded, and one run at a time makes a catch-up replay the days in date order. The
    # stages also refuse an uncommitted input partition themselves (jobs.partitions).
    default_args={"retries": cfg.airflow.retries,
                  "retry_delay": timedelta(seconds=cfg.airflow.retry_delay_s),
                  "depends_on_past": True},
    tags=["recrawl"],
    doc_md=__doc__,
) as dag:
    wait_for_logs = PythonSensor(
        task_id="wait_for_logs", python_callable=dag_tasks.logs_present, op_kwargs=date_args,
        poke_interval=cfg.airflow.poke_interval_s, timeout=cfg.airflow.logs_timeout_s,
        mode="reschedule")
    validate = PythonOperator(task_id="validate_logs", python_callable=dag_tasks.validate,
                              op_kwargs=date_args)
    publish = PythonOperator(task_id="publish", python_callable=dag_tasks.publish,
                             op_kwargs=date_args)
    verify = PythonOperator(task_id="verify", python_callable=dag_tasks.verify,
                            op_kwargs=date_args)
    (wait_for_logs >> validate >> spark_stage("update_state") >> spark_stage("allocate")
     >> spark_stage("build_schedule") >> publish >> verify)
