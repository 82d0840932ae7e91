"""The one place a SparkSession is made; master and settings come from config."""
from __future__ import annotations

import os
import sys

from jobs.config import Config


def get_spark(cfg: Config, stage: str):
    from pyspark.sql import SparkSession

    # Executors must run the same interpreter (and packages) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"{cfg.spark.app_name}-{stage}")
    # Under spark-submit (which sets PYSPARK_GATEWAY_PORT) the master comes from the
    # command line and must not be overridden.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(cfg.spark.master)
    for key, value in cfg.spark.settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
