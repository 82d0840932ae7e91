"""Shared fixtures: one real local Spark session for the whole run, sample data roots."""
from __future__ import annotations

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
# Executors must import the project too.
os.environ["PYTHONPATH"] = REPO + (os.pathsep + os.environ["PYTHONPATH"]
                                   if os.environ.get("PYTHONPATH") else "")


@pytest.fixture(scope="session")
def spark():
    from jobs.config import load_config
    from jobs.spark_session import get_spark

    session = get_spark(load_config(None, ["spark.master=local[2]",
                                           "spark.settings.spark.sql.shuffle.partitions=4"]),
                        "tests")
    yield session
    session.stop()


def make_config(root, *overrides):
    from jobs.config import load_config

    return load_config(None, [f"paths.root={root}", "spark.master=local[2]",
                              "spark.state_buckets=2", "schedule.n_shards=4", *overrides])
