r"""Global multiplier from per-host demand curves (the Spark-scale path).

Instead of bisecting μ with one pass over the page table per step, every host
emits its capped demand :math:`D_h(\mu) = \sum_{i\in h} f_i(\max(\mu, m_h))`
on a shared log-spaced grid (one ``applyInPandas`` pass); the driver sums the
small curves, :math:`D = \sum_h D_h`, which is non-increasing in μ, and picks
μ. The final pass computes each host's rates at the two grid levels that
bracket the budget and blends them, :math:`f = (1-\theta) f(\mu) +
\theta f(\mu_-)`, with θ set from the two summed demands so that the blend
spends the budget (less a 1e-10 round-off margin). Both ends respect every
host cap and the box, so the blend does too; by concavity it loses only a
second-order amount of objective against the exact μ. A middle pass on a grid
refined inside the bracketing cell shrinks that loss further (3 passes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from jobs.core.allocation_hosts import host_cap_levels
from jobs.core.allocation_kkt import check_box, check_objective, check_pages, optimal_rates

_CHUNK_ELEMS = 1 << 20   # grid points x pages evaluated per numpy call (memory)
_SAFETY = 1e-10          # relative margin against summation-order round-off


def multiplier_grid(lo, hi, n=256, margin=2.0):
    """Log-spaced grid of n levels covering [lo/margin, hi*margin].

    ``lo``/``hi`` come from :func:`jobs.core.allocation_prices.multiplier_bounds`
    reduced over hosts (min of lo, max of hi) or from fixed relative bounds.
    """
    lo, hi, n = float(lo), float(hi), int(n)
    if not (0 < lo <= hi < np.inf):
        raise ValueError(f"need 0 < lo <= hi < inf, got lo={lo}, hi={hi}")
    if n < 2 or margin < 1:
        raise ValueError("need n >= 2 grid points and margin >= 1")
    return np.geomspace(lo / margin, hi * margin, n)


def _check_grid(grid):
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size < 2 or np.any(grid <= 0) or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be a strictly increasing 1-D array of positive levels")
    return grid


def capped_demand_curve(rate_fn, n_pages, cap, grid):
    """Host demand :math:`\\sum_i f_i(\\max(g, m_h))` at each grid level g (monotone non-increasing).

    ``rate_fn`` must broadcast a (k, n) level block against the host's pages.
    """
    return capped_demand_curves(rate_fn, np.zeros(int(n_pages), dtype=np.int64),
                                np.array([int(n_pages)]), np.array([float(cap)]), grid)[0]


@dataclass(frozen=True)
class BoxedRates:
    """A rate function ``level -> rates`` whose page i sits on a box bound outside its price
    range: the same rate at every level <= ``lo[i]`` and at every level >= max(``lo[i]``,
    ``hi[i]``) (:func:`jobs.core.allocation_prices.box_prices`), plus ``pairs(rows, levels)``,
    the rates of pages ``rows`` at ``levels`` (1-D, one level per row). Given one,
    :func:`capped_demand_curves` prices only the (page, level) pairs inside the range."""

    dense: Callable[[np.ndarray], np.ndarray]
    pairs: Callable[[np.ndarray, np.ndarray], np.ndarray]
    lo: np.ndarray
    hi: np.ndarray

    def __call__(self, level):
        return self.dense(level)

    def bounded(self, floor=None, ceiling=None) -> "BoxedRates":
        """The same function with a per-page lower and/or upper bound on each rate (still
        constant wherever it was)."""
        def clip(rates, rows=None):
            if ceiling is not None:
                rates = np.minimum(rates, ceiling if rows is None else ceiling[rows])
            if floor is not None:
                rates = np.maximum(rates, floor if rows is None else floor[rows])
            return rates

        return BoxedRates(lambda level: clip(self.dense(level)),
                          lambda rows, levels: clip(self.pairs(rows, levels), rows),
                          self.lo, self.hi)


def capped_demand_curves(rate_fn, codes, counts, caps, grid):
    r"""Every host's capped demand on the grid, shape (hosts, grid points):

    .. math:: D_h(g) = \min\Big(C_h, \sum_{i \in h} f_i(\max(g, m_h))\Big)

    with :math:`m_h` the host's cap price (:func:`host_cap_levels`, all hosts in one
    search) and :math:`D_h = C_h` for a host whose floors alone exceed its cap.
    ``codes[i]`` is page i's host; ``rate_fn`` maps a (k, n) block of per-page levels to
    rates. A :class:`BoxedRates` is priced by :func:`_boxed_curves` (cost grows with the
    pages and their pairs inside their price range); any other function at k grid levels
    per numpy call (chunks of ``_CHUNK_ELEMS`` values), summed per host with one
    ``add.reduceat``. At every grid level g <= m_h a page is priced at m_h, so when many
    (page, level) pairs lie there its rate at m_h is computed once and only the levels
    above go through ``rate_fn`` (``rate_fn(inf)`` stands in for the others: cheap, and
    replaced).
    """
    grid = _check_grid(grid)
    codes = np.asarray(codes, dtype=np.int64)
    counts, caps = np.asarray(counts), np.asarray(caps, dtype=float)
    out = np.zeros((counts.size, grid.size))
    if codes.size == 0:
        return out
    hosts = host_cap_levels(rate_fn, codes, counts, caps)
    if isinstance(rate_fn, BoxedRates):
        out = _boxed_curves(rate_fn, codes, counts.size, hosts.cap_level[codes], grid)
    else:
        _dense_curves(rate_fn, codes, counts, hosts.cap_level, grid, out)
    out = np.minimum(out, caps[:, None])
    out[hosts.squeezed] = caps[hosts.squeezed, None]
    return out


def _dense_curves(rate_fn, codes, counts, cap_level, grid, out):
    page_level = cap_level[codes]
    present = np.flatnonzero(counts > 0)
    starts = (np.cumsum(counts) - counts)[present]
    order = None if np.all(codes[1:] >= codes[:-1]) else np.argsort(codes, kind="stable")
    below = np.searchsorted(grid, cap_level, side="right")  # grid levels <= m_h
    at_cap = None
    if np.dot(counts, below) > 0.1 * codes.size * grid.size:
        at_cap = np.asarray(rate_fn(page_level[None, :]))[0]
    step = max(1, _CHUNK_ELEMS // codes.size)
    for start in range(0, grid.size, step):
        g = grid[start:start + step, None]
        if at_cap is None:
            block = np.asarray(rate_fn(np.maximum(g, page_level)))
        else:
            above = g > page_level
            block = np.where(above, rate_fn(np.where(above, g, np.inf)), at_cap)
        if order is not None:
            block = block[:, order]
        out[present, start:start + step] = np.add.reduceat(block, starts, axis=1).T


def _boxed_curves(rate_fn: BoxedRates, codes, n_hosts, page_level, grid):
    """Uncapped host sums of a :class:`BoxedRates` on the grid. Each page's curve is a
    constant on three runs of grid levels -- at or below its cap price (its rate there),
    at or below ``lo`` (its rate at level 0), at or above ``hi`` (at level inf) -- added to
    a per-host difference array, and its pairs inside (lo, hi), solved in chunks of
    ``_CHUNK_ELEMS``: three dense calls plus about a quarter of the grid's pairs, against
    all of them."""
    n, k = codes.size, grid.size
    cap_end = np.searchsorted(grid, page_level, side="right")  # levels priced at m_h
    inner_start = np.maximum(np.searchsorted(grid, rate_fn.lo, side="right"), cap_end)
    inner_end = np.maximum(np.searchsorted(grid, rate_fn.hi, side="left"), inner_start)
    row0 = codes * (k + 1)
    steps = np.zeros(n_hosts * (k + 1))
    for start, end, level in ((0, cap_end, page_level), (cap_end, inner_start, 0.0),
                              (inner_end, k, np.inf)):
        run = np.flatnonzero(np.broadcast_to(start < end, (n,)))
        value = np.asarray(rate_fn(np.broadcast_to(level, (n,))), dtype=float)[run]
        steps += np.bincount(row0[run] + np.broadcast_to(start, (n,))[run], weights=value,
                             minlength=steps.size)
        steps -= np.bincount(row0[run] + np.broadcast_to(end, (n,))[run], weights=value,
                             minlength=steps.size)
    out = np.cumsum(steps.reshape(n_hosts, k + 1), axis=1)[:, :k]
    width = inner_end - inner_start
    ends = np.cumsum(width)
    first = 0
    while first < n:  # pages [first, last) hold at most _CHUNK_ELEMS pairs (or one page)
        last = max(first + 1, int(np.searchsorted(ends, ends[first] - width[first]
                                                  + _CHUNK_ELEMS, side="right")))
        w = width[first:last]
        if w.sum():
            rows = np.repeat(np.arange(first, last), w)
            offset = np.arange(rows.size) - np.repeat(np.cumsum(w) - w, w)
            level_at = np.repeat(inner_start[first:last], w) + offset
            out += np.bincount(codes[rows] * k + level_at,
                               weights=rate_fn.pairs(rows, grid[level_at]),
                               minlength=n_hosts * k).reshape(n_hosts, k)
        first = last
    # Each curve is non-increasing; the difference array's round-off is not.
    return np.minimum.accumulate(out, axis=1)


def host_demand_curve(lam, weight, cap, grid, f_min=0.0, f_max=np.inf, objective="freshness"):
    r"""One host's total optimal rate :math:`D_h(\mu)` at each multiplier of ``grid``.

    Equal (to Newton round-off) to ``solve_host(...)[0].sum()`` at each grid
    point, and non-increasing in μ. Use the same f_min for every host; when
    the floors are unaffordable rerun with f_min = 0.
    """
    lam, weight = check_pages(lam, weight)
    f_min, f_max = check_box(f_min, f_max)
    check_objective(objective)
    lam, weight = lam.ravel(), weight.ravel()

    def rate_fn(level):
        return optimal_rates(lam, weight, level, f_min, f_max, objective)

    return capped_demand_curve(rate_fn, lam.size, cap, grid)


@dataclass
class MultiplierSolution:
    """Outcome of :func:`solve_multiplier`.

    Attributes
    ----------
    mu : float
        Upper bracketing level: the smallest grid point whose demand fits the
        budget (0 if the budget does not bind, inf if nothing on the grid fits).
    mu_lower : float
        Lower bracketing level (demand above the budget); equals ``mu`` when
        no blending is needed.
    lower_share : float
        Blend weight θ in [0, 1) of the rates at ``mu_lower``.
    demand : float
        Predicted total rate of the blend (what the final pass will spend).
    slack : float
        ``budget - demand`` (>= 0).
    mu_interp : float
        Log-log interpolated crossing inside ``bracket`` (not budget-safe).
    bracket : tuple
        Grid cell (lower, upper) containing the crossing.
    covered : bool
        The crossing lies inside the grid.
    feasible : bool
        False when ``floor_demand`` exceeds the budget (rerun with f_min = 0).
    message : str
    """

    mu: float
    mu_lower: float
    lower_share: float
    demand: float
    slack: float
    mu_interp: float
    bracket: tuple
    covered: bool
    feasible: bool
    message: str


def solve_multiplier(grid, total_demand, budget, floor_demand=None, demand_at_zero=None):
    """Pick the global level from the summed host demand curves, never overspending.

    Parameters
    ----------
    grid : array_like, shape (G,)
        Increasing levels.
    total_demand : array_like, shape (G,)
        :math:`\\sum_h D_h` on the grid (non-increasing).
    budget : float
    floor_demand : float, optional
        :math:`\\sum_h \\min(C_h, n_h f_{min})`; lets the solver tell an
        unaffordable floor from a grid that stops too low.
    demand_at_zero : float, optional
        Total demand at level 0 (all pages at f_max or host cap); if it fits
        the budget, μ = 0.
    """
    grid = _check_grid(grid)
    demand = np.asarray(total_demand, dtype=float)
    budget = float(budget)
    if demand.shape != grid.shape:
        raise ValueError(f"total_demand shape {demand.shape} != grid shape {grid.shape}")
    if np.any(np.isnan(demand)) or np.any(np.diff(demand) > 1e-9 * max(np.max(demand), 1e-300)):
        raise ValueError("total_demand must be non-increasing along the grid")
    if not (np.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be finite and >= 0, got {budget}")
    target = budget * (1.0 - _SAFETY)
    if floor_demand is not None and floor_demand > budget:
        return MultiplierSolution(np.inf, np.inf, 0.0, float(floor_demand), budget - floor_demand, np.inf,
                                  (np.inf, np.inf), False, False,
                                  "floors exceed the budget: recompute curves with f_min=0")
    if demand_at_zero is not None and demand_at_zero <= target:
        return MultiplierSolution(0.0, 0.0, 0.0, float(demand_at_zero), budget - demand_at_zero, 0.0,
                                  (0.0, 0.0), True, True, "budget does not bind")
    fits = np.flatnonzero(demand <= target)
    if fits.size == 0:
        msg = "grid stops below the crossing: extend it upward (mu=inf puts every page at its floor)"
        fallback = float(floor_demand) if floor_demand is not None else np.nan
        return MultiplierSolution(np.inf, np.inf, 0.0, fallback, budget - fallback, np.inf,
                                  (grid[-1], np.inf), False, True, msg)
    k = int(fits[0])
    if k == 0:
        return MultiplierSolution(grid[0], grid[0], 0.0, float(demand[0]), budget - demand[0], grid[0],
                                  (0.0, grid[0]), False, True,
                                  "demand fits at the lowest grid level: budget may not bind; "
                                  "extend the grid downward to spend more")
    d_lo, d_hi = demand[k - 1], demand[k]
    x_lo, x_hi = np.log(grid[k - 1]), np.log(grid[k])
    if d_hi > 0:
        # Demand is close to a power law in μ locally: interpolate log D in log μ.
        frac = (np.log(d_lo) - np.log(target)) / (np.log(d_lo) - np.log(d_hi))
    else:
        frac = (d_lo - target) / (d_lo - d_hi)
    mu_interp = float(np.exp(x_lo + np.clip(frac, 0.0, 1.0) * (x_hi - x_lo)))
    share = float(np.clip((target - d_hi) / (d_lo - d_hi), 0.0, 1.0)) if d_lo > d_hi else 0.0
    blended = (1.0 - share) * d_hi + share * d_lo
    return MultiplierSolution(float(grid[k]), float(grid[k - 1]), share, float(blended),
                              float(budget - blended), mu_interp,
                              (float(grid[k - 1]), float(grid[k])), True, True,
                              "crossing bracketed; final rates blend the two bracketing levels")


def blended_rates(rates_at, level):
    """Rates for a float level, or the θ-blend of a :class:`MultiplierSolution`'s bracket ends.

    ``rates_at(level) -> ndarray`` computes host-capped rates at one level.
    """
    if not isinstance(level, MultiplierSolution):
        return rates_at(float(level))
    rates = rates_at(level.mu)
    if level.lower_share > 0.0:
        rates = (1.0 - level.lower_share) * rates + level.lower_share * rates_at(level.mu_lower)
    return rates


def refine_grid(solution: MultiplierSolution, n=256, concentration=12.0):
    """Grid for a second demand pass, inside the bracketing cell.

    Both cell ends are included (so the crossing stays bracketed); the other
    points are spaced geometrically away from ``mu_interp``: spacing at
    log-distance d from the estimate is about ``concentration / (n/2) * d``,
    and ``cell / (n/2) * concentration / (e^concentration - 1)`` at the estimate.
    """
    lo, hi = solution.bracket
    if not (solution.covered and 0 < lo < hi < np.inf):
        raise ValueError("refine_grid needs a solution whose crossing is bracketed on the grid")
    half = max(int(n) // 2, 2)
    x_lo, x_hi, x_hat = np.log(lo), np.log(hi), np.log(solution.mu_interp)
    unit = np.expm1(concentration * np.linspace(0.0, 1.0, half)) / np.expm1(concentration)
    points = np.concatenate([x_hat - unit * (x_hat - x_lo), x_hat + unit * (x_hi - x_hat)])
    grid = np.unique(np.exp(np.clip(points, x_lo, x_hi)))
    grid[0], grid[-1] = lo, hi  # exact cell ends keep the bracket exact
    return grid

