r"""Budgeted refresh-rate allocation (policy ``optimal``): the in-memory reference solver.

Problem (Cho & Garcia-Molina, SIGMOD 2000; ACM TODS 28(4) 2003), rates per day:

.. math::

    \max_f \sum_i w_i \bar F(\lambda_i, f_i)
    \quad\text{s.t.}\quad \sum_i f_i \le B,\quad
    \sum_{i \in h} f_i \le C_h \;\forall h,\quad f_{min} \le f_i \le f_{max},

or ``objective="age"``: minimise :math:`\sum_i w_i \bar A(\lambda_i, f_i)`.
KKT with a budget multiplier μ and host multipliers :math:`\eta_h \ge 0`
(Kolobov et al., SIGIR 2019, host caps inside the optimisation):
:math:`w_i \partial\bar F/\partial f_i = \mu + \eta_{h(i)}` for rates strictly
inside the box. We write :math:`\nu_h = \mu + \eta_h = \max(\mu, m_h)`.

See ``docs/allocation.md``; the Spark-scale path (docs/allocation-spark.md) is in
:mod:`jobs.core.allocation_grid`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jobs.core.allocation_grid import (  # noqa: F401  (re-exported API)
    MultiplierSolution, blended_rates, host_demand_curve, multiplier_grid, refine_grid,
    solve_multiplier)
from jobs.core.allocation_hosts import (
    caps_for, encode_hosts, floor_demand, host_cap_levels, rates_at_level,
    solve_budget)
from jobs.core.allocation_kkt import (  # noqa: F401  (re-exported API)
    check_box, check_objective, check_pages, marginal_value, objective_value, optimal_rates)
from jobs.core.allocation_prices import multiplier_bounds  # noqa: F401  (re-exported API)


@dataclass
class AllocationResult:
    r"""Outcome of :func:`allocate`, in the style of ``scipy.optimize.OptimizeResult``.

    Attributes
    ----------
    rates : ndarray
        Visits/day per page, in input order.
    mu : float
        Budget multiplier (objective per extra visit/day); 0 if the budget
        does not bind.
    host_mu : dict
        Host label -> level :math:`\nu_h = \max(\mu, m_h)` its pages use
        (inf for a host whose cap cannot even pay the floors).
    converged : bool
        Every bisection reached relative width 1e-12.
    iterations : int
        Bisection/bracketing steps of the global solve plus the host solve.
    budget_used : float
        ``rates.sum()``, never above ``budget``.
    feasible : bool
        False when the budget cannot pay every page's floor; the solve then
        used f_min = 0 (see ``f_min_used``).
    f_min_used : float
    objective : float
        :math:`\sum w\bar F` (freshness) or :math:`\sum w\bar A` (age, days).
    message : str
    """

    rates: np.ndarray
    mu: float
    host_mu: dict = field(repr=False)
    converged: bool
    iterations: int
    budget_used: float
    feasible: bool
    f_min_used: float
    objective: float
    message: str


def optimal_rate_fn(lam, weight, f_min, f_max, objective):
    """Rate function ``level -> optimal_rates(lam, weight, level, ...)`` for the host machinery."""
    def rate_fn(level):
        return optimal_rates(lam, weight, level, f_min, f_max, objective)
    return rate_fn


def solve_host(lam, weight, cap, mu, f_min=0.0, f_max=np.inf, objective="freshness"):
    r"""Rates of one host's pages at global multiplier μ under the host cap.

    ``mu`` is a float, or a :class:`MultiplierSolution` from the grid path, in
    which case the rates at its two bracketing levels are blended (see
    :func:`jobs.core.allocation_grid.blended_rates`). The host level is
    :math:`\nu = \max(\mu, m)` with m the smallest price at
    which :math:`\sum_i f_i(m) \le C` (bisection). If even
    :math:`n f_{min} > C` every page gets :math:`C/n` and ν = inf: the host cap
    always wins over the floor.

    Returns
    -------
    rates : ndarray
    host_mu : float
        Host level at ``mu`` (the upper bracket end for a blend).
    """
    lam, weight = check_pages(lam, weight)
    f_min, f_max = check_box(f_min, f_max)
    check_objective(objective)
    top = mu.mu if isinstance(mu, MultiplierSolution) else float(mu)
    if not top >= 0:
        raise ValueError(f"mu must be >= 0, got {top}")
    rate_fn = optimal_rate_fn(lam.ravel(), weight.ravel(), f_min, f_max, objective)
    hosts = host_cap_levels(rate_fn, np.zeros(lam.size, dtype=int), np.array([lam.size]),
                            np.array([float(cap)]))
    rates = blended_rates(lambda level: rates_at_level(rate_fn, hosts, level)[0], mu)
    return rates.reshape(lam.shape), float(max(top, hosts.cap_level[0]))


def _check_budget(budget):
    budget = float(budget)
    if not (np.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be finite and >= 0 visits/day, got {budget}")
    return budget


def allocate(lam, weight, host=None, host_cap=None, budget=1.0, f_min=0.0,
             f_max=np.inf, objective="freshness"):
    r"""Exact budgeted allocation: global μ by bisection over host-level solves.

    Parameters
    ----------
    lam, weight : array_like, shape (n,)
        Change rates (per day) and importance weights.
    host : array_like, shape (n,), optional
        Host label of each page (default: one host).
    host_cap : float or mapping, optional
        Cap C_h (visits/day) for every host, or {host: cap}; missing = no cap.
    budget : float
        Daily refresh budget B (visits/day).
    f_min, f_max : float
        Box on each rate, e.g. 1/90 and 24 for a 90-day cap and 1-hour floor.
    objective : {'freshness', 'age'}

    Returns
    -------
    AllocationResult
        If :math:`\sum_h \min(C_h, n_h f_{min}) > B` the floors are
        unaffordable: ``feasible=False`` and the problem is solved with
        f_min = 0, so the budget picks which pages are worth visiting at all.
    """
    lam, weight = check_pages(lam, weight)
    lam, weight = lam.ravel(), weight.ravel()
    f_min, f_max = check_box(f_min, f_max)
    check_objective(objective)
    budget = _check_budget(budget)
    host = np.zeros(lam.size, dtype=int) if host is None else np.asarray(host).ravel()
    if host.shape != lam.shape:
        raise ValueError(f"host has {host.size} entries for {lam.size} pages")
    labels, codes, counts = encode_hosts(host)
    caps = caps_for(labels, host_cap)

    feasible = floor_demand(counts, caps, f_min) <= budget
    floor = f_min if feasible else 0.0
    rate_fn = optimal_rate_fn(lam, weight, floor, f_max, objective)
    hosts = host_cap_levels(rate_fn, codes, counts, caps)
    start = float(np.median(weight / np.maximum(lam, 1e-12))) or 1.0
    search = solve_budget(rate_fn, hosts, budget, start=start)
    mu = float(search.level[0])
    if np.isinf(mu):
        # Only possible with floors unaffordable after all (e.g. budget 0 under age).
        rates = np.zeros(lam.size)
        host_level = np.full(labels.size, np.inf)
    else:
        rates, host_level = rates_at_level(rate_fn, hosts, mu)
    used = float(rates.sum())
    if not feasible:
        message = (f"floors need {floor_demand(counts, caps, f_min):.6g} > budget {budget:.6g}/day: "
                   "solved with f_min=0")
    elif mu == 0.0:
        message = "budget does not bind: every page at f_max or its host cap"
    else:
        message = "budget binds"
    if hosts.squeezed.any():
        message += f"; {int(hosts.squeezed.sum())} host(s) cannot pay f_min, pages share the cap"
    return AllocationResult(
        rates=rates, mu=mu, host_mu=dict(zip(labels.tolist(), host_level.tolist())),
        converged=search.converged and hosts.converged,
        iterations=search.iterations + hosts.iterations, budget_used=used,
        feasible=bool(feasible), f_min_used=floor,
        objective=objective_value(lam, weight, rates, objective), message=message)
