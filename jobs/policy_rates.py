"""Global levels of every lane from small per-host summaries (Spark glue, driver side).

Passes over the page table (fixed as budget and data grow):

1. **summary** (``applyInPandas`` per host-hash bucket): per host its cap, lane counts and
   refresh level bounds; per bucket a histogram of frontier importance. The driver solves
   the fast lane's common rate, the audit and discovery budgets, the refresh budget, the
   floor feasibility and the shared level grid from these rows.
2. **demand** (budget-aware policies only): every host's capped refresh demand on the grid,
   summed per bucket (``grid_points`` rows per bucket). The driver sums the curves, picks
   the split (``budget.split = auto``) and solves the level (``solve_level``).
3. **plan** (in :mod:`jobs.allocate`): every host's final rates at that level, blended
   between the bracketing grid levels, and its candidate visits.

No per-URL row reaches the driver; no pass is repeated per bisection step.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from jobs.config import Config
from jobs.core import host_plan, lanes
from jobs.core.allocation_grid import multiplier_grid
from jobs.core.policies import get_policy

DAY_S = 86400.0
SUMMARY_COLUMNS = [c.split()[0] for c in host_plan.SUMMARY_DDL.split(", ")]


def base_context(cfg: Config, window_start: float, window_end: float) -> host_plan.PlanContext:
    """Driver-independent part of the per-host context (config only)."""
    iv, ln = cfg.intervals, cfg.lanes
    f_min, f_max = DAY_S / iv.cap_s, DAY_S / iv.floor_s
    params = {"objective": cfg.policy.objective} if cfg.policy.name == "optimal" else {}
    policy = get_policy(cfg.policy.name, f_min=f_min, f_max=f_max, **params)
    return host_plan.PlanContext(
        window_start=window_start, window_end=window_end, f_min=f_min, f_max=f_max,
        initial_s=iv.initial_s, gone_rate=1.0 / cfg.policy.gone_recheck_days,
        default_importance=cfg.policy.default_importance,
        fast_min_lambda=ln.fast_min_lambda, fast_min_importance=ln.fast_min_importance,
        fast_patterns=ln.fast_patterns, fast_rate=f_max,
        fast_enabled=cfg.budget.fast_share * cfg.budget.daily_fetches >= 1, audit_rate=cfg.audit.sample_rate,
        audit_cadence_days=ln.audit_cadence_days, policy=policy,
        fast_floor=bool(ln.fast_as_floor and policy.budget_aware))


def _bucketed(cfg: Config, pages):
    from pyspark.sql import functions as F

    return pages.withColumn("_bucket", F.pmod(F.crc32(F.col("host").cast("binary")),
                                              F.lit(cfg.allocation.buckets)))


def _summaries(cfg, pages, ctx, f_low, f_high):
    def summarise(pdf: pd.DataFrame) -> pd.DataFrame:
        parts = [host_plan.host_summary(g, ctx, f_low, f_high)
                 for _, g in pdf.groupby("host", sort=False)]
        out = pd.concat(parts, ignore_index=True).reindex(columns=SUMMARY_COLUMNS)
        hosts = out[out["bin"].isna()]
        # Bins are summed per bucket here, so the driver gets buckets x bins, not hosts x bins.
        bins = (out[out["bin"].notna()].groupby("bin", as_index=False)["bin_count"].sum())
        return pd.concat([hosts, bins], ignore_index=True).reindex(columns=SUMMARY_COLUMNS)

    rows = _bucketed(cfg, pages).groupBy("_bucket").applyInPandas(
        summarise, host_plan.SUMMARY_DDL).toPandas()  # one row per host + a few bin rows
    hosts = rows[rows["bin"].isna()].reset_index(drop=True)
    bins = rows[rows["bin"].notna()].groupby("bin")["bin_count"].sum()
    return hosts, bins.index.to_numpy(dtype=np.int64), bins.to_numpy(dtype=float)


def _demand(cfg, pages, ctx, grid):
    grid = np.asarray(grid, dtype=float)

    def demand(pdf: pd.DataFrame) -> pd.DataFrame:
        total = np.zeros(grid.size)
        for _, g in pdf.groupby("host", sort=False):
            total += host_plan.refresh_demand(g, ctx, grid)
        return pd.DataFrame({"k": np.arange(grid.size), "demand": total})

    rows = _bucketed(cfg, pages).groupBy("_bucket").applyInPandas(
        demand, "k long, demand double").groupBy("k").sum("demand").toPandas()
    out = np.zeros(grid.size)
    out[rows["k"].to_numpy()] = rows["sum(demand)"].to_numpy()
    # Sum order differs between buckets; force the exact monotonicity the solver checks.
    return np.minimum.accumulate(out)


def solve_levels(spark, cfg: Config, pages, window_start: float, window_end: float):
    """Run passes 1-2 and return the per-host context for pass 3 plus run figures.

    Returns
    -------
    ctx : PlanContext
        With the fast rate, discovery threshold, policy (floor dropped if unaffordable)
        and the refresh level (a MultiplierSolution for budget-aware policies).
    info : dict
        Lane budgets, marginal values, split, feasibility, pass count (for metrics).
    """
    ctx = base_context(cfg, window_start, window_end)
    total = float(cfg.budget.daily_fetches)
    policy = ctx.policy
    f_high = min(ctx.f_max, max(total, 1.0))
    hosts, bins, counts = _summaries(cfg, pages, ctx, ctx.f_min, f_high)
    caps = hosts["cap"].to_numpy(dtype=float)

    fast_target = math.floor(cfg.budget.fast_share * total)
    r_fast = lanes.fast_rate(hosts["n_fast"].to_numpy(), caps, fast_target, ctx.f_min, ctx.f_max)
    fast_h = np.minimum(caps, hosts["n_fast"].to_numpy() * r_fast)
    audit_target = math.floor(cfg.budget.audit_share * total)
    audit_h = np.minimum(caps - fast_h, hosts["n_audit"].to_numpy())
    audit_budget = int(min(audit_target, audit_h.sum()))
    gone_h = np.minimum(caps - fast_h - audit_h, hosts["n_gone"].to_numpy() * ctx.gone_rate)
    fast_budget = int(min(fast_target, math.ceil(fast_h.sum() - 1e-9)))
    shared = total - fast_budget - audit_budget  # refresh + discovery (+ gone re-checks)
    n_disc = float(counts.sum())
    disc_budget = int(min(n_disc, math.floor(cfg.budget.discovery_share * total), shared))
    ctx = replace(ctx, fast_rate=r_fast,
                  discovery_min_bin=lanes.importance_threshold(bins, counts, disc_budget))
    info = {"policy": cfg.policy.name, "fast_rate": r_fast, "fast_budget": fast_budget,
            "audit_budget": audit_budget, "hosts_planned": int(len(hosts)),
            "refresh_value": None, "discovery_value": None, "policy_level": None,
            "floors_affordable": True, "grid_covered": None, "spark_passes": 2}
    refresh_budget = max(0.0, shared - disc_budget - float(gone_h.sum()))
    # fast_floor: the policy prices fast pages too, with their lane rate as a floor, so the
    # solve spends the fast and refresh budgets together (the floors fit: Σ fast_h <= B_f).
    joint = float(fast_h.sum()) if ctx.fast_floor else 0.0

    if policy.budget_aware:
        refresh_cap = np.maximum(0.0, caps - fast_h - audit_h - gone_h)
        floor_need = joint + float(np.minimum(
            refresh_cap, hosts["n_refresh"].to_numpy() * ctx.f_min).sum())
        refresh_budget += joint
        if floor_need > refresh_budget:  # the budget cannot pay every page's cap interval
            policy, floor_need = policy.without_floor(), None
            info["floors_affordable"] = False
        ctx = replace(ctx, policy=policy)
        lo = hosts["lo"].replace([np.inf, -np.inf], np.nan).min()
        hi = hosts["hi"].replace([np.inf, -np.inf], np.nan).max()
        if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
            lo, hi = 1e-6, 1.0  # no page the policy can price: any grid gives f_min
        grid = multiplier_grid(lo, hi, cfg.allocation.grid_points)
        demand = _demand(cfg, pages, ctx, grid)
        info["spark_passes"] = 3
        if cfg.budget.split == "auto" and n_disc > 0:
            split = lanes.auto_split(grid, demand, shared - float(gone_h.sum()) + joint, bins,
                                     counts, cfg.lanes.discovery_value_days)
            disc_budget = int(split["discovery_budget"])
            refresh_budget = split["refresh_budget"]
            info["discovery_value"] = split["discovery_value"]
            ctx = replace(ctx, discovery_min_bin=lanes.importance_threshold(bins, counts,
                                                                            disc_budget))
        elif n_disc > 0 and disc_budget > 0:
            threshold = lanes.importance_threshold(bins, counts, disc_budget)
            lowest = bins >= (threshold if threshold is not None else bins.min())
            info["discovery_value"] = float(np.exp2((bins[lowest].min() + 0.5)
                                                    / lanes.BINS_PER_OCTAVE)
                                            * cfg.lanes.discovery_value_days)
        solution = policy.solve_level(grid, demand, refresh_budget, floor_demand=floor_need)
        ctx = replace(ctx, level=solution)
        info.update(policy_level=float(solution.mu), grid_covered=bool(solution.covered),
                    level_message=solution.message)
        if cfg.policy.name == "optimal":
            info["refresh_value"] = lanes.refresh_marginal(grid, demand, refresh_budget)
    else:
        ctx = replace(ctx, level=1.0)
    info.update(discovery_budget=disc_budget, refresh_budget=float(refresh_budget - joint))
    # With fast_floor the fast pages' rates come out of the joint solve, so the day's cut
    # lets the fast lane draw on the joint pool (fast budget + refresh budget); its rows
    # still go first and whatever it does not use flows to refresh as before.
    cut_fast = fast_budget + (math.floor(refresh_budget - joint) if ctx.fast_floor else 0)
    info["fast_floor"] = bool(ctx.fast_floor)
    info["lane_budgets"] = {"fast": cut_fast, "audit": audit_budget,
                            "discovery": disc_budget,
                            "refresh": int(total) - fast_budget - audit_budget - disc_budget}
    return ctx, info
