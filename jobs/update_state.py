"""Stage 2: yesterday's state + today's fetch logs -> state/dt=D (incremental).

Never rescans log history: reads ``state/dt=D-1`` and ``fetch_logs/dt=D`` only. Rows of
both are bucketed by a hash of the URL and co-grouped, so each pandas call folds a whole
bucket with ``jobs.core.state_update.fold_day``.

Run: ``python -m jobs.update_state --date D`` or ``spark-submit jobs/update_state.py --date D``.
"""
from __future__ import annotations

import argparse
import sys
from datetime import date, timedelta

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(__file__)))

from jobs import ingest, schemas, storage  # noqa: E402
from jobs.config import Config, add_config_args, config_from_args  # noqa: E402
from jobs.core import state_update  # noqa: E402
from jobs.runlog import write_stage_record  # noqa: E402
from jobs.spark_session import get_spark  # noqa: E402


def previous_day(run_date: str) -> str:
    return (date.fromisoformat(run_date) - timedelta(days=1)).isoformat()


def _fold_fn(cfg: Config, run_date: str):
    params = state_update.UpdateParams(floor_s=cfg.intervals.floor_s, cap_s=cfg.intervals.cap_s,
                                       initial_s=cfg.intervals.initial_s,
                                       gone_after=cfg.policy.gone_after)

    def fold(state_pdf, logs_pdf):
        if len(logs_pdf) == 0 and len(state_pdf) == 0:
            return state_update.empty_state()
        if len(state_pdf) == 0:
            state_pdf = state_update.empty_state()
        out = state_update.fold_day(state_pdf[state_update.STATE_COLUMNS], logs_pdf,
                                    run_date, params)
        return out

    return fold


def run(cfg: Config, run_date: str, spark=None, from_empty: bool = False) -> dict:
    from pyspark.sql import functions as F

    spark = spark or get_spark(cfg, "update_state")
    logs, bad_logs = ingest.read_fetch_logs(spark, cfg, run_date)
    importance, bad_imp = ingest.read_importance(spark, cfg)
    prev_path = cfg.paths.table("state", previous_day(run_date))
    prev_files = [] if from_empty else storage.list_parquet_files(prev_path)
    schemas.check_files(schemas.STATE, prev_files)
    if prev_files:
        prev = spark.read.parquet(*prev_files).select(*state_update.STATE_COLUMNS)
    else:
        prev = spark.createDataFrame([], schemas.STATE.spark_ddl())

    buckets = cfg.spark.state_buckets
    log_cols = ["url", "host", "fetched_at", "status", "etag", "last_modified", "content_hash"]
    logs = logs.select(*log_cols).withColumn("_b", F.pmod(F.xxhash64("url"), F.lit(buckets)))
    prev = prev.withColumn("_b", F.pmod(F.xxhash64("url"), F.lit(buckets)))
    folded = (prev.groupBy("_b").cogroup(logs.groupBy("_b"))
              .applyInPandas(_fold_fn(cfg, run_date), schemas.STATE.spark_ddl()))
    default_imp = F.lit(float(cfg.policy.default_importance))
    if importance is not None:
        folded = (folded.drop("importance").join(importance, "url", "left")
                  .withColumn("importance", F.coalesce("importance", default_imp)))
    else:
        folded = folded.withColumn("importance", default_imp)
    out_path = cfg.paths.table("state", run_date)
    folded.select(*state_update.STATE_COLUMNS).write.mode("overwrite").parquet(out_path)

    written = spark.read.parquet(out_path)
    figures = written.agg(F.count("*").alias("urls_known"),
                          F.sum(F.col("gone").cast("int")).alias("urls_gone")).first().asDict()
    record = {
        "log_rows": int(spark.read.parquet(*ingest.storage.list_parquet_files(
            cfg.paths.table("fetch_logs", run_date))).count()),
        "quarantined_fetch_logs": ingest.write_quarantine(cfg, run_date, "fetch_logs", bad_logs),
        "quarantined_importance": ingest.write_quarantine(cfg, run_date, "importance", bad_imp),
        "urls_known": int(figures["urls_known"] or 0),
        "urls_gone": int(figures["urls_gone"] or 0),
    }
    write_stage_record(cfg, run_date, "update_state", record)
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", required=True, help="logical date D (YYYY-MM-DD)")
    add_config_args(parser)
    args = parser.parse_args(argv)
    print(run(config_from_args(args), args.date))
    return 0


if __name__ == "__main__":
    sys.exit(main())
