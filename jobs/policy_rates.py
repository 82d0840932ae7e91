"""Global levels of every lane from small per-host summaries (Spark glue, driver side).

The page table is hash-partitioned by host into :func:`bucket_count` partitions
(:func:`bucketed`); each pass hands every partition to one pandas call
(:func:`per_bucket`), which works on all its hosts at once (:mod:`jobs.core.host_plan`).
An explicit partition count, not a ``groupBy``, decides the tasks: adaptive query
execution coalesces a ``groupBy``'s small shuffle partitions (3 uneven tasks on 2 cores),
never an explicit ``repartition(n, host)``. allocate keeps the partitioned table (persisted)
for all three passes, so the page table is read, joined and shuffled once.

Passes over the page table (fixed as budget and data grow):

1. **summary**: per host its cap, lane counts and refresh level bounds; per bucket a
   histogram of frontier importance. The driver solves the fast lane's common rate, the
   audit and discovery budgets, the refresh budget, the floor feasibility and the shared
   level grid from these rows.
2. **demand** (budget-aware policies only): every host's capped refresh demand on the grid,
   summed per bucket (``grid_points`` values per bucket). The driver sums the curves, picks
   the split (``budget.split = auto``) and solves the level (``solve_level``).
3. **plan** (in :mod:`jobs.allocate`): every host's final rates at that level, blended
   between the bracketing grid levels, and its candidate visits.

No per-URL row reaches the driver; no pass is repeated per bisection step.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from jobs.config import Config
from jobs.core import budget_curve, host_plan, lanes, plan_work
from jobs.core.allocation_grid import multiplier_grid
from jobs.params import budget_params, plan_context


def bucket_count(cfg: Config, page_rows: int) -> int:
    """``allocation.buckets``, or about ``page_rows / allocation.rows_per_bucket`` when that
    is more: a Python worker holds a whole bucket (its pages, then its plan rows), so a
    fixed count let 10M pages make 625k-page buckets."""
    return max(cfg.allocation.buckets, -(-int(page_rows) // cfg.allocation.rows_per_bucket))


def bucketed(cfg: Config, pages, page_rows: int = 0):
    """``pages`` in :func:`bucket_count` partitions by a hash of the host: one partition
    is one bucket (every page of its hosts); ``page_rows`` bounds the page count (from the
    files' footers: no pass over the pages). Timestamps become epoch seconds (a double,
    whole microseconds / 1e6): Arrow moves timestamps to pandas three times slower, and
    they were most of what a pass paid to hand the page table to Python. The fast lane's
    URL patterns are matched here once (``plan_work.PATTERN_COLUMN``)."""
    from pyspark.sql import functions as F

    times = (*host_plan.TIME_COLUMNS, host_plan.CONFIRMED_COLUMN, host_plan.CHANGE_COLUMN)
    cols = [F.col(c).cast("double").alias(c) if c in times else F.col(c)
            for c in pages.columns]
    pattern = lanes.compile_patterns(cfg.lanes.fast_patterns)
    if pattern is not None:
        # Matched once here, not in each of the three passes (a regex search per URL).
        @F.pandas_udf("boolean")
        def matches(urls: pd.Series) -> pd.Series:
            return pd.Series(lanes.pattern_match(urls.to_numpy(dtype=object), pattern))

        cols.append(matches("url").alias(plan_work.PATTERN_COLUMN))
    return pages.select(*cols).repartition(bucket_count(cfg, page_rows), "host")


def per_bucket(buckets, fn, ddl: str):
    """``fn(bucket DataFrame) -> DataFrame`` once per partition of :func:`bucketed` pages."""
    def run(batches):
        frames = [f for f in batches if len(f)]
        if frames:
            out = fn(pd.concat(frames, ignore_index=True))
            if len(out):
                yield out

    return buckets.mapInPandas(run, ddl)


def _level_columns(buckets):
    """Passes 1 and 2 read a few columns: only those cross to Python."""
    return buckets.select(*[c for c in host_plan.LEVEL_COLUMNS if c in buckets.columns])


def _summaries(buckets, ctx, f_low, f_high):
    return split_summaries(per_bucket(
        _level_columns(buckets), lambda pdf: host_plan.bucket_summary(pdf, ctx, f_low, f_high),
        host_plan.SUMMARY_DDL).toPandas())  # one row per host + a few bin rows


def split_summaries(rows: pd.DataFrame):
    """Pass 1's rows as (hosts, frontier importance bins, their counts)."""
    hosts = rows[rows["bin"].isna()].reset_index(drop=True)
    bins = rows[rows["bin"].notna()].groupby("bin")["bin_count"].sum()
    return hosts, bins.index.to_numpy(dtype=np.int64), bins.to_numpy(dtype=float)


def _demand(buckets, ctx, grid):
    grid = np.asarray(grid, dtype=float)

    def demand(pdf: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"k": np.arange(grid.size),
                             "demand": host_plan.bucket_demand(pdf, ctx, grid)})

    rows = per_bucket(_level_columns(buckets), demand, "k long, demand double").toPandas()
    out = np.zeros(grid.size)
    np.add.at(out, rows["k"].to_numpy(), rows["demand"].to_numpy())
    # Sum order differs between buckets; force the exact monotonicity the solver checks.
    return np.minimum.accumulate(out)


def solve_levels(spark, cfg: Config, buckets, window_start: float, window_end: float):
    """Run passes 1-2 over ``buckets`` (the page table after :func:`bucketed`) and return
    the per-host context for pass 3 plus run figures (:func:`solve_from`)."""
    return solve_from(cfg, window_start, window_end,
                      lambda ctx, f_low, f_high: _summaries(buckets, ctx, f_low, f_high),
                      lambda ctx, grid: _demand(buckets, ctx, grid))


def solve_from(cfg: Config, window_start: float, window_end: float, summaries, demand_of):
    """The driver's solve from pass 1 (``summaries(ctx, f_low, f_high)`` -> hosts, bins,
    counts) and pass 2 (``demand_of(ctx, grid)`` -> summed demand, non-increasing): in
    Spark :func:`solve_levels`, in memory any function of the same answers (the tests).

    Returns
    -------
    ctx : PlanContext
        With the fast rate, discovery threshold, policy (floor dropped if unaffordable)
        and the refresh level (a MultiplierSolution for budget-aware policies).
    info : dict
        Lane budgets, marginal values, split, feasibility, pass count (for metrics).
    """
    ctx = plan_context(cfg, window_start, window_end)
    bp = budget_params(cfg)
    policy = ctx.policy
    # The grid reaches f_max whatever the budget, so the levels of the what-if budgets
    # (budget_curve) lie on the same grid as a run at that budget would use.
    hosts, bins, counts = summaries(ctx, ctx.f_min, ctx.f_max)
    # Passes 2-3 plan only the audits the cut can keep; pass 1 counted all that are due.
    keep = lanes.audit_keep(lanes.share_targets(bp)["audit"], float(hosts["n_audit"].sum()))
    ctx = replace(ctx, audit_keep=keep)
    hosts = hosts.assign(n_audit=hosts["n_audit"].to_numpy(dtype=float) * keep)

    def budgets_for(demand=None) -> lanes.LaneBudgets:
        # fast_floor: the policy prices fast pages too, with their lane rate as a floor, so
        # the solve spends the fast and refresh budgets together (LaneBudgets.joint).
        return lanes.lane_budgets(bp, hosts, bins, counts, f_min=ctx.f_min, f_max=ctx.f_max,
                                  gone_rate=ctx.gone_rate, fast_floor=ctx.fast_floor,
                                  demand=demand)

    lb = budgets_for()
    ctx = replace(ctx, fast_rate=lb.fast_rate, discovery_min_bin=lb.discovery_min_bin)
    info = {"policy": cfg.policy.name, "fast_rate": lb.fast_rate, "fast_budget": lb.fast,
            "audit_budget": lb.audit, "audit_keep": keep, "hosts_planned": int(len(hosts)),
            "refresh_value": None, "discovery_value": None, "policy_level": None,
            "floors_affordable": True, "grid_covered": None, "spark_passes": 2}

    if policy.budget_aware:
        floor_need = lb.floor_need
        if floor_need > lb.refresh_solve:  # the budget cannot pay every page's cap interval
            policy, floor_need = policy.without_floor(), None
            info["floors_affordable"] = False
        ctx = replace(ctx, policy=policy)
        lo = hosts["lo"].replace([np.inf, -np.inf], np.nan).min()
        hi = hosts["hi"].replace([np.inf, -np.inf], np.nan).max()
        if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
            lo, hi = 1e-6, 1.0  # no page the policy can price: any grid gives f_min
        grid = multiplier_grid(lo, hi, cfg.allocation.grid_points)
        demand = demand_of(ctx, grid)
        info["spark_passes"] = 3
        lb = budgets_for((grid, demand))  # the split ``auto`` and the discovery value
        ctx = replace(ctx, discovery_min_bin=lb.discovery_min_bin)
        info["discovery_value"] = lb.discovery_value
        solution = policy.solve_level(grid, demand, lb.refresh_solve, floor_demand=floor_need)
        curve = budget_curve.curve_levels(policy, grid, demand, lb.refresh_solve,
                                          float(bp.daily_fetches), floor_need)
        ctx = replace(ctx, level=solution, curve=curve)
        info.update(policy_level=float(solution.mu), grid_covered=bool(solution.covered),
                    level_message=solution.message,
                    curve_budgets=[float(x) for x in budget_curve.curve_budgets(
                        lb.refresh_solve, float(bp.daily_fetches))],
                    curve_levels=[budget_curve.level_value(lv) for lv in curve])
        if cfg.policy.name == "optimal":
            info["refresh_value"] = lanes.refresh_marginal(grid, demand, lb.refresh_solve)
    else:
        ctx = replace(ctx, level=1.0)
    info.update(discovery_budget=lb.discovery, refresh_budget=lb.refresh)
    info["fast_floor"] = bool(ctx.fast_floor)
    info["lane_budgets"] = lb.planned()
    return ctx, info
