"""The budget advisor's what-if curve (jobs.core.budget_curve): the driver's solve and the
plan pass in memory, exactly as allocate runs them per bucket (jobs.policy_rates.solve_from,
jobs.core.host_plan)."""
import numpy as np
import pandas as pd
import pytest

from jobs import policy_rates
from jobs.config import load_config
from jobs.core import budget_curve, host_plan
from jobs.core.allocation_reference import allocate
from jobs.core.freshness import age

W0 = 1_800_000_000.0
COPIES = 100  # each of the five pages 100 times: the same optimum, integer budgets at every factor


def five_pages(copies=COPIES, cap_delay_s=0.1):
    """Seed 002's five pages (lambda 1..5/day, equal weight) on one host whose cap never
    binds, ``copies`` times each."""
    lam = np.repeat(np.arange(1.0, 6.0), copies)
    n = lam.size
    last = pd.Series(pd.to_datetime(np.full(n, int((W0 - 3600) * 1e6)), unit="us", utc=True))
    return pd.DataFrame({
        "host": "h.example", "url": [f"https://h.example/p{i}" for i in range(n)],
        "lane": "refresh", "lambda_hat": lam, "importance": 1.0, "interval_s": 86400.0,
        "gone": False, "last_fetch_at": last, "last_success_at": last,
        "pending_signal_at": pd.Series(pd.NaT, index=range(n), dtype="datetime64[us, UTC]"),
        "etag": None, "last_modified": None, "method_hint": "conditional",
        "crawl_delay_s": cap_delay_s, "max_fetches_per_day": np.nan, "cap_factor": 1.0,
        "trust_etag": False, "trust_lm": False, "audit_wanted": False,
    })


def config(budget, *extra):
    return load_config(overrides=[f"budget.daily_fetches={budget}", "budget.fast_share=0",
                                  "budget.audit_share=0", "budget.discovery_share=0",
                                  "audit.sample_rate=0", *extra])


def plan_in_memory(pages, cfg):
    """allocate's passes 1-3 on one bucket: (ctx, rate info, summed host figures)."""
    def summaries(ctx, f_low, f_high):
        return policy_rates.split_summaries(host_plan.bucket_summary(pages, ctx, f_low, f_high))

    def demand_of(ctx, grid):
        return np.minimum.accumulate(host_plan.bucket_demand(pages, ctx, grid))

    ctx, info = policy_rates.solve_from(cfg, W0, W0 + 86400, summaries, demand_of)
    out = host_plan.plan_bucket(pages, ctx)
    figures = out[out["url"].isna()]
    totals = {c: figures[c].sum(min_count=1) for c in host_plan.HOST_FIGURES}
    return ctx, info, totals, out


def test_five_pages_curve_is_the_solve_at_each_budget():
    """Each point of the curve equals what the planner's own solve at that budget expects
    (same grid, same demand curve, its level found the same way) to 1e-9, and the exact
    optimum (the reference bisection) within the grid path's accuracy."""
    pages = five_pages()
    budget = 5 * COPIES
    ctx, info, totals, out = plan_in_memory(pages, config(budget))
    rows = out[out["reason"].notna()]
    rates = rows.groupby("lambda_hat")["planned_rate"].mean().to_numpy()
    # seed 002 (the fastest page at the floor, 1/90 a day)
    np.testing.assert_allclose(rates, [1.15, 1.36, 1.35, 1.14, 1 / 90], atol=1e-2)
    figures = budget_curve.run_figures(totals)
    today = totals["weighted_freshness"] / totals["weight_sum"]
    lam = np.arange(1.0, 6.0)
    for c, fcol, acol in zip(budget_curve.FACTORS, budget_curve.FRESHNESS_COLUMNS,
                             budget_curve.AGE_COLUMNS):
        _, _, at_c, out_c = plan_in_memory(pages, config(int(round(c * budget))))
        rerun_f = at_c["weighted_freshness"] / at_c["weight_sum"]
        rerun_a = at_c["weighted_age"] / at_c["weight_sum"]
        assert figures[fcol] == pytest.approx(rerun_f, abs=1e-9, rel=0), c
        assert figures[acol] == pytest.approx(rerun_a, abs=1e-9, rel=0), c
        # its rates spend the budget, as the plan's do
        spent = out_c[out_c["reason"].notna()]["planned_rate"].sum()
        assert spent == pytest.approx(c * budget, rel=1e-8)
        exact = allocate(lam, np.ones(5), budget=5.0 * c, f_min=1 / 90, f_max=24.0)
        # the reference leaves up to 1e-3 of the budget unspent where a page sits at its
        # cut-off (mu = w / lambda, where its rate falls to f_min over ~1e-12 of mu): there
        # the grid's blend is the better solve.
        assert figures[fcol] >= exact.objective / 5 - 1e-5, c  # the grid path's gap (allocation.md)
        assert figures[fcol] == pytest.approx(exact.objective / 5, abs=2e-4), c
        # Age is not what the plan optimises: a page near its cut-off, whose rate the grid's
        # blend sets within a cell, moves it to first order. Where no page is (the two
        # solves agree on freshness to 1e-7), they agree on age too.
        if abs(figures[fcol] - exact.objective / 5) < 1e-7:
            assert figures[acol] == pytest.approx(age(lam, exact.rates).mean(), rel=1e-3), c
    # monotone in the budget, today's point between 0.9 and 1.1
    fresh = [figures[c] for c in budget_curve.FRESHNESS_COLUMNS]
    assert all(np.diff(fresh) > 0)
    assert fresh[2] < today < fresh[3]
    assert figures["expected_age_days"] == pytest.approx(
        totals["weighted_age"] / totals["weight_sum"])
    assert info["curve_levels"][0] > info["policy_level"] > info["curve_levels"][-1]


def test_points_whose_budget_cannot_pay_the_floors_are_empty():
    # 500 pages, floors 1/90 each (5.6/day): a budget of 10 pays them, half of it does not.
    pages = five_pages()
    _, info, totals, _ = plan_in_memory(pages, config(10))
    figures = budget_curve.run_figures(totals)
    assert figures["curve_freshness_050"] is None and figures["curve_age_days_050"] is None
    assert info["curve_levels"][0] is None
    assert figures["curve_freshness_075"] is not None
    assert figures["curve_freshness_200"] > figures["curve_freshness_075"]


def test_host_caps_hold_at_every_point():
    """A binding host cap caps every point: past it more budget buys nothing."""
    pages = five_pages(copies=20, cap_delay_s=86400 / 60)  # cap 60 visits/day for 100 pages
    _, _, totals, _ = plan_in_memory(pages, config(50))
    figures = budget_curve.run_figures(totals)
    assert figures["curve_freshness_050"] < figures["curve_freshness_110"]
    capped = [figures[c] for c in budget_curve.FRESHNESS_COLUMNS[4:]]  # 62.5 .. 100 > 60
    assert max(capped) - min(capped) < 1e-12


def test_reading():
    line = budget_curve.reading([500, 750, 900, 1100, 1250, 1500, 2000],
                                [0.5, 0.55, 0.59, 0.62, 0.66, 0.7, 0.75], 1000, 0.61)
    assert line == ("+25 % budget (1,250 fetches/day instead of 1,000) would raise expected "
                    "freshness from 0.610 to 0.660")
    assert budget_curve.reading([500] * 7, [None] * 7, 1000, 0.61) is None
