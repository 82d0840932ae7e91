r"""Host caps and the global budget as prices on a monotone rate function.

Every budget-aware policy here is a *rate function* ``rate_fn(level) -> rates``
that maps a scalar price level (per page, broadcastable) to box-clipped
rates, non-increasing in the level. For the ``optimal`` policy the level is the
Lagrange multiplier μ of the budget; for baselines it is e.g. a revisit
interval. Two kinds of constraint are priced the same way (Kolobov et al.,
"Optimal freshness crawl under politeness constraints", SIGIR 2019):

* host cap :math:`\sum_{i \in h} f_i \le C_h` -- host h uses the level
  :math:`\nu_h = \max(\mu, m_h)` where :math:`m_h` is the smallest level at
  which the host's own demand fits its cap (complementary slackness: the host
  multiplier :math:`\nu_h - \mu \ge 0` is positive only if the cap binds);
* budget :math:`\sum_i f_i \le B` -- μ is the smallest level whose total
  capped demand fits B.

Politeness is not negotiable: when even the floors do not fit a host's cap
(:math:`n_h f_{min} > C_h`) the host's floor is lowered to :math:`C_h/n_h` and
each of its pages gets exactly :math:`C_h/n_h` (host level reported as inf).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EXPAND = 64.0       # bracket growth factor per step
_TINY, _HUGE = 1e-300, 1e300


@dataclass
class LevelSearch:
    """Result of :func:`solve_decreasing` (one entry per group)."""

    level: np.ndarray
    demand: np.ndarray
    iterations: int
    converged: bool


def solve_decreasing(demand_fn, target, start=1.0, rtol=1e-12, max_iter=600):
    """Smallest level with ``demand_fn(level) <= target``, per group, vectorised.

    Bisection on log(level) after a geometric bracket search; ``demand_fn``
    maps a level array of shape (G,) to demands of shape (G,) and must be
    non-increasing in each entry. Groups whose demand at level 0 already fits
    get level 0; groups whose demand at level inf does not fit get level inf.
    The returned level is the upper end of the final bracket, so its demand
    never exceeds the target.
    """
    target = np.atleast_1d(np.asarray(target, dtype=float))
    n_groups = target.shape[0]
    level = np.full(n_groups, np.nan)
    at_zero = demand_fn(np.zeros(n_groups)) <= target
    at_inf = demand_fn(np.full(n_groups, np.inf)) > target
    level[at_zero] = 0.0
    level[at_inf & ~at_zero] = np.inf
    search = np.isnan(level)
    lo = np.where(search, np.broadcast_to(np.asarray(start, float), (n_groups,)), 1.0)
    hi = lo.copy()
    iterations = 0
    # Expand the bracket until demand(lo) > target >= demand(hi).
    while iterations < max_iter:
        d_lo, d_hi = demand_fn(lo), demand_fn(hi)
        grow_down = search & (d_lo <= target) & (lo > _TINY)
        grow_up = search & (d_hi > target) & (hi < _HUGE)
        if not (grow_down.any() or grow_up.any()):
            break
        lo = np.where(grow_down, lo / _EXPAND, lo)
        hi = np.where(grow_up, hi * _EXPAND, hi)
        iterations += 1
    while iterations < max_iter:
        active = search & (hi > lo * (1.0 + rtol))
        if not active.any():
            break
        mid = np.where(active, np.sqrt(lo * hi), hi)
        fits = demand_fn(mid) <= target
        hi = np.where(active & fits, mid, hi)
        lo = np.where(active & ~fits, mid, lo)
        iterations += 1
    level[search] = hi[search]
    converged = bool(np.all(hi[search] <= lo[search] * (1.0 + rtol)))
    return LevelSearch(level, demand_fn(level), iterations, converged)


def encode_hosts(host):
    """Map host labels to codes 0..H-1; returns (labels, codes, counts)."""
    labels, codes = np.unique(np.asarray(host), return_inverse=True)
    return labels, codes.ravel(), np.bincount(codes.ravel(), minlength=labels.size)


def caps_for(labels, host_cap):
    """Per-host cap array from a scalar, or a mapping host -> cap (missing = no cap)."""
    if np.isscalar(host_cap) or host_cap is None:
        cap = np.inf if host_cap is None else float(host_cap)
        caps = np.full(labels.size, cap)
    else:
        lookup = dict(host_cap)
        caps = np.array([float(lookup.get(h, np.inf)) for h in labels])
    if np.any(np.isnan(caps)) or np.any(caps < 0):
        raise ValueError("host caps must be >= 0 (visits/day; inf = no cap)")
    return caps


@dataclass
class HostLevels:
    """Per-host cap prices m_h and the hosts whose floors alone exceed the cap."""

    codes: np.ndarray
    counts: np.ndarray
    caps: np.ndarray
    cap_level: np.ndarray
    squeezed: np.ndarray
    iterations: int
    converged: bool


def host_cap_levels(rate_fn, codes, counts, caps):
    """Solve every host's cap price :math:`m_h` at once: smallest level with demand <= C_h."""
    n_hosts = counts.size
    closed = caps <= 0  # a zero cap needs no search: its pages get rate 0

    def host_demand(levels):
        demand = np.bincount(codes, weights=rate_fn(levels[codes]), minlength=n_hosts)
        return np.where(closed, 0.0, demand)

    search = solve_decreasing(host_demand, caps)
    squeezed = (np.isinf(search.level) | closed) & (counts > 0)
    cap_level = np.where(squeezed, np.inf, search.level)
    return HostLevels(codes, counts, caps, cap_level, squeezed,
                      search.iterations, search.converged)


def rates_at_level(rate_fn, hosts: HostLevels, level):
    """Rates at global level μ with host levels :math:`\\nu_h = \\max(\\mu, m_h)`.

    Returns (rates, host_level). Squeezed hosts share their cap equally.
    """
    host_level = np.maximum(float(level), hosts.cap_level)
    rates = np.asarray(rate_fn(host_level[hosts.codes]), dtype=float).copy()
    if hosts.squeezed.any():
        share = np.where(hosts.counts > 0, hosts.caps / np.maximum(hosts.counts, 1), 0.0)
        on_squeezed = hosts.squeezed[hosts.codes]
        rates[on_squeezed] = share[hosts.codes[on_squeezed]]
    return rates, host_level


def solve_budget(rate_fn, hosts: HostLevels, budget, start=1.0):
    """Smallest global level whose capped total demand fits ``budget``."""
    def total(levels):
        return np.array([rates_at_level(rate_fn, hosts, lv)[0].sum() for lv in levels])

    return solve_decreasing(total, np.array([float(budget)]), start=start)


def floor_demand(counts, caps, f_min):
    """Total visits/day needed for the floors: :math:`\\sum_h \\min(C_h, n_h f_{min})`."""
    return float(np.sum(np.minimum(caps, counts * float(f_min))))
