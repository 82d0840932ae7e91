"""Time three steps of update_state alone, on a root made by lab.studies.bench_daily.

Usage::

    python -m lab.studies.bench_update_steps --root /tmp/bd1m --date 2024-01-03 [--steps fold]

Prints one JSON line per step, medians of ``--repeats``:

- ``prior_fit``: :func:`jobs.core.estimators_shrinkage.fit_group_priors` in pandas, per
  level (template, class, host), on the 1/8 of state/dt=D whose URL hash is 0 mod 8 (about
  one update_state bucket);
- ``prior_fit_bucket``: the same fit of the host level on the whole of state/dt=D (one
  pandas call, as a fit bucket of update_state at 10M URLs holds several hundred thousand
  rows), with its EM in chunks of whole groups (``chunk_rows`` default) and in one piece:
  median seconds and the peak of memory allocated during the call (tracemalloc, which
  numpy reports to), in MB;
- ``fold``: update_state's fold function (:func:`jobs.update_state._fold_fn`, i.e.
  :func:`jobs.core.state_update.fold_day` plus the importance weights, Arrow in and out) over 8
  URL-hash buckets of state/dt=D-1 with the fetch logs of D and the importance table (the
  rows a bucket's cogroup hands it; no trust flags, no signals; the logs read raw, so with
  their ``host`` column, as the generator writes them): seconds for all 8;
- ``log_checks``: :func:`jobs.ingest.read_fetch_logs` of D, checked and persisted, counted;
- ``map_overhead``: state/dt=D persisted in 8 partitions, then a Parquet write alone, after
  an identity ``mapInPandas`` and after an identity ``mapInArrow`` (what passing the wide
  state row through Python costs each way).

To compare commits, run it from a ``git worktree`` of each (copy this file into an older
one). Spark runs on ``local[2]`` with the project's embedded settings.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jobs.config import load_config
from jobs.core import estimators_shrinkage
from jobs.core.estimators_stats import STATS_COLUMNS, observation_count


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)


def prior_fit(root: str, date: str, repeats: int) -> dict:
    files = sorted(Path(root, "state", f"dt={date}").glob("*.parquet"))
    state = pd.concat([pq.read_table(f, columns=["url", "host", *STATS_COLUMNS]).to_pandas()
                       for f in files], ignore_index=True)
    part = state[pd.util.hash_pandas_object(state["url"], index=False) % 8 == 0]
    part = part.reset_index(drop=True)
    stats = part[list(STATS_COLUMNS)].astype(float)
    out = {"step": "prior_fit", "rows": len(part)}
    for level in ("template", "class", "host"):
        groups = estimators_shrinkage.group_key_from_url(part["url"], level,
                                                         hosts=part["host"]).to_numpy(object)
        out[f"{level}_s"] = _median_seconds(
            lambda: estimators_shrinkage.fit_group_priors(stats, groups), repeats)
    return out


def fold(root: str, date: str, repeats: int) -> dict:
    import glob

    import numpy as np

    from jobs import schemas, update_state
    from jobs.core import url_hash
    from jobs.paths import previous_day

    def read(table_dir):
        return pd.concat([pq.read_table(f).to_pandas()
                          for f in sorted(glob.glob(f"{root}/{table_dir}/*.parquet"))],
                         ignore_index=True)

    def bucket_of(frame):
        return np.mod(url_hash.xxh64(frame["url"].to_numpy(object)).astype(np.int64), 8)

    # As update_state reads it (ingest.project): a state written before an optional column
    # existed gets it as null.
    state_schema = schemas.STATE.arrow_schema(all_nullable=True)
    state = read(f"state/dt={previous_day(date)}").reindex(columns=state_schema.names)
    logs, weights = read(f"fetch_logs/dt={date}"), read("importance")
    cols = update_state._ROW_COLS
    fetch_rows = logs.reindex(columns=cols).assign(is_signal=False, is_importance=False)
    weight_rows = pd.DataFrame({"url": weights["url"],
                                "importance": weights["importance"].astype(float),
                                "is_signal": False, "is_importance": True})
    sb, fb, wb = bucket_of(state), bucket_of(fetch_rows), bucket_of(weight_rows)

    def bucket_rows(b):  # through Arrow, as the cogroup hands them (null ints as floats)
        parts = [pa.Table.from_pandas(f, preserve_index=False)
                 for f in (fetch_rows[fb == b], weight_rows[wb == b])]
        return pa.Table.from_pandas(pa.concat_tables(parts, promote_options="default")
                                    .to_pandas().reindex(columns=cols), preserve_index=False)

    # Arrow tables, as the cogroup's applyInArrow hands them.
    buckets = [(pa.Table.from_pandas(state[sb == b].reset_index(drop=True), preserve_index=False,
                                     schema=state_schema),
                bucket_rows(b)) for b in range(8)]
    fn = update_state._fold_fn(load_config(None, [f"paths.root={root}"]), date)
    return {"step": "fold", "state_rows": len(state), "log_rows": len(logs),
            "importance_rows": len(weights),
            "seconds": _median_seconds(lambda: [fn(st, rows) for st, rows in buckets], repeats)}


def _peak_mb(fn) -> float:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    finally:
        tracemalloc.stop()


def prior_fit_bucket(root: str, date: str, repeats: int) -> dict:
    files = sorted(Path(root, "state", f"dt={date}").glob("*.parquet"))
    state = pd.concat([pq.read_table(f, columns=["host", *STATS_COLUMNS]).to_pandas()
                       for f in files], ignore_index=True)
    stats, groups = state[list(STATS_COLUMNS)].astype(float), state["host"].to_numpy(object)
    out = {"step": "prior_fit_bucket", "rows": len(state), "groups": len(set(groups)),
           "observed_rows": int((observation_count(stats) > 0).sum())}
    for name, chunk in (("chunked", {}), ("whole", {"chunk_rows": 10**12})):
        def fit():
            return estimators_shrinkage.fit_group_priors(stats, groups, **chunk)
        out[f"{name}_s"] = _median_seconds(fit, repeats)
        out[f"{name}_peak_mb"] = _peak_mb(fit)
    return out


def spark_steps(root: str, date: str, repeats: int) -> list[dict]:
    from pyspark.sql import functions as F

    from jobs import ingest
    from jobs.spark_session import get_spark

    cfg = load_config(None, ["spark.master=local[2]", f"paths.root={root}",
                             "spark.settings.spark.driver.memory=6g"])
    spark = get_spark(cfg, "bench_update_steps")

    def checked_logs():
        cached = []
        clean, _ = ingest.read_fetch_logs(spark, cfg, date, cached)
        clean.select(F.count("*")).collect()
        for frame in cached:
            frame.unpersist()

    lines = [{"step": "log_checks", "seconds": _median_seconds(checked_logs, repeats)}]
    state = spark.read.parquet(str(Path(root, "state", f"dt={date}"))).repartition(8).persist()
    state.count()
    scratch = tempfile.mkdtemp(prefix="bench_update_steps_")

    def write(frame):
        return lambda: frame.write.mode("overwrite").parquet(f"{scratch}/out")

    def same(batches):
        yield from batches

    try:
        lines.append({"step": "map_overhead", "rows": state.count(),
                      "write_s": _median_seconds(write(state), repeats),
                      "mapInPandas_write_s": _median_seconds(
                          write(state.mapInPandas(same, state.schema)), repeats),
                      "mapInArrow_write_s": _median_seconds(
                          write(state.mapInArrow(same, state.schema)), repeats)})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        state.unpersist()
        spark.stop()
    return lines


STEPS = {"prior_fit": prior_fit, "prior_fit_bucket": prior_fit_bucket, "fold": fold,
         "spark": spark_steps}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="a bench_daily root with state/dt=DATE")
    ap.add_argument("--date", default="2024-01-03")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", nargs="+", choices=sorted(STEPS), default=sorted(STEPS),
                    help="steps to run (default: all; spark = log_checks and map_overhead)")
    args = ap.parse_args(argv)
    for name in args.steps:
        out = STEPS[name](args.root, args.date, args.repeats)
        for line in out if isinstance(out, list) else [out]:
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
