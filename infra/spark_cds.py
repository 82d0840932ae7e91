"""Record the class-data-sharing archive of the embedded Spark driver's JVM (set-up only).

A Spark driver JVM loads and verifies some 10,000 classes before its first job, on two cores
about 10 s of each ``spark-submit``. A dynamic CDS archive (JDK 13+, JEP 350) maps them from
one file instead. ``infra/setup.sh`` runs this script once under
``-XX:ArchiveClassesAtExit`` so the archive holds what the jobs load: a session made as the jobs
make it, Parquet written and read, a shuffle, a window, a join, ``applyInPandas``,
``mapInPandas``, ``toPandas`` and a local checkpoint. ``infra/env.sh`` then points every
driver at it (``SPARK_SUBMIT_OPTS``). A JVM that cannot use the archive (another JDK, another
class path) starts as before; the archive changes start-up time, never results.

Usage: ``SPARK_SUBMIT_OPTS=-XX:ArchiveClassesAtExit=FILE python infra/spark_cds.py``.
"""
from __future__ import annotations

import sys
import tempfile

import pandas as pd


def main() -> int:
    from pyspark import SparkContext
    from pyspark.sql import Window, functions as F

    from jobs.config import load_config
    from jobs.spark_session import get_spark

    spark = get_spark(load_config(None, ["spark.master=local[2]"]), "cds")
    with tempfile.TemporaryDirectory(prefix="recrawl-cds-") as tmp:
        pdf = pd.DataFrame({"host": [f"h{i % 7}" for i in range(500)],
                            "url": [f"https://h{i % 7}.example/{i}" for i in range(500)],
                            "x": [float(i) for i in range(500)],
                            "dt": ["2026-01-01", "2026-01-02"] * 250})
        spark.createDataFrame(pdf).write.mode("overwrite").partitionBy("dt").parquet(f"{tmp}/t")
        df = spark.read.parquet(f"{tmp}/t").localCheckpoint()
        agg = df.groupBy("host").agg(F.count("*").alias("n"), F.sum("x").alias("s"))
        w = Window.partitionBy("host").orderBy(F.col("x").desc())
        ranked = df.withColumn("r", F.row_number().over(w)).join(agg, "host", "left")

        def per_host(g: pd.DataFrame) -> pd.DataFrame:
            return g.assign(x=g["x"] / max(len(g), 1))

        def per_batch(batches):
            for b in batches:
                yield b[b["x"] >= 0]

        out = (ranked.groupBy("host").applyInPandas(per_host, ranked.schema)
               .mapInPandas(per_batch, ranked.schema))
        out.repartition(4, "host").write.mode("overwrite").parquet(f"{tmp}/u")
        got = spark.read.parquet(f"{tmp}/u").orderBy("url").toPandas()
        n = spark.read.parquet(f"{tmp}/u").select(F.countDistinct("host")).first()[0]
    spark.stop()
    # The JVM writes the archive as it exits, which it does when its stdin closes; wait for it.
    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None:
        proc.stdin.close()
        proc.wait(timeout=600)
    return 0 if len(got) == len(pdf) and n == 7 else 1


if __name__ == "__main__":
    sys.exit(main())
