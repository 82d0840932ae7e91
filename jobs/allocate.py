"""Stage 3: state/dt=D -> candidate visits for [D+1, D+2) and each lane's budget cut.

Passes over the page table, fixed as budget and data grow (see jobs.policy_rates and
docs/allocation-spark.md): (1) per-host summaries (caps, lane counts, level bounds, frontier
importance histogram); (2) budget-aware policies only: every host's refresh demand curve
on a shared grid, summed per bucket; the driver solves the lane budgets, the split and the
global level from these small rows; (3) every host computes its final rates, due visits
and capped candidates, written to ``_work/dt=D/candidates`` (visits only). The budget cut
is solved on the driver from a priority histogram of the candidates (not the page table) and
applied by build_schedule; it is committed in the partition's marker together with the run's
figures (the hosts' due and carried visits and expected-freshness sums, summed), which the
run record reports. The same pass writes ``plan/dt=D``, one row per page with its planned rate,
lane and the reason for the rate (:mod:`jobs.core.plan_table`), a committed partition kept as
long as state.

Inputs beyond state: frontier/, host_policy/, the operator's overrides/ (:mod:`jobs.overrides`:
pins, host pauses, forced fetches, forgotten URLs; bad rows quarantined), and when present the
hosts/dt=D table of the update side (cap_factor, trust_etag, trust_lm, audit_wanted), which
must be committed.

Run: ``python -m jobs.allocate --date D`` or ``spark-submit jobs/allocate.py --date D``.
The lab's backtest passes :func:`run` a ``lambda_table`` (url, lambda: the simulator's true
rates, the "oracle"); no command line or DAG path sets it.
"""
from __future__ import annotations

import sys

from jobs import (budget_cut, ingest, overrides, partitions, policy_rates, schemas,
                  storage)
from jobs.cli import stage_main
from jobs.config import Config
from jobs.core import budget_curve, host_plan
from jobs.core.probes import PROBE_COLUMNS
from jobs.core.state_update import UNCHANGED_COLUMN
from jobs.core.timing import TIMING_COLUMNS
from jobs.params import budget_params
from jobs.paths import planning_window, work_path
from jobs.runlog import write_stage_record
from jobs import snapshots
from jobs.spark_session import get_spark

# The state columns a page carries into allocate as they are (the others are cast or filled).
STATE_PAGE_COLUMNS = ("host", "url", "lane", "lambda_hat", "importance", "interval_s",
                      "last_fetch_at", "last_success_at", "last_status", "etag",
                      "last_modified", "gone", "last_known_at", "last_change_at")


def load_pages(spark, cfg: Config, run_date: str, lambda_table: str | None = None):
    """Known pages (state) and new frontier pages, joined with host politeness (and, in a
    backtest, with the oracle's ``lambda_table``); with the sum of both tables' footer row
    counts, a bound on the page count that costs no pass over them. The frontier is the
    ``frontier`` table plus the URLs of today's push signals not in state
    (:func:`signal_frontier`). Also returns the signal discovery counts."""
    from pyspark.sql import functions as F

    files = partitions.committed_files(cfg.paths.table("state", run_date), "state")
    page_rows = sum(f.num_rows for f in schemas.check_files(schemas.STATE, files))
    state = (spark.read.parquet(*files) if files
             else spark.createDataFrame([], schemas.STATE.spark_ddl()))
    signal = (F.col("pending_signal_at").cast("timestamp") if "pending_signal_at" in state.columns
              else F.lit(None).cast("timestamp"))
    unchanged = (F.col(UNCHANGED_COLUMN).cast("timestamp") if UNCHANGED_COLUMN in state.columns
                 else F.lit(None).cast("timestamp"))
    # State written before the time-of-day sums existed has none: no rhythm learnt yet.
    rhythm = [(F.col(c) if c in state.columns else F.lit(None)).cast("double").alias(c)
              for c in TIMING_COLUMNS]
    known = state.select(
        *STATE_PAGE_COLUMNS, F.lit("conditional").alias("method_hint"),
        signal.alias("pending_signal_at"), *rhythm,
        *[F.col(c).cast("double").alias(c) for c in PROBE_COLUMNS],
        unchanged.alias(UNCHANGED_COLUMN))

    frontier, bad_frontier = ingest.read_frontier(spark, cfg, run_date)
    page_rows += storage.partition_rows(cfg.paths.table("frontier", run_date))
    quarantined = ingest.write_quarantine(cfg, run_date, "frontier", bad_frontier)
    from_signals, signal_counts = signal_frontier(spark, cfg, run_date, state, frontier)
    page_rows += signal_counts["signal_urls_discovered"]
    if from_signals is not None:
        frontier = (from_signals if frontier is None else
                    frontier.select("url", "importance", "host").unionByName(from_signals))
    if frontier is not None:
        new = (frontier.dropDuplicates(["url"]).join(state.select("url"), "url", "left_anti")
               .select("host", "url", F.lit("discovery").alias("lane"),
                       F.lit(None).cast("double").alias("lambda_hat"),
                       # null stays null: the host prior fills it (jobs.core.lanes)
                       F.col("importance").cast("double").alias("importance"),
                       F.lit(None).cast("double").alias("interval_s"),
                       F.lit(None).cast("timestamp").alias("last_fetch_at"),
                       F.lit(None).cast("timestamp").alias("last_success_at"),
                       F.lit(None).cast("int").alias("last_status"),
                       F.lit(None).cast("string").alias("etag"),
                       F.lit(None).cast("string").alias("last_modified"),
                       F.lit(False).alias("gone"),
                       F.lit(None).cast("timestamp").alias("last_known_at"),
                       F.lit(None).cast("timestamp").alias("last_change_at"),
                       F.lit("full").alias("method_hint"),
                       F.lit(None).cast("timestamp").alias("pending_signal_at"),
                       *[F.lit(None).cast("double").alias(c)
                         for c in (*TIMING_COLUMNS, *PROBE_COLUMNS)],
                       F.lit(None).cast("timestamp").alias(UNCHANGED_COLUMN)))
        pages = known.unionByName(new)
    else:
        pages = known

    policy, bad_policy = ingest.read_host_policy(spark, cfg, run_date)
    quarantined += ingest.write_quarantine(cfg, run_date, "host_policy", bad_policy)
    pages = ingest.with_politeness(cfg, pages, policy)
    return (with_oracle(spark, lambda_table, with_host_health(spark, cfg, run_date, pages)),
            quarantined, page_rows, signal_counts)


def signal_frontier(spark, cfg: Config, run_date: str, state, frontier):
    """Today's push signals for URLs neither in state nor in the frontier table, as frontier
    rows (host, url, importance null: the host prior fills it, as for any frontier URL),
    from the hosts ``signals.discover_from`` admits (``trusted``: ``hosts.signal_trusted``
    of the committed hosts/dt=D). Returns (rows or None, counts): the URLs taken and the
    ones left out. The signals' bad rows are update_state's to quarantine (the same
    partition and rules): here they are just not read."""
    from pyspark.sql import functions as F

    none = {"signal_urls_discovered": 0, "signal_urls_not_discovered": 0}
    mode = cfg.signals.discover_from
    signals, _ = ingest.read_signals(spark, cfg, run_date)
    if signals is None:
        return None, none
    cand = signals.select("host", "url").dropDuplicates(["url"]).join(
        state.select("url"), "url", "left_anti")
    if frontier is not None:
        cand = cand.join(frontier.select("url"), "url", "left_anti")
    files = partitions.committed_files(cfg.paths.table("hosts", run_date), "hosts")
    if files:
        trust = (spark.read.parquet(*files).select("host", "signal_trusted")
                 .dropDuplicates(["host"]))
        cand = cand.join(F.broadcast(trust), "host", "left")
    else:
        cand = cand.withColumn("signal_trusted", F.lit(None).cast("boolean"))
    take = {"any": F.lit(True), "none": F.lit(False),
            "trusted": F.coalesce(F.col("signal_trusted"), F.lit(False))}[mode]
    cand = cand.withColumn("_take", take)
    row = cand.agg(F.count("*").alias("n"),
                   F.sum(F.col("_take").cast("long")).alias("taken")).first()
    taken = int(row["taken"] or 0)
    counts = {"signal_urls_discovered": taken,
              "signal_urls_not_discovered": int(row["n"] or 0) - taken}
    if taken == 0:
        return None, counts
    rows = cand.filter("_take").select("url", F.lit(None).cast("double").alias("importance"),
                                        "host")
    return rows, counts


# For a host the committed hosts table has no row for (a frontier-only host): trust no
# validator until it has earned it, full cap, no audit.
HOST_DEFAULTS = {"cap_factor": ("double", 1.0), "trust_etag": ("boolean", False),
                 "trust_lm": ("boolean", False), "audit_wanted": ("boolean", False),
                 "probe_due": ("boolean", False)}


def with_host_health(spark, cfg: Config, run_date: str, pages):
    """Join the update side's committed hosts/dt=D table. A missing or uncommitted
    table is a MissingPartitionError: "trust every validator" is never a fallback."""
    from pyspark.sql import functions as F

    files = partitions.committed_files(cfg.paths.table("hosts", run_date), "hosts")
    schemas.check_files(schemas.HOSTS, files)
    if files:
        hosts = spark.read.parquet(*files)
        # An optional column (probe_due) absent from an older table takes its default below.
        cols = [F.col(c).cast(t).alias(c) for c, (t, _) in HOST_DEFAULTS.items()
                if c in hosts.columns]
        pages = pages.join(hosts.select("host", *cols).dropDuplicates(["host"]), "host", "left")
    for c, (t, default) in HOST_DEFAULTS.items():
        value = F.lit(default).cast(t)
        pages = (pages.withColumn(c, F.coalesce(F.col(c), value)) if c in pages.columns
                 else pages.withColumn(c, value))
    # A health factor outside (0, 1] is a producer bug; it may only ever lower the cap.
    return pages.withColumn("cap_factor", F.least(F.greatest("cap_factor", F.lit(0.0)),
                                                  F.lit(1.0)))


def with_oracle(spark, path: str | None, pages):
    """Oracle mode, backtests only: the (url, lambda) table at ``path`` replaces lambda_hat,
    e.g. the simulator's true rates, to run 'optimal with the true lambda'. Not a config
    key: production never has true rates, and the DAG never passes one."""
    from pyspark.sql import functions as F

    if not path:
        return pages
    files = storage.list_parquet_files(path)
    if not files:
        raise schemas.SchemaError("lambda_table", path, None, "no Parquet files found")
    oracle = (spark.read.parquet(*files).select("url", F.col("lambda").cast("double")
                                                .alias("_lambda"))
              .dropDuplicates(["url"]))
    return (pages.join(oracle, "url", "left")
            .withColumn("lambda_hat", F.coalesce("_lambda", "lambda_hat")).drop("_lambda"))


def plan_table_frame(rows):
    """plan_bucket's per-page rows as the ``plan/dt=D`` table (:data:`jobs.schemas.PLAN`):
    epoch seconds back to a timestamp, pandas' NaN as null, the columns in contract order."""
    from pyspark.sql import functions as F

    def null_nan(c):
        return F.when(~F.isnan(c), F.col(c))

    # To the nearest microsecond: timestamp_seconds truncates the double, which put about one
    # page in eight a microsecond before the state's own last_success_at.
    def at(c):
        return F.timestamp_micros(F.round(null_nan(c) * 1_000_000).cast("long"))

    return (rows.withColumn("last_success_at", at("last_success_s"))
            .withColumn("stale_since_at", at("stale_since_s"))
            .withColumn("marginal_value", null_nan("marginal_value"))
            .select(*schemas.PLAN.names))


# Host figures summed over the run's hosts (all but the host's own cap).
FIGURE_SUMS = tuple(c for c in host_plan.HOST_FIGURES if c != "cap")


#: The committed partitions of D allocate reads (the state and the update side's hosts).
REQUIRED = ("state", "hosts")


def run(cfg: Config, run_date: str, spark=None, *, lambda_table: str | None = None) -> dict:
    """Allocate for ``run_date``; ``lambda_table``: the backtest oracle's true rates (see
    :func:`with_oracle`), never set by the DAG."""
    from pyspark.sql import functions as F

    for table in REQUIRED:  # every input refusal before a Spark session starts
        partitions.committed_files(cfg.paths.table(table, run_date), table)
    inputs = snapshots.record(cfg, run_date)  # which host_policy (and importance) snapshot
    spark = spark or get_spark(cfg, "allocate")
    window_start, window_end = planning_window(run_date)
    pages, quarantined, page_rows, signal_counts = load_pages(spark, cfg, run_date,
                                                              lambda_table)
    active, bad_overrides = overrides.load(cfg, run_date)
    override_quarantined = overrides.quarantine(spark, cfg, run_date, bad_overrides)
    quarantined += override_quarantined
    pages = overrides.apply(spark, pages, active)
    # The three passes read the same bucketed page table: kept (persisted) after the first
    # one builds it, so the state is read, joined and shuffled once, not three times.
    buckets = policy_rates.bucketed(cfg, pages, page_rows).persist()
    ctx, rate_info = policy_rates.solve_levels(spark, cfg, buckets, window_start, window_end)

    # One pass plans every host: its candidate visits and one row of its figures (url null),
    # kept (persisted) so they can be split without planning twice.
    planned = policy_rates.per_bucket(buckets, lambda pdf: host_plan.plan_bucket(pdf, ctx),
                                      host_plan.PLAN_DDL).persist()
    figures_row, plan_row = F.col("url").isNull(), F.col("reason").isNotNull()
    cand_path = work_path(cfg, run_date, "candidates")
    # Files first, the cut solved from exactly those files, then both committed together,
    # with the run's figures beside them (summed over hosts: a few numbers, not rows).
    files = partitions.append_files(
        planned.filter(~figures_row & ~plan_row).select(*host_plan.CANDIDATE_COLUMNS), cand_path)
    plan_rows = partitions.write_committed(plan_table_frame(planned.filter(plan_row)),
                                           cfg.paths.table("plan", run_date), "plan")
    totals = (planned.filter(figures_row)
              .agg(*[F.sum(c).alias(c) for c in FIGURE_SUMS]).first().asDict())
    planned.unpersist()
    buckets.unpersist()
    written = spark.read.parquet(*files)
    daily = budget_params(cfg).daily_fetches
    cut = budget_cut.solve(written, rate_info["lane_budgets"], daily)
    partitions.commit_files(cand_path, "candidates", files,
                            extra={"cut": cut, "figures": totals})

    def ratio(num, den):
        return float(totals[num] / totals[den]) if totals[den] else None

    record = {
        "policy": cfg.policy.name, "quarantined_rows": quarantined,
        "overrides": {"in_force": int(len(active)),
                      "by_action": {str(k): int(v) for k, v in
                                    active["action"].value_counts().sort_index().items()},
                      "quarantined": override_quarantined},
        "due_total": int(totals["due_count"] or 0),
        "host_carried": int(totals["carried"] or 0),
        "signals_pending": int(totals["signals"] or 0),
        "discovery_deferred": int(totals["discovery_deferred"] or 0),
        "signal_deferred": int(totals["signal_deferred"] or 0), **signal_counts,
        "health_withheld": int(round(totals["health_withheld"] or 0.0)),
        "expected_freshness": ratio("weighted_freshness", "weight_sum"),
        "expected_freshness_fast": ratio("wf_fast", "w_fast"),
        "expected_freshness_refresh": ratio("wf_refresh", "w_refresh"),
        **budget_curve.run_figures(totals),
        # the day's budget arithmetic over the URLs it planned (state's, gone included)
        "days_per_pass": budget_curve.days_per_pass(totals["known_urls"] or 0, daily),
        "budget_per_url": budget_curve.budget_per_url(totals["known_urls"] or 0, daily),
        "budget_cut": cut, "plan_rows": plan_rows["rows"], **rate_info,
        **ingest.crawl_delay_figures(spark, cfg, run_date), **inputs,
    }
    write_stage_record(cfg, run_date, "allocate", record)
    return record


def main(argv=None) -> int:
    return stage_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
