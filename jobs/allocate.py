"""Stage 3: state/dt=D -> candidate visits for [D+1, D+2) and each lane's budget cut.

Passes over the page table: (1) budget-aware policies only: every host emits its demand
curve on a shared grid and the driver solves the global level from the small summed
curves; (2) every host computes rates, due visits and its capped candidates, written to
``_work/dt=D/candidates``. The budget cut itself is solved on the driver from a priority
histogram of the candidates (not the page table) and applied by build_schedule.

Run: ``python -m jobs.allocate --date D`` or ``spark-submit jobs/allocate.py --date D``.
"""
from __future__ import annotations

import argparse
import sys

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(__file__)))

from jobs import budget_cut, ingest, schemas, storage  # noqa: E402
from jobs.config import Config, add_config_args, config_from_args  # noqa: E402
from jobs.core import host_plan  # noqa: E402
from jobs.policy_rates import attach_rates  # noqa: E402
from jobs.runlog import write_stage_record  # noqa: E402
from jobs.spark_session import get_spark  # noqa: E402

DAY_S = 86400.0


def planning_window(run_date: str) -> tuple[float, float]:
    """The run for D plans [D+1 00:00, D+2 00:00) UTC, in epoch seconds."""
    _, day_end = ingest.day_bounds(run_date)
    start = day_end.timestamp()
    return start, start + DAY_S


def work_path(cfg: Config, run_date: str, name: str) -> str:
    return f"{cfg.paths.table('_work', run_date)}/{name}"


def load_pages(spark, cfg: Config, run_date: str):
    """Known pages (state) and new frontier pages, joined with host politeness."""
    from pyspark.sql import functions as F

    files = storage.list_parquet_files(cfg.paths.table("state", run_date))
    if not files:
        raise schemas.SchemaError("state", cfg.paths.table("state", run_date), None,
                                  "no state for this date; run update_state first")
    schemas.check_files(schemas.STATE, files)
    state = spark.read.parquet(*files)
    known = state.select(
        "host", "url", "lane", "lambda_hat", "importance", "interval_s", "last_fetch_at",
        "last_success_at", "etag", "last_modified", "gone",
        F.lit("conditional").alias("method_hint"))

    frontier, bad_frontier = ingest.read_frontier(spark, cfg, run_date)
    quarantined = ingest.write_quarantine(cfg, run_date, "frontier", bad_frontier)
    if frontier is not None:
        new = (frontier.dropDuplicates(["url"]).join(state.select("url"), "url", "left_anti")
               .select("host", "url", F.lit("discovery").alias("lane"),
                       F.lit(None).cast("double").alias("lambda_hat"),
                       F.coalesce("importance", F.lit(cfg.policy.default_importance))
                       .alias("importance"),
                       F.lit(None).cast("double").alias("interval_s"),
                       F.lit(None).cast("timestamp").alias("last_fetch_at"),
                       F.lit(None).cast("timestamp").alias("last_success_at"),
                       F.lit(None).cast("string").alias("etag"),
                       F.lit(None).cast("string").alias("last_modified"),
                       F.lit(False).alias("gone"), F.lit("full").alias("method_hint")))
        pages = known.unionByName(new)
    else:
        pages = known

    policy, bad_policy = ingest.read_host_policy(spark, cfg)
    quarantined += ingest.write_quarantine(cfg, run_date, "host_policy", bad_policy)
    pol = cfg.politeness
    if policy is not None:
        pages = pages.join(policy, "host", "left")
    else:
        pages = (pages.withColumn("crawl_delay_s", F.lit(None).cast("double"))
                 .withColumn("max_fetches_per_day", F.lit(None).cast("long")))
    pages = (pages.withColumn("crawl_delay_s",
                              F.coalesce("crawl_delay_s", F.lit(pol.default_crawl_delay_s)))
             .withColumn("max_fetches_per_day",
                         F.coalesce("max_fetches_per_day",
                                    F.lit(pol.default_max_fetches_per_day).cast("long"))))
    return pages, quarantined


def run(cfg: Config, run_date: str, spark=None) -> dict:
    from pyspark.sql import functions as F

    spark = spark or get_spark(cfg, "allocate")
    window_start, window_end = planning_window(run_date)
    pages, quarantined = load_pages(spark, cfg, run_date)
    pages, rate_info = attach_rates(spark, cfg, pages)

    def plan(pdf):
        return host_plan.plan_host(pdf, window_start, window_end)

    candidates = pages.groupBy("host").applyInPandas(plan, host_plan.CANDIDATE_DDL)
    cand_path = work_path(cfg, run_date, "candidates")
    candidates.write.mode("overwrite").parquet(cand_path)

    written = spark.read.parquet(cand_path)
    cut = budget_cut.solve(written, cfg)
    totals = (written.filter(F.col("url").isNull())
              .agg(F.sum("due_count").alias("due_total"), F.sum("carried").alias("host_carried"),
                   F.sum("known_urls").alias("known"), F.sum("weight_sum").alias("w"),
                   F.sum("weighted_freshness").alias("wf")).first().asDict())
    storage.write_json(work_path(cfg, run_date, "cut.json"), cut)
    w = totals["w"] or 0.0
    record = {
        "policy": cfg.policy.name, "quarantined_rows": quarantined,
        "due_total": int(totals["due_total"] or 0),
        "host_carried": int(totals["host_carried"] or 0),
        "expected_freshness": float(totals["wf"] / w) if w > 0 else None,
        "budget_cut": cut, **rate_info,
    }
    write_stage_record(cfg, run_date, "allocate", record)
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
