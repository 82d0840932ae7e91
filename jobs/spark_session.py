"""The one place a SparkSession is made; master and settings come from config.

Which settings a session gets depends on its master, never on where it was started from:

- embedded master (``local[...]``): ``spark.settings`` (8 shuffle partitions, UI off, ...),
  the laptop/CI defaults; executors run this interpreter;
- a cluster master (``yarn``, ``spark://...``): only ``spark.cluster_settings`` (empty by
  default); every other key keeps the cluster's ``spark-defaults.conf``, and the executors'
  Python is ``spark.python`` or, when empty, the cluster's own.

Under spark-submit (``PYSPARK_GATEWAY_PORT`` set) the master comes from the command line, and
on the embedded master a key the command line (or spark-defaults.conf) set is never overridden.
The DAG builds that command line by the same rule (``jobs/airflow_dag.py``,
``submit_options``).

One key is the jobs' own, on every master: ``spark.sql.session.timeZone=UTC`` (date partitions,
planning windows and naive schedule timestamps are UTC).
"""
from __future__ import annotations

import os
import sys

from jobs.config import Config, embedded_master

REQUIRED = {"spark.sql.session.timeZone": "UTC"}


def session_settings(cfg: Config, master: str) -> dict[str, str]:
    """The settings recrawl asks for on ``master``: embedded defaults, or only the operator's
    explicit cluster keys (plus the required time zone)."""
    chosen = dict(cfg.spark.settings if embedded_master(master) else cfg.spark.cluster_settings)
    chosen.update(REQUIRED)
    return {key: str(value) for key, value in chosen.items()}


def _submitted_conf() -> dict[str, str]:
    """spark-submit's resolved settings (command line + spark-defaults.conf), from its JVM."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the gateway spark-submit started; no context yet
    return dict(SparkConf().getAll())


def get_spark(cfg: Config, stage: str):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"{cfg.spark.app_name}-{stage}")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if submitted:
        # Under spark-submit the master comes from the command line; the embedded defaults
        # fill only keys nothing set, the operator's cluster keys are applied as the DAG's
        # --conf would apply them.
        given = _submitted_conf()
        master = given.get("spark.master", "")
        settings = session_settings(cfg, master)
        if embedded_master(master):
            settings = {k: v for k, v in settings.items() if k not in given or k in REQUIRED}
    else:
        master = cfg.spark.master
        builder = builder.master(master)
        settings = session_settings(cfg, master)
    # Executors run the interpreter named by the driver's PYSPARK_PYTHON (spark-submit sets it
    # from spark.pyspark.python). Embedded executors are this machine's: this interpreter.
    if embedded_master(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    elif cfg.spark.python and not submitted:
        os.environ["PYSPARK_PYTHON"] = cfg.spark.python
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
