"""recrawl_daily: one date's logs -> state -> allocation -> schedule -> S3 -> verify.

The DAG of the installed ``recrawl`` package. Airflow finds it through a file in its DAGs
folder: the two-line stub ``dags/recrawl_daily.py`` (git-sync friendly), or a symlink to this
file (``recrawl dag-file`` prints its path); infra/production/README.md, "The DAG in Airflow".

Wiring only. Each task is an idempotent transaction over the logical date's partition;
the Spark stages go through SparkSubmitOperator, whose connection decides local[2] or a
cluster: on a cluster the jobs come only from the artefact ``airflow.py_files`` and only the
operator's ``spark.cluster_settings`` are sent (``submit_options``). The config file comes from $RECRAWL_CONFIG (defaults from jobs/config.py).
``airflow.spark_session = run`` replaces the three Spark tasks by one, ``plan_day``, that runs
them in one Spark session. With ``intake.enabled`` the Spark task ``intake`` (robots.txt,
sitemaps and feeds the fleet fetched -> host_policy and signals) runs before them.

Operations: every task has an ``execution_timeout`` (``[airflow] *_timeout_s``); a failed
run calls the notifier (``jobs.notify``: the ``recrawl_alerts`` webhook connection if
defined, else the log); a DeadlineAlert fires when the run has not published and verified
``schedules/dt=D+1`` ``airflow.publish_deadline_h`` hours after D 00:00 UTC; ``publish``
updates the Asset ``recrawl_schedules`` (the schedules' S3 URI) for fleet-side DAGs.

Parsing this file imports Airflow, jobs.config, jobs.dag_tasks and jobs.notify only: no
numpy, pandas, pyarrow, pyspark or job stage (tests/ops/test_dag_ops.py checks it).
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta

import pendulum

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.providers.standard.sensors.python import PythonSensor
from airflow.sdk import (DAG, Asset, AsyncCallback, DeadlineAlert, DeadlineReference,
                         chain)

import jobs
from jobs import dag_tasks, notify
from jobs.config import ConfigError, embedded_master, load_config

# The directory holding the jobs package (a checkout, or site-packages): the embedded master
# without an artefact runs its stage files with it on PYTHONPATH.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(jobs.__file__)))

CONFIG_PATH = os.environ.get("RECRAWL_CONFIG", "")
if CONFIG_PATH and not os.path.isabs(CONFIG_PATH):
    # The DAG processor and every worker would each look for it from their own directory.
    raise ConfigError(f"RECRAWL_CONFIG {CONFIG_PATH!r} is a relative path: the DAG processor "
                      f"and the workers resolve it from their own working directories; set "
                      f"an absolute path")
cfg = load_config(CONFIG_PATH or None)
date_args = {"date": "{{ ds }}", "config_path": CONFIG_PATH}
SCHEDULES = Asset(name=dag_tasks.SCHEDULES_ASSET_NAME, uri=dag_tasks.schedules_uri(cfg))


def timeout(task_id: str) -> timedelta:
    key = "poke_timeout_s" if task_id == "wait_for_logs" else f"{task_id}_timeout_s"
    return timedelta(seconds=getattr(cfg.airflow, key))


DOCS = {
    "wait_for_logs": "Waits (reschedule mode, every `airflow.poke_interval_s`, at most "
                     "`airflow.logs_timeout_s`) until `fetch_logs/dt={{ ds }}` holds a data file.",
    "validate_logs": "Checks every input file's schema from its Parquet footer (`jobs.validate_logs`"
                     "); a broken contract fails the task naming file and column. "
                     "By hand: `recrawl validate-logs --date D`.",
    "update_state": "Spark: yesterday's `state/` + today's logs -> `state/dt=D`; bad rows -> "
                    "`quarantine/dt=D` (`jobs.update_state`). By hand: `recrawl update-state --date D`.",
    "allocate": "Spark: visit rates under the policy, due visits, host caps, per-lane budget cut "
                "(`jobs.allocate`). By hand: `recrawl allocate --date D`.",
    "build_schedule": "Spark: per-host slots >= crawl delay apart, one file per shard in the "
                      "staging `schedules/dt=D+1`, `metrics/dt=D` (`jobs.build_schedule`). "
                      "By hand: `recrawl build-schedule --date D`.",
    "plan_day": "Spark, one session (`airflow.spark_session = run`): update_state, allocate and "
                "build_schedule for the day in that order, each committed before the next "
                "(`jobs.plan_day`). By hand: `recrawl plan-day --date D`.",
    "publish": "Uploads the staged shards to `publish.target`, `_manifest.json` last, under the "
               "day's lock (`jobs.publish`); updates the Asset `recrawl_schedules` with the day and "
               "manifest in the event's extra. By hand: `recrawl publish --date D`.",
    "verify": "Reads `schedules/dt=D+1` back through its manifest and checks counts, checksums, "
              "headers and politeness (`jobs.verify`). By hand: `recrawl verify --date D`.",
    "intake": "Spark (with `intake.enabled`): the day's fetched robots.txt, sitemaps and feeds "
              "(`documents/dt={{ ds }}`) -> `host_policy/dt={{ ds }}`, `signals/dt={{ ds }}`, "
              "`document_refs/dt={{ ds }}`; bad documents and entries -> `quarantine/` "
              "(`jobs.intake`). By hand: `recrawl intake --date D`.",
    "report": "Writes the day's report page to `reports/dt=D/report.html` and beside the "
              "published schedules (`schedules/_reports/dt=D/report.html`, in no manifest), then "
              "sends the threshold alerts of `[alerts]` (audit freshness floor and drop, "
              "quarantine share, unused budget, blocked hosts) through the notifier "
              "(`jobs.dag_tasks.report`). By hand: `recrawl report --date D`.",
}


class RecrawlDAG(DAG):
    """DAG whose ``test()`` (``airflow dags test``, the demo) leaves the deadline alert out.

    Airflow 3.3.2's ``dag.test()`` crashes when a run of a DAG with a DeadlineAlert succeeds:
    its in-memory scheduler DAG keeps the encoded alerts where ``DagRun.update_state`` expects
    DeadlineAlert row ids (``'dict' object has no attribute 'hex'``). Deadlines are the
    scheduler's business; a test run has no scheduler to check them anyway.
    """

    def test(self, *args, **kwargs):
        alerts, self.deadline = self.deadline, None
        try:
            return super().test(*args, **kwargs)
        finally:
            self.deadline = alerts


class RecrawlSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of one stage; what it sends depends on the connection's master, which is
    read when the task runs (never at parse time): see ``submit_options``."""

    def _get_hook(self):
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        master = SparkSubmitHook(conn_id=self._conn_id)._connection["master"]
        conf, self.env_vars = submit_options(master)
        self.conf = {**conf, **(self.conf or {})}  # keeps what execute() injected (lineage)
        return super()._get_hook()


def submit_options(master: str) -> tuple[dict, dict | None]:
    """(--conf settings, environment of spark-submit) for a stage on ``master``.

    Embedded master (local[...], on this worker): the embedded defaults ``spark.settings``,
    executors on this worker's interpreter, and the checkout on PYTHONPATH unless the artefact
    is configured. A cluster: only the operator's ``spark.cluster_settings`` (merged over the
    cluster's spark-defaults.conf, never replacing it) and ``spark.python`` if set; nothing of
    this worker's filesystem, and the jobs only from the artefact ``airflow.py_files``.
    """
    if embedded_master(master):
        env = {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        if not cfg.airflow.py_files:
            env["PYTHONPATH"] = REPO
        return dict(cfg.spark.settings), env
    if not cfg.airflow.py_files:
        raise ValueError(f"Spark master {master!r} is a cluster: it runs the jobs from the "
                         "artefact only; set airflow.py_files (python -m jobs.artefact)")
    conf = dict(cfg.spark.cluster_settings)
    if cfg.spark.python:
        conf["spark.pyspark.python"] = cfg.spark.python
    return conf, None


def spark_stage(stage: str) -> SparkSubmitOperator:
    args = ["--date", "{{ ds }}"] + (["--config", CONFIG_PATH] if CONFIG_PATH else [])
    if cfg.airflow.py_files:  # the artefact's entry runs `recrawl <stage> ...` from the zip
        application, args = cfg.airflow.entry, [stage.replace("_", "-")] + args
    else:                     # embedded master only: the stage file of this checkout
        application = os.path.join(REPO, "jobs", f"{stage}.py")
    return RecrawlSparkSubmitOperator(
        task_id=stage, execution_timeout=timeout(stage), doc_md=DOCS[stage],
        application=application, application_args=args, py_files=cfg.airflow.py_files or None,
        conn_id=cfg.airflow.spark_conn_id, name=f"{cfg.spark.app_name}-{stage}")


with RecrawlDAG(
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
    on_failure_callback=notify.on_dag_failure,
    # Not published (run not succeeded) publish_deadline_h after D 00:00 UTC: alert while the
    # fleet still has rows of dt=D to fetch. Runs in the triggerer (jobs.notify is installed
    # there with the recrawl package).
    deadline=DeadlineAlert(
        reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=timedelta(hours=cfg.airflow.publish_deadline_h),
        callback=AsyncCallback(notify.on_publish_deadline_missed,
                               kwargs={"deadline_h": cfg.airflow.publish_deadline_h,
                                       "config_path": CONFIG_PATH}),
        name="schedule_published"),
) as dag:
    wait_for_logs = PythonSensor(
        task_id="wait_for_logs", python_callable=dag_tasks.logs_present, op_kwargs=date_args,
        poke_interval=cfg.airflow.poke_interval_s, timeout=cfg.airflow.logs_timeout_s,
        mode="reschedule", execution_timeout=timeout("wait_for_logs"),
        doc_md=DOCS["wait_for_logs"])
    validate = PythonOperator(task_id="validate_logs", python_callable=dag_tasks.validate,
                              op_kwargs=date_args, execution_timeout=timeout("validate_logs"),
                              doc_md=DOCS["validate_logs"])
    publish = PythonOperator(task_id="publish", python_callable=dag_tasks.publish,
                             op_kwargs=date_args, outlets=[SCHEDULES],
                             execution_timeout=timeout("publish"), doc_md=DOCS["publish"])
    verify = PythonOperator(task_id="verify", python_callable=dag_tasks.verify,
                            op_kwargs=date_args, execution_timeout=timeout("verify"),
                            doc_md=DOCS["verify"])
    report = PythonOperator(task_id="report", python_callable=dag_tasks.report,
                            op_kwargs=date_args, execution_timeout=timeout("report"),
                            doc_md=DOCS["report"])
    if cfg.airflow.spark_session == "run":
        spark_stages = [spark_stage("plan_day")]
    else:
        spark_stages = [spark_stage(s) for s in dag_tasks.SPARK_STAGES]
    intake = [spark_stage("intake")] if cfg.intake.enabled else []
    chain(wait_for_logs, validate, *intake, *spark_stages, publish, verify, report)
