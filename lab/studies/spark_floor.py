"""What the daily chain's Spark plumbing costs with no work in it: the floor under
bench_daily's chain, on a root made by lab.studies.bench_daily.

Usage::

    python -m lab.studies.spark_floor --root /tmp/bd1m --date 2024-01-03 [--repeats 3]

Runs, in one Spark session on ``local[2]`` with the project's embedded settings, the data
movement each stage cannot avoid, with identity functions where the stage computes:

- ``update_state``: yesterday's state and today's fetch logs read, both bucketed by a hash
  of the URL (``spark.state_buckets``) and co-grouped into an identity ``applyInArrow`` that
  returns the state side, written as Parquet (no log checks, no fold, no priors, no hosts);
- ``allocate``: today's state read (allocate's page columns), repartitioned by host into
  ``policy_rates.bucket_count`` buckets and persisted; two passes that return one row per
  bucket through ``mapInArrow`` (the summaries and demand passes) and a third that returns
  every page's (url, host, a rate) and is written (the candidates);
- ``build_schedule``: those candidates read and written again, partitioned by host.

Then pyarrow's I/O limit on the same files, as bench_daily measures it
(:func:`lab.studies.bench_daily.io_limit`), and the ratio of each to it. Prints one JSON line:
the first repeat's seconds per step (``cold``: a fresh JVM, as the chain in a daily run) and
the median of the others (``warm``), each with its sum and that sum's ratio to the I/O limit.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from jobs import policy_rates, storage
from jobs.allocate import STATE_PAGE_COLUMNS
from jobs.config import load_config
from jobs.core.probes import PROBE_COLUMNS
from jobs.core.timing import TIMING_COLUMNS
from lab.studies.bench_daily import chain_files, io_limit

# allocate's page columns, as jobs.allocate.load_pages reads them from the state.
PAGE_COLUMNS = [*STATE_PAGE_COLUMNS, "pending_signal_at", *TIMING_COLUMNS, *PROBE_COLUMNS]


def _identity_cogroup(state_t, _rows_t):
    return state_t


def _one_row(batches):
    import pyarrow as pa

    rows = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


def _rates(batches):
    import pyarrow as pa

    for b in batches:
        yield pa.RecordBatch.from_arrays(
            [b.column("url"), b.column("host"), b.column("lambda_hat")],
            names=["url", "host", "rate"])


def floor_steps(spark, cfg, date: str, scratch: Path) -> dict[str, float]:
    """Seconds of each stage's floor, once (see the module docstring)."""
    from pyspark.sql import functions as F

    files = chain_files(cfg, date)
    buckets = cfg.spark.state_buckets
    out: dict[str, float] = {}

    t0 = time.perf_counter()
    bucket = F.pmod(F.xxhash64("url"), F.lit(buckets))
    prev = spark.read.parquet(*files["state_prev"]).withColumn("_b", bucket)
    rows = spark.read.parquet(*files["fetch_logs"]).withColumn("_b", bucket)
    folded = (prev.groupBy("_b").cogroup(rows.groupBy("_b"))
              .applyInArrow(_identity_cogroup, prev.schema))
    folded.drop("_b").write.mode("overwrite").parquet(str(scratch / "state"))
    out["update_state"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    pages = spark.read.parquet(*files["state"])
    # A root written before a column existed lacks it (load_pages reads it as null).
    pages = pages.select(*[c for c in PAGE_COLUMNS if c in pages.columns])
    page_rows = storage.partition_rows(cfg.paths.table("state", date))
    table = pages.repartition(policy_rates.bucket_count(cfg, page_rows), "host").persist()
    for _ in range(2):
        table.mapInArrow(_one_row, "rows long").collect()
    table.mapInArrow(_rates, "url string, host string, rate double").write.mode(
        "overwrite").parquet(str(scratch / "candidates"))
    table.unpersist()
    out["allocate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    (spark.read.parquet(str(scratch / "candidates")).repartition("host")
     .write.mode("overwrite").parquet(str(scratch / "schedule")))
    out["build_schedule"] = time.perf_counter() - t0
    return out


def summarise(runs: list[dict[str, float]], io_seconds: float) -> dict:
    """The first run (a cold JVM, as every daily run starts) and the median of the others
    (warm), each step and their sum, with the sums' ratios to ``io_seconds``."""
    def chain(steps):
        return {"steps": {k: round(v, 2) for k, v in steps.items()},
                "chain_s": round(sum(steps.values()), 2),
                "ratio": round(sum(steps.values()) / io_seconds, 1)}

    out = {"cold": chain(runs[0])}
    if len(runs) > 1:
        out["warm"] = chain({k: statistics.median(r[k] for r in runs[1:]) for k in runs[0]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="a bench_daily root")
    ap.add_argument("--date", default="2024-01-03")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    from jobs.spark_session import get_spark

    cfg = load_config(None, ["spark.master=local[2]", f"paths.root={args.root}",
                             "spark.settings.spark.driver.memory=6g", *args.set])
    spark = get_spark(cfg, "spark_floor")
    scratch = Path(tempfile.mkdtemp(prefix="spark_floor_"))
    try:
        runs = [floor_steps(spark, cfg, args.date, scratch) for _ in range(args.repeats)]
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    io = io_limit(chain_files(cfg, args.date), Path(tempfile.mkdtemp(prefix="spark_floor_io_")))
    print(json.dumps({"root": args.root, "date": args.date, "repeats": args.repeats,
                      "io_s": round(io["seconds"], 2), **summarise(runs, io["seconds"])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
