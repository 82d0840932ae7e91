"""Stage 4: candidates -> per-host schedule shards for D+1, checked, plus metrics/dt=D.

Applies the budget cut, turns up to ``budget.audit_share`` x budget conditional visits on
``audit_wanted`` hosts into full fetches (validator audit: a deterministic hash choice),
writes freshness-audit-sample visits as lane ``audit`` / method ``full`` (measurement-only
fetches: the fleet logs them with lane ``audit`` and keeps its indexed copy), places each host's
visits at least its crawl delay apart, and
writes one deterministic Parquet file per shard from the executors (every host lies in
exactly one shard). A schedule that would be absurd (over budget, a host's rows closer
than its crawl delay, or empty while visits are due) fails here, before anything is
published. ``_shards.json`` is written last and is what publish trusts.

Run: ``python -m jobs.build_schedule --date D`` or ``spark-submit jobs/build_schedule.py``.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd

from jobs import budget_cut, ingest, metrics, partitions, schemas, shards, storage
from jobs.cli import stage_main
from jobs.config import Config
from jobs.errors import AbsurdScheduleError  # noqa: F401  (its home: jobs.errors)
from jobs.core import lanes, plan
from jobs.params import budget_params
from jobs.paths import planning_window, schedule_date, work_path
from jobs.fleet.schedule import LANES
from jobs.runlog import read_stage_record, write_stage_record
from jobs.spark_session import get_spark

SHARD_RESULT_DDL = shards.SHARD_INFO_DDL + ", min_gap_ratio double"


def _place_and_write(out_dir: str, n_shards: int, window_start: float, window_end: float):
    # Rows expire at the end of the window they were planned for: the next day's plan
    # replaces them, and a fetcher left without one must not replay a stale day.
    expires_at = pd.Timestamp(round(window_end * 1e6), unit="us", tz="UTC")

    def write_group(pdf: pd.DataFrame) -> pd.DataFrame:
        placed, min_ratio = [], np.inf
        for _, g in pdf.groupby("host", sort=True):
            delay = float(g["crawl_delay_s"].iloc[0])
            t = plan.place_host_visits(g["due_s"].to_numpy(), delay, window_start, window_end,
                                       g["priority"].to_numpy(),
                                       not_before=float(g["_blocked_s"].iloc[0]),
                                       spread=bool(g["_spread"].iloc[0]))
            stamps = pd.to_datetime(np.round(t * 1e6).astype("int64"), unit="us", utc=True)
            if len(t) > 1:  # measured on the times as written
                gaps = np.diff(np.sort(stamps.asi8)) / 1e6
                min_ratio = min(min_ratio, float(gaps.min() / delay))
            placed.append(g.assign(not_before=stamps, expires_at=expires_at))
        rows = pd.concat(placed, ignore_index=True)
        info = shards.write_shard(rows[schemas.SCHEDULE.names], out_dir,
                                  int(pdf["shard"].iloc[0]), n_shards=n_shards)
        out = {k: v for k, v in info.items() if k != "lanes"}
        out["lanes_json"] = json.dumps(info["lanes"], sort_keys=True)
        out["min_gap_ratio"] = None if np.isinf(min_ratio) else min_ratio
        return pd.DataFrame([out])
    return write_group


def with_host_limits(spark, cfg: Config, run_date: str, selected):
    """Each row's host's Retry-After wait (``_blocked_s``, epoch seconds, NaN: none) and
    whether its visits are spread evenly over the day (``_spread``): it is under a
    served-rate limit (L < N) or it has struggled before (a ``served_ceiling``: a host whose
    429s asked for 174 s between requests but whose robots.txt says 1.7 s and whose cap
    comes from ``max_fetches_per_day`` is not limited, yet its overdue visits packed 1.7 s
    apart at midnight all answered 429). From the committed hosts/dt=D allocate planned
    with (jobs.core.plan.place_host_visits uses them)."""
    from pyspark.sql import functions as F

    files = partitions.committed_files(cfg.paths.table("hosts", run_date), "hosts")
    cols = [F.col("blocked_until").cast("double").alias("_blocked_s"),
            ((F.col("rate_limit") < F.col("nominal_cap"))
             | F.col("served_ceiling").isNotNull()).alias("_spread")]
    if files:
        hosts = ingest.project(spark.read.parquet(*files), schemas.HOSTS).select("host", *cols)
        selected = selected.join(hosts.dropDuplicates(["host"]), "host", "left")
    else:
        selected = selected.select("*", *[F.lit(None).cast(t).alias(c) for c, t in
                                          (("_blocked_s", "double"), ("_spread", "boolean"))])
    return (selected.withColumn("_blocked_s", F.coalesce("_blocked_s", F.lit(float("nan"))))
            .withColumn("_spread", F.coalesce("_spread", F.lit(False))))


def check_schedule(infos: list[dict], budget: int, due_total: int) -> None:
    """Refuse a schedule over ``budget`` (the day's fetches), closer than a crawl delay, or
    empty while visits are due."""
    rows = sum(i["rows"] for i in infos)
    if rows > budget:
        raise AbsurdScheduleError(f"{rows} rows exceed the budget {budget}")
    gaps = [i["min_gap_ratio"] for i in infos if i.get("min_gap_ratio") is not None]
    if gaps and min(gaps) < 1.0 - 1e-9:
        raise AbsurdScheduleError(f"a host's rows are closer than its crawl delay "
                                  f"(min gap = {min(gaps):.3f} x delay)")
    if rows == 0 and due_total > 0 and budget > 0:
        raise AbsurdScheduleError(f"no rows scheduled while {due_total} visits are due")


def run(cfg: Config, run_date: str, spark=None) -> dict:
    from pyspark.sql import functions as F

    # Every input refusal before a Spark session starts (and before any delete).
    cand_path = work_path(cfg, run_date, "candidates")
    files = partitions.committed_files(cand_path, "candidates")
    partitions.committed_files(cfg.paths.table("hosts", run_date), "hosts")
    read_stage_record(cfg, run_date, "allocate")
    spark = spark or get_spark(cfg, "build_schedule")
    window_start, window_end = planning_window(run_date)
    cut = partitions.read_marker(cand_path)["extra"]["cut"]
    candidates = spark.read.parquet(*files)
    selected = budget_cut.apply(candidates, cut)
    # Pulled-forward visits are refresh visits to the fleet; the metrics count them apart.
    selected = selected.withColumn("lane", F.when(F.col("lane") == budget_cut.BACKFILL,
                                                  F.lit("refresh")).otherwise(F.col("lane")))
    backfill = int(cut.get(budget_cut.BACKFILL, {}).get("selected", 0))
    bp = budget_params(cfg)
    selected, conversions = audit_conversions(selected, lanes.share_targets(bp)["audit"],
                                              schedule_date(run_date))
    # Audit-sample visits keep lane ``audit``: update_state scores exactly the fetch-log rows
    # of that lane, and treats them as measurement-only.
    selected = with_host_limits(spark, cfg, run_date, selected)
    n_shards = cfg.schedule.n_shards
    selected = selected.withColumn(
        "shard", F.pmod(F.crc32(F.col("host").cast("binary")), F.lit(n_shards)).cast("int"))

    out_dir = cfg.paths.table("schedules", schedule_date(run_date))
    # A rerun replaces the date's files (names are content-addressed, so stale ones linger).
    storage.delete_dir(out_dir)
    infos = [r.asDict() for r in selected.groupBy("shard").applyInPandas(
        _place_and_write(out_dir, n_shards, window_start, window_end), SHARD_RESULT_DDL
    ).collect()]  # one small row per shard file, not per URL
    alloc = read_stage_record(cfg, run_date, "allocate")
    check_schedule(infos, bp.daily_fetches, int(alloc.get("due_total", 0)))
    clean = [shards.shard_info_from_record(i) for i in sorted(infos, key=lambda i: i["shard"])]
    shards.write_shard_index(out_dir, clean, n_shards=n_shards)

    per_lane = {lane: sum(i["lanes"].get(lane, 0) for i in clean)
                for lane in LANES}
    record = {"planned_total": sum(i["rows"] for i in clean), "hosts": sum(i["hosts"] for i in clean),
              # planned_audit: the audit-lane rows actually written
              "files": len(clean), **{f"planned_{k}": v for k, v in per_lane.items()},
              "planned_backfill": backfill,
              "audit_conversions": conversions, "schedule_dir": out_dir}
    write_stage_record(cfg, run_date, "build_schedule", record)
    write_metrics(cfg, run_date, record, bp)
    return record


AUDIT_BINS = 4096


def audit_conversions(selected, limit: int, day: str):
    """Turn up to ``limit`` (the audit share's target, ``floor(audit_share x budget)``)
    conditional visits on audit_wanted hosts into full.

    Which ones: a hash of (url, day) in 4096 bins; the driver sees only the bin counts and
    takes whole bins from the lowest while they fit, so the choice is deterministic, changes
    URL every day, and never exceeds the share.
    """
    from pyspark.sql import functions as F

    eligible = F.col("audit_wanted") & (F.col("method") == "conditional")
    hbin = F.pmod(F.xxhash64(F.col("url"), F.lit(day)), F.lit(AUDIT_BINS))
    counts = (selected.filter(eligible).groupBy(hbin.alias("b")).count().collect()
              if limit > 0 else [])
    taken, top = 0, -1
    for r in sorted(counts, key=lambda r: r["b"]):
        if taken + r["count"] > limit:
            break
        taken, top = taken + r["count"], r["b"]
    # Evaluated once, before method changes: re-evaluating ``eligible`` after the method
    # column became "full" kept the validators, so audits were sent as conditional GETs
    # that a lying host could answer with a 304 (verify's method/validator check found it).
    convert = F.col("_audit_convert")
    out = (selected.withColumn("_audit_convert", eligible & (hbin <= F.lit(top)))
           .withColumn("method", F.when(convert, "full").otherwise(F.col("method")))
           .withColumn("if_none_match", F.when(convert, None).otherwise(F.col("if_none_match")))
           .withColumn("if_modified_since",
                       F.when(convert, None).otherwise(F.col("if_modified_since")))
           .drop("_audit_convert"))
    return out, taken


def write_metrics(cfg: Config, run_date: str, built: dict, budget: lanes.BudgetParams) -> None:
    upd = read_stage_record(cfg, run_date, "update_state")
    alloc = read_stage_record(cfg, run_date, "allocate")
    plan = metrics.plan_columns(cfg, alloc, built, budget.daily_fetches, budget.split)
    metrics.write(cfg, run_date, metrics.metrics_row(cfg, run_date, upd, alloc, plan,
                                                     "build_schedule"))


def main(argv=None) -> int:
    return stage_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
