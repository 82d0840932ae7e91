r"""Pluggable refresh-rate policies behind one interface (cf. Nutch ``FetchSchedule``).

Every policy maps a scalar *level* (a price) to box-clipped per-page rates,
non-increasing in the level, so host caps and the global budget are solved the
same way for all of them (:mod:`jobs.core.allocation_hosts`) and per-host
demand curves sum across hosts (:mod:`jobs.core.allocation_grid`):

==============  ====================================  ==============================
policy          level                                 rate at level L
==============  ====================================  ==============================
uniform         revisit interval (days)               clip(1/L)
proportional    expected changes per visit r          clip(λ/L)
optimal         budget multiplier μ (Cho & G-M 2000)  KKT root, see allocation_kkt
adaptive        interval stretch factor (fixed 1)     clip(86400/interval_s / L)
==============  ====================================  ==============================

``clip`` is to [f_min, f_max]. Pages of one host come as a DataFrame with
columns ``lambda_hat`` (changes/day), ``importance`` and ``interval_s``, and optionally
``rate_floor`` (visits/day a page is guaranteed whatever the level, e.g. the fast lane's
rate; the rate is then max(rate_floor, policy rate), still non-increasing in the level).
Spark driver protocol for a budget-aware policy (3 passes over the pages)::

    grid = multiplier_grid(lo, hi)                        # lo/hi: policy.level_bounds
    total = sum(policy.host_demand(pages_h, cap_h, grid))  # pass 1 (applyInPandas)
    sol = policy.solve_level(grid, total, budget, floor_demand=...)
    fine = refine_grid(sol); total = sum(policy.host_demand(..., fine))  # pass 2
    sol = policy.solve_level(fine, total, budget)
    rates_h = policy.host_rates(pages_h, cap_h, sol)      # pass 3 (blends bracket ends)

The ``hosts_*`` methods do the same for the pages of many hosts at once (``codes[i]`` is
page i's host): the per-host methods are the one-host case of them, so a bucket of hosts
and a single host are solved by the same code (:mod:`jobs.core.host_plan`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from jobs.core.allocation_grid import (
    BoxedRates, blended_rates, capped_demand_curves, solve_multiplier)
from jobs.core.allocation_hosts import (
    caps_for, encode_hosts, floor_demand, host_cap_levels, rates_at_level, solve_budget)
from jobs.core.allocation_kkt import check_box, check_objective, optimal_rates, stale_visit_value
from jobs.core.allocation_prices import box_prices, price_range

SECONDS_PER_DAY = 86400.0


def _column(pages, name):
    if name not in pages.columns:
        raise ValueError(f"pages needs column {name!r}; has {list(pages.columns)}")
    values = pages[name].to_numpy(dtype=float)
    if values.size and (not np.all(np.isfinite(values)) or np.any(values < 0)):
        raise ValueError(f"column {name!r} must be finite and >= 0")
    return values


@dataclass(frozen=True)
class RatePolicy:
    """Base class: subclasses define ``rate_fn`` (and ``level_bounds`` if budget-aware)."""

    f_min: float = 1.0 / 90.0
    f_max: float = 24.0
    name = "base"
    budget_aware = True

    def __post_init__(self):
        check_box(self.f_min, self.f_max)

    def rate_fn(self, pages):
        """Return ``level -> rates`` for these pages (level broadcastable as (k, 1))."""
        raise NotImplementedError

    def page_bounds(self, pages, f_low, f_high):
        """Per page (lo, hi): at level <= lo its rate is >= f_high, at level >= hi it is
        <= f_low; (inf, 0) for a page the policy gives f_min at every level."""
        raise NotImplementedError

    def level_bounds(self, pages, f_low, f_high):
        """(lo, hi): at level <= lo every rate >= f_high, at >= hi every rate <= f_low
        (min and max of :meth:`page_bounds`; (inf, 0) when no page moves)."""
        lo, hi = self.page_bounds(pages, f_low, f_high)
        return (float(np.min(lo)), float(np.max(hi))) if len(lo) else (np.inf, 0.0)

    def without_floor(self):
        """Same policy with f_min = 0 (used when the budget cannot pay the floors)."""
        return replace(self, f_min=0.0)

    def floored_rate_fn(self, pages):
        """``rate_fn`` with the optional per-page ``rate_floor`` column applied as a lower
        bound (exact for concave objectives: the box constraint is just tighter)."""
        fn = self.rate_fn(pages)
        if "rate_floor" not in pages.columns:
            return fn
        floor = np.nan_to_num(pages["rate_floor"].to_numpy(dtype=float))
        if not np.any(floor > 0):
            return fn
        if isinstance(fn, BoxedRates):
            return fn.bounded(floor=floor)
        return lambda level: np.maximum(fn(level), floor)

    def host_floor(self, pages, cap):
        """Visits/day the host's floors need: min(C_h, n_h f_min)."""
        return float(min(float(cap), len(pages) * self.f_min))

    def host_demand(self, pages, cap, grid):
        """Host's capped total rate at each level of ``grid`` (non-increasing)."""
        return self.hosts_demand(pages, np.zeros(len(pages), np.int64), [cap], grid)[0]

    def hosts_demand(self, pages, codes, caps, grid):
        """Every host's capped demand curve on ``grid``, shape (hosts, grid points)."""
        caps = np.asarray(caps, dtype=float)
        counts = np.bincount(codes, minlength=caps.size)
        return capped_demand_curves(self.floored_rate_fn(pages), codes, counts, caps, grid)

    def solve_level(self, grid, total_demand, budget, floor_demand=None):
        """Global level from summed host demand curves (budget never exceeded)."""
        return solve_multiplier(grid, total_demand, budget, floor_demand=floor_demand)

    def host_rates(self, pages, cap, level):
        """Rates of one host's pages at the global ``level``, host cap enforced.

        ``level`` is a float or the :class:`MultiplierSolution` from
        :meth:`solve_level` (its bracket ends are blended to spend the budget).
        """
        return self.hosts_rates(pages, np.zeros(len(pages), np.int64), [cap], level)

    def stale_visit_values(self, pages, rate):
        """What a visit now buys each page known changed (a push signal), in the units of
        this policy's level, given its planned ``rate`` (visits/day); None for a policy
        that does not price visits (uniform, proportional, adaptive)."""
        return None

    def stale_visit_worth(self, pages, rate, level, values=None):
        """Whether a visit now to each page known changed is worth its cost at ``level``:
        :meth:`stale_visit_values` (or ``values``, when the caller has them already) at
        least the price the day's marginal visit buys (the lower end of a solved bracket).
        A policy that does not price visits takes every such visit."""
        if values is None:
            values = self.stale_visit_values(pages, rate)
        if values is None or level is None:
            return np.ones(len(pages), dtype=bool)
        return values >= float(getattr(level, "mu_lower", level))

    def hosts_rates(self, pages, codes, caps, level):
        """:meth:`host_rates` of many hosts' pages at once; each host solves its own cap
        price :math:`m_h` (``host_cap_levels``, every host in one vectorised search)."""
        return self.hosts_rates_at(pages, codes, caps, [level])[0]

    def hosts_rates_at(self, pages, codes, caps, levels):
        """:meth:`hosts_rates` at each of ``levels`` (None: no rates), the hosts' cap prices
        solved once for all of them (the budget advisor's what-if levels)."""
        caps = np.asarray(caps, dtype=float)
        rate_fn = self.floored_rate_fn(pages)
        hosts = host_cap_levels(rate_fn, np.asarray(codes), np.bincount(codes, minlength=caps.size),
                                caps)
        return [None if lv is None else
                blended_rates(lambda x: rates_at_level(rate_fn, hosts, x)[0], lv)
                for lv in levels]


@dataclass(frozen=True)
class UniformPolicy(RatePolicy):
    """Same rate for every page; level = revisit interval in days."""

    name = "uniform"

    def rate_fn(self, pages):
        n = len(pages)

        def rates(level):
            with np.errstate(divide="ignore"):
                inverse = 1.0 / np.asarray(level, float)
                per_page = np.broadcast_to(inverse, np.broadcast_shapes(inverse.shape, (n,)))
            return np.clip(per_page, self.f_min, self.f_max)
        return rates

    def page_bounds(self, pages, f_low, f_high):
        n = len(pages)
        return np.full(n, 1.0 / f_high), np.full(n, 1.0 / f_low)


@dataclass(frozen=True)
class ProportionalPolicy(RatePolicy):
    """Rate proportional to the change rate; level = expected changes per visit."""

    name = "proportional"

    def rate_fn(self, pages):
        lam = _column(pages, "lambda_hat")

        def rates(level):
            with np.errstate(divide="ignore", invalid="ignore"):
                per_page = np.where(lam > 0, lam / np.asarray(level, float), 0.0)
            return np.clip(per_page, self.f_min, self.f_max)
        return rates

    def page_bounds(self, pages, f_low, f_high):
        lam = _column(pages, "lambda_hat")
        moves = lam > 0
        return np.where(moves, lam / f_high, np.inf), np.where(moves, lam / f_low, 0.0)


@dataclass(frozen=True)
class OptimalPolicy(RatePolicy):
    """Cho & Garcia-Molina optimum with importance weights; level = multiplier μ."""

    objective: str = "freshness"
    name = "optimal"

    def __post_init__(self):
        super().__post_init__()
        check_objective(self.objective)

    def rate_fn(self, pages):
        lam, weight = _column(pages, "lambda_hat"), _timed_weight(pages, self.objective)
        # The prices outside which each page sits on its box bound, once per rate function:
        # the demand pass prices the same pages at every grid level, and most of them are
        # at f_min or f_max at most levels, so only the others need the stationarity root.
        bounds = box_prices(lam, weight, self.f_min, self.f_max, self.objective)

        def dense(level):
            return optimal_rates(lam, weight, level, self.f_min, self.f_max, self.objective,
                                 bounds=bounds)

        def pairs(rows, levels):
            return optimal_rates(lam[rows], weight[rows], levels, self.f_min, self.f_max,
                                 self.objective, bounds=(bounds[0][rows], bounds[1][rows]))

        # A per-page upper bound only tightens the box: clip(f*, f_min, min(f_max, c)).
        return BoxedRates(dense, pairs, *bounds).bounded(
            ceiling=_rate_ceiling(pages, self.f_min))

    def page_bounds(self, pages, f_low, f_high):
        return price_range(_column(pages, "lambda_hat"), _timed_weight(pages, self.objective),
                           f_low, f_high, self.objective)

    def stale_visit_values(self, pages, rate):
        """:func:`stale_visit_value`: fresh until the next change or the next planned visit,
        1/rate days on, in importance-days like μ. None under the age objective (a stale
        copy's age keeps growing until a visit, whatever λ: every such visit is taken)."""
        if self.objective != "freshness":
            return None
        rate = np.asarray(rate, dtype=float)
        horizon = np.where(rate > 0, 1.0 / np.where(rate > 0, rate, 1.0), np.inf)
        return stale_visit_value(_column(pages, "lambda_hat"),
                                 _timed_weight(pages, self.objective), horizon)


def _timed_weight(pages, objective):
    """Importance, times ``timing_gain`` where given (a timed page, jobs.core.timing: the
    same freshness for fewer visits). Only the freshness objective has that gain."""
    weight = _column(pages, "importance")
    if "timing_gain" in pages.columns and objective == "freshness":
        weight = weight * _column(pages, "timing_gain")
    return weight


def _rate_ceiling(pages, f_min):
    """The optional per-page ``rate_ceiling`` (visits/day, at least ``f_min``), or None."""
    if "rate_ceiling" not in pages.columns:
        return None
    ceiling = pages["rate_ceiling"].to_numpy(dtype=float)
    if not np.any(ceiling < np.inf):
        return None
    return np.maximum(np.where(np.isnan(ceiling), np.inf, ceiling), f_min)


@dataclass(frozen=True)
class AdaptivePolicy(RatePolicy):
    """Backoff-and-advance intervals as given: rate = 86400 / interval_s per day.

    Not budget-aware (the budget cut happens at scheduling, by priority). A
    host over its cap has all its intervals stretched by one common factor
    (its level, >= 1) until the cap holds.
    """

    name = "adaptive"
    budget_aware = False

    def rate_fn(self, pages):
        interval = _column(pages, "interval_s")
        if np.any(interval <= 0):
            raise ValueError("interval_s must be > 0 seconds")
        base = SECONDS_PER_DAY / interval

        def rates(level):
            with np.errstate(divide="ignore", invalid="ignore"):
                per_page = base / np.maximum(np.asarray(level, float), 1.0)
            return np.clip(per_page, self.f_min, self.f_max)
        return rates

    def page_bounds(self, pages, f_low, f_high):
        return np.ones(len(pages)), np.ones(len(pages))

    def solve_level(self, grid, total_demand, budget, floor_demand=None):
        raise ValueError("adaptive is not budget-aware: use level 1.0 for every host")


_REGISTRY = {cls.name: cls for cls in (UniformPolicy, ProportionalPolicy, OptimalPolicy, AdaptivePolicy)}


def get_policy(name, **params):
    """Policy by name: 'uniform', 'proportional', 'optimal' (objective=...), 'adaptive'.

    ``params`` are f_min, f_max (visits/day) and, for optimal, objective.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown policy {name!r}; choose from {sorted(_REGISTRY)}")
    return _REGISTRY[name](**params)


@dataclass
class PolicyRates:
    """Outcome of :func:`policy_rates` (scipy.optimize-style diagnostics)."""

    rates: pd.Series
    level: float
    host_level: dict
    converged: bool
    iterations: int
    budget_used: float
    feasible: bool
    message: str


def policy_rates(policy, pages, host_col, caps, budget):
    """Whole-table, in-memory rates of ``policy`` (reference for the per-host path).

    Exact global level by bisection over host-level solves; for a budget-aware
    policy whose floors cost more than ``budget``, the floors are dropped
    (``feasible=False``). Non-budget-aware policies use level 1 and only the caps.

    Parameters
    ----------
    policy : RatePolicy
    pages : DataFrame
        All pages, with ``host_col`` and the policy's columns.
    host_col : str
    caps : float or mapping host -> cap (visits/day)
    budget : float
        Visits/day.
    """
    if host_col not in pages.columns:
        raise ValueError(f"pages has no host column {host_col!r}")
    budget = float(budget)
    if not (np.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be finite and >= 0, got {budget}")
    labels, codes, counts = encode_hosts(pages[host_col].to_numpy())
    cap_arr = caps_for(labels, caps)
    feasible = True
    if policy.budget_aware and floor_demand(counts, cap_arr, policy.f_min) > budget:
        feasible, policy = False, policy.without_floor()
    rate_fn = policy.rate_fn(pages)
    hosts = host_cap_levels(rate_fn, codes, counts, cap_arr)
    iterations, converged = hosts.iterations, hosts.converged
    if policy.budget_aware:
        search = solve_budget(rate_fn, hosts, budget)
        level = float(search.level[0])
        iterations += search.iterations
        converged = converged and search.converged
    else:
        level = 1.0
    rates, host_level = rates_at_level(rate_fn, hosts, level)
    message = "ok" if feasible else "floors exceed the budget: solved with f_min=0"
    return PolicyRates(pd.Series(rates, index=pages.index, name="rate"), level,
                       dict(zip(labels.tolist(), host_level.tolist())), converged, iterations,
                       float(rates.sum()), feasible, message)
