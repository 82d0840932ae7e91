r"""The budget advisor: what more (or less) budget would buy (pure numpy).

allocate solves the day's level from the summed refresh demand curve D(μ) of pass 2
(:mod:`jobs.policy_rates`). The same curve gives the level that would spend any other
budget, so the plan pass (pass 3) evaluates every page's rate at those levels too and
sums the expected importance-weighted freshness and age per host: a what-if curve at
:data:`FACTORS` × the day's budget for the cost of a few rate evaluations per page, with
no extra pass over the page table.

What a point means: the day's total budget B becomes c·B with the same host caps, the
same side lanes (fast common rate and floor, audits, discovery, gone re-checks reserved
as today) and the same rate floors; the difference c·B − B goes to (or comes from) the
pages the policy prices, whose level is found from the summed demand curve exactly as
today's (:meth:`RatePolicy.solve_level`: the grid bracket and its blend). A point whose
budget cannot pay the floors (the planner would then solve without them, which needs a
demand curve without floors, i.e. another pass) is left empty (None).
"""
from __future__ import annotations

import numpy as np

from jobs.core import freshness as fr
from jobs.core import timing

from jobs.core.budget_factors import (AGE_COLUMNS, FACTORS, FRESHNESS_COLUMNS,  # noqa: F401
                                      factor_key)

#: per-host sums of plan_bucket's figures row: Σ w F and Σ w A at each factor.
SUM_COLUMNS = tuple(f"curve_wf_{factor_key(c)}" for c in FACTORS) + tuple(
    f"curve_wa_{factor_key(c)}" for c in FACTORS)


def curve_budgets(refresh_solve: float, daily_fetches: float) -> np.ndarray:
    """The budget the policy's solve would spend at each factor: today's solve budget plus
    (c − 1)·B (the side lanes keep today's reservations)."""
    return float(refresh_solve) + (np.asarray(FACTORS, dtype=float) - 1.0) * float(daily_fetches)


def curve_levels(policy, grid, demand, refresh_solve: float, daily_fetches: float,
                 floor_need) -> tuple:
    """Per factor the level that spends its budget (:func:`curve_budgets`), found from the
    summed demand curve as today's is, or None where the budget is not positive or cannot
    pay the floors (``floor_need``; None when today's solve already runs without them)."""
    out = []
    for budget in curve_budgets(refresh_solve, daily_fetches):
        if budget <= 0 or (floor_need is not None and floor_need > budget):
            out.append(None)
            continue
        out.append(policy.solve_level(grid, demand, float(budget), floor_demand=floor_need))
    return tuple(out)


def level_value(level):
    """The multiplier of a solved level (the upper bracket end, as ``policy_level``), None
    for an empty point."""
    if level is None:
        return None
    mu = float(getattr(level, "mu", level))
    return mu if np.isfinite(mu) else None


def page_age(lam, rate) -> np.ndarray:
    """Expected age (days) of each page's copy at ``rate`` visits/day (Poisson,
    :func:`jobs.core.freshness.age`; a timed page is counted as a Poisson one)."""
    return fr.age(lam, rate)


def weighted(importance, values) -> np.ndarray:
    """importance × values, 0 where the importance is 0 (an infinite age weighs nothing
    there)."""
    importance = np.asarray(importance, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(importance > 0, importance * np.asarray(values, dtype=float), 0.0)


def page_freshness(lam, rate, period_s) -> np.ndarray:
    """Expected freshness at ``rate``, timed pages by their periodic value (the plan's)."""
    return timing.expected_freshness(lam, rate, period_s)


def run_figures(totals: dict) -> dict:
    """The run's expected weighted age and the curve's points, from plan_bucket's figures
    summed over hosts: ``expected_age_days`` and the :data:`FRESHNESS_COLUMNS` and
    :data:`AGE_COLUMNS` (None where a point is empty or not finite: an age is infinite when
    a changing page gets no visit at all)."""
    w = totals.get("weight_sum")
    out = {"expected_age_days": _ratio(totals.get("weighted_age"), w)}
    for c, fcol, acol in zip(FACTORS, FRESHNESS_COLUMNS, AGE_COLUMNS):
        k = factor_key(c)
        out[fcol] = _ratio(totals.get(f"curve_wf_{k}"), w)
        out[acol] = _ratio(totals.get(f"curve_wa_{k}"), w)
    return out


def _ratio(num, den):
    if num is None or den is None or not den or np.isnan(float(num)):
        return None
    value = float(num) / float(den)
    return value if np.isfinite(value) else None


def days_per_pass(urls_known, budget):
    """Days the day's budget takes to visit every known URL once (None without a budget)."""
    return float(urls_known) / float(budget) if budget else None


def budget_per_url(urls_known, budget):
    """Visits per known URL per day at the day's budget (None without known URLs)."""
    return float(budget) / float(urls_known) if urls_known else None


def reading(budgets: list, freshness: list, today_budget, today_freshness,
            factor: float = 1.25) -> str | None:
    """One line for the report: what ``factor`` × the budget would do to expected
    freshness, from the day's curve (None when that point is empty)."""
    for c, b, f in zip(FACTORS, budgets, freshness):
        if abs(c - factor) < 1e-9 and f is not None and today_freshness is not None:
            sign = "+" if factor >= 1 else "−"
            verb = "raise" if f >= today_freshness else "lower"
            return (f"{sign}{abs(factor - 1) * 100:.0f} % budget ({_fmt_int(b)} fetches/day "
                    f"instead of {_fmt_int(today_budget)}) would {verb} expected freshness "
                    f"from {today_freshness:.3f} to {f:.3f}")
    return None


def _fmt_int(x):
    return f"{int(round(float(x))):,}" if x is not None else "?"
