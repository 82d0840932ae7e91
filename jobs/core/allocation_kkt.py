r"""Per-page stationarity (KKT) conditions of the budgeted refresh problem.

A page with change rate λ (changes/day) and importance w, refreshed evenly at
rate f (visits/day), has average freshness and age (Cho & Garcia-Molina,
"Effective page refresh policies for web crawlers", ACM TODS 28(4), 2003)

.. math::

    \bar F = \frac{1 - e^{-r}}{r}, \qquad
    \bar A = \frac{1}{\lambda}\Big(\frac r2 - 1 + \frac{1 - e^{-r}}{r}\Big),
    \qquad r = \lambda / f .

The marginal value of one more visit per day is, with
:math:`g(r) = 1 - (1 + r)e^{-r}` and :math:`q(r) = r^2/2 - g(r)`,

.. math::

    w\,\frac{\partial \bar F}{\partial f} = \frac{w\,g(r)}{\lambda}, \qquad
    -w\,\frac{\partial \bar A}{\partial f} = \frac{w\,q(r)}{\lambda^2}.

Both are decreasing in f (the objectives are concave in f), so at a price μ
per visit the best rate in the box [f_min, f_max] is the clipped root of
``marginal value = μ`` (Cho & Garcia-Molina, "Synchronizing a database to
improve freshness", SIGMOD 2000). This module solves that root for whole
arrays of pages at once.
"""
from __future__ import annotations

import numpy as np

OBJECTIVES = ("freshness", "age")

_SERIES_CUT = 1e-2   # below this r, h(r) = r - log1p(r) uses its power series
_AGE_LARGE = 1e3     # q(r) > this => r > 44 and (1+r)e^{-r} < 1e-17
_MAX_NEWTON = 80


def check_objective(objective):
    """Raise ValueError unless ``objective`` is 'freshness' or 'age'."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    return objective


def check_pages(lam, weight):
    """Validate and broadcast change rates and weights to float arrays."""
    lam = np.asarray(lam, dtype=float)
    weight = np.asarray(weight, dtype=float)
    if lam.size and (not np.all(np.isfinite(lam)) or np.any(lam < 0)):
        raise ValueError("lam must be finite and >= 0 (changes per day)")
    if weight.size and (not np.all(np.isfinite(weight)) or np.any(weight < 0)):
        raise ValueError("weight must be finite and >= 0")
    return np.broadcast_arrays(lam, weight)


def check_box(f_min, f_max):
    """Validate the per-page rate box 0 <= f_min <= f_max, f_max > 0."""
    f_min, f_max = float(f_min), float(f_max)
    if not (np.isfinite(f_min) and f_min >= 0):
        raise ValueError(f"f_min must be finite and >= 0, got {f_min}")
    if not (f_max > 0 and f_max >= f_min):
        raise ValueError(f"f_max must be > 0 and >= f_min, got f_max={f_max}, f_min={f_min}")
    return f_min, f_max


def _series(n_first, sign):
    """Coefficients of sum_{n>=n_first} sign (-1)^n (n-1)/n! r^n (Horner order)."""
    coeffs = np.zeros(_SERIES_TERMS + 1)
    fact = 1.0
    for n in range(1, _SERIES_TERMS + 1):
        fact *= n
        if n >= n_first:
            coeffs[n] = sign * (-1) ** n * (n - 1) / fact
    return coeffs


_SERIES_TERMS = 24  # r < 1: truncation below 1e-20
_G_COEFFS = _series(2, 1.0)
_Q_COEFFS = _series(3, -1.0)
_H_COEFFS = np.array([0.0, 0.0] + [(-1) ** n / n for n in range(2, 12)])  # r - log1p(r)


def _horner(x, coeffs):
    """:math:`\\sum_k c_k x^k` by Horner's rule in place: the same multiply-adds in the same
    order as ``numpy.polynomial.polynomial.polyval`` (equal results), without a temporary
    array per coefficient -- the demand pass evaluates the series on millions of ratios."""
    acc = np.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc *= x
        acc += c
    return acc


def _series_below_one(r, coeffs, direct):
    """``direct`` where r >= 1, the power series where r < 1 (only those pay for it)."""
    small = r < 1.0
    if small.any():
        direct[small] = _horner(r[small], coeffs)
    return direct


def _g(r):
    """g(r) = 1 - (1 + r) e^{-r}; power series for r < 1 (no cancellation); g(inf) = 1."""
    r = np.asarray(r, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        direct = 1.0 - (1.0 + r) * np.exp(-r)
    out = _series_below_one(r, _G_COEFFS, np.asarray(direct, dtype=float))
    return np.where(np.isinf(r), 1.0, out)


def _q(r):
    """q(r) = r^2/2 - g(r) = r^2/2 - 1 + (1 + r) e^{-r}; power series for r < 1."""
    r = np.asarray(r, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        direct = 0.5 * r * r - 1.0 + (1.0 + r) * np.exp(-r)
    return _series_below_one(r, _Q_COEFFS, np.asarray(direct, dtype=float))


def _h(r):
    """h(r) = r - log(1 + r) = -log(1 - g(r)), accurate for small r."""
    r = np.asarray(r, dtype=float)
    out = r - np.log1p(r)
    small = r < _SERIES_CUT
    if small.any():  # only the small ratios pay for the series
        out[small] = _horner(r[small], _H_COEFFS)
    return out


def _newton_from_right(phi, dphi, y, r_hi, r_lo):
    """Solve phi(r) = y for convex increasing phi, vectorised (used to build the tables).

    Newton's method started at an upper bound ``r_hi`` of the root decreases
    monotonically to the root of a convex increasing function; ``r_lo`` (a
    lower bound) guards against round-off stepping past it.
    Returns (r, iterations, converged).
    """
    r = r_hi.copy()
    active = np.ones(r.shape, dtype=bool)
    it = 0
    for it in range(1, _MAX_NEWTON + 1):
        ra = r[active]
        step = (phi(ra) - y[active]) / dphi(ra)
        new = np.maximum(ra - step, r_lo[active])
        r[active] = new
        # From the right the step is >= 0; a negative one is round-off at the root.
        done = step <= 1e-14 * new
        active_idx = np.flatnonzero(active)
        active[active_idx[done]] = False
        if not active.any():
            return r, it, True
    return r, it, False


def _dh(r):
    return r / (1.0 + r)


def _dq(r):
    return r * -np.expm1(-r)


def _bracket_freshness(y):
    # h(r) <= r^2/2 and h(r) >= r^2 / (2(1+r)) bracket the root.
    return y + np.sqrt(y * y + 2.0 * y), np.sqrt(2.0 * y)


def _bracket_age(y):
    # q(r) <= min(r^3/3, r^2/2) and q(r) >= r^3 / (3(1+r)) bracket the root.
    return (np.maximum(np.sqrt(6.0 * y), np.cbrt(6.0 * y)),
            np.maximum(np.cbrt(3.0 * y), np.sqrt(2.0 * y)))


# Root tables: log r against log y on a uniform grid, linear interpolation (~2e-7
# relative), then one unguarded Newton step (quadratic: ~1e-13). About 5x faster than
# bracketed Newton from the right; the demand pass evaluates it grid_points times per page.
_TABLE_POINTS = 1 << 14
_TABLE_LOG_Y = {"freshness": (np.log(1e-12), np.log(40.0)),   # g < 1 in double => y < 37
                "age": (np.log(1e-12), np.log(_AGE_LARGE * 1.01))}
_PHI = {"freshness": (_h, _dh, _bracket_freshness), "age": (_q, _dq, _bracket_age)}
_POLISH = 1
_tables: dict = {}


def _root_table(objective):
    if objective not in _tables:
        log_y = np.linspace(*_TABLE_LOG_Y[objective], _TABLE_POINTS)
        phi, dphi, bracket = _PHI[objective]
        y = np.exp(log_y)
        hi, lo = bracket(y)
        r, _, conv = _newton_from_right(phi, dphi, y, hi, lo)
        assert conv, "root table did not converge"
        log_r = np.log(r)
        _tables[objective] = (log_y[0], log_y[1] - log_y[0], log_r, np.diff(log_r))
    return _tables[objective]


def _solve_phi(y, objective):
    """Root of phi(r) = y (phi = h or q) for y > 0 up to the table's end; returns the
    root and the last Newton step (its size tells convergence)."""
    x0, dx, log_r, slope = _root_table(objective)
    phi, dphi, bracket = _PHI[objective]
    # In place where it changes nothing: the demand pass runs this on millions of values.
    pos = np.log(y)
    pos -= x0
    pos /= dx
    i = np.clip(pos.astype(np.int64), 0, log_r.size - 2)
    r = log_r[i]
    r += (pos - i) * slope[i]
    np.exp(r, out=r)
    below = pos < 0
    tiny = bool(below.any())
    if tiny:  # tiny targets: the leading term of phi (sqrt(2y) or cbrt(3y))
        r[below] = bracket(y[below])[1]
    step = np.zeros_like(r)
    for _ in range(_POLISH + int(tiny)):
        step = (phi(r) - y) / dphi(r)
        r = np.maximum(r - step, 0.5 * r)
    return r, step


def _ratio(target, objective):
    """(r for every target, the Newton-solved entries, their last step)."""
    t = np.asarray(target, dtype=float)
    if objective == "freshness":
        ok = (t > 0) & (t < 1)
        if ok.all():  # every target inside: no masks (the demand pass's usual case)
            r, step = _solve_phi(-np.log1p(-t), "freshness")
            return r, r, step
        r = np.full(t.shape, np.nan)
        r[t >= 1] = np.inf
        r[t <= 0] = 0.0
        # g(r) = c  <=>  h(r) = r - log1p(r) = -log(1 - c) =: y
        sol, step = _solve_phi(-np.log1p(-t[ok]), "freshness")
    else:
        large = t > _AGE_LARGE
        ok = (t > 0) & ~large
        if ok.all():
            r, step = _solve_phi(t, "age")
            return r, r, step
        r = np.full(t.shape, np.nan)
        r[t <= 0] = 0.0
        r[large] = np.sqrt(2.0 * (t[large] + 1.0))
        sol, step = _solve_phi(t[ok], "age")
    r[ok] = sol
    return r, sol, step


def stationary_ratio(target, objective="freshness"):
    """Solve the stationarity condition for r = λ/f.

    Freshness: :math:`g(r) = c` with ``c = target`` in (0, 1).
    Age: :math:`q(r) = Y` with ``Y = target`` > 0.

    The root is read from a precomputed log-log table and polished with a
    Newton step (quadratic convergence from the table's ~2e-7 relative error).

    Returns
    -------
    r : ndarray
        Root (inf where a freshness target is >= 1: the page is not worth a visit).
    iterations : int
        Newton polishing steps.
    converged : bool
        The polishing step was within the table's error (<= 1e-6 relative),
        so the root is accurate to round-off.
    """
    check_objective(objective)
    r, sol, step = _ratio(target, objective)
    converged = bool(np.all(np.abs(step) <= 1e-6 * sol))  # the step before was <= ~1e-12
    return r, _POLISH, converged


def marginal_value(lam, weight, f, objective="freshness"):
    r"""Objective gained per extra visit/day: :math:`w g(r)/\lambda` or :math:`w q(r)/\lambda^2`.

    Zero where λ = 0 or w = 0 (the objective does not depend on f there).
    At f = 0 it is :math:`w/\lambda` for freshness and infinite for age.
    """
    check_objective(objective)
    lam, weight = check_pages(lam, weight)
    f = np.asarray(f, dtype=float)
    useful = (lam > 0) & (weight > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.where(useful, lam / f, 0.0)
        if objective == "freshness":
            out = weight * _g(r) / lam
        else:
            # For r > 44, q = r^2/2 - 1 exactly in double; avoid lam^2 overflow.
            big = r > 44.0
            out = np.where(big, weight * (0.5 / (f * f) - 1.0 / (lam * lam)),
                           weight * _q(r) / (lam * lam))
            out = np.where(f <= 0, np.inf, out)
    return np.where(useful, out, 0.0)


def stale_visit_value(lam, weight, horizon_days):
    r"""Freshness one visit buys a page known changed, in importance x days.

    The copy is stale now (a push signal said so, P(changed) = 1). A visit now keeps it
    fresh until the page's next change or its next visit ``horizon_days`` later, whichever
    comes first, so the visit is worth

    .. math::

        V = w\,E[\min(X, T)] = \frac{w\,(1 - e^{-\lambda T})}{\lambda},
        \qquad X \sim \mathrm{Exp}(\lambda),

    the freshness of one refresh interval of Cho & Garcia-Molina (ACM TODS 28(4), 2003,
    §3) and ``w T`` as λ → 0. It is in the units of the budget multiplier μ (a visit/day
    kept for a day is one visit): at the optimum the day's marginal visit buys μ, so a
    visit worth less than μ costs freshness elsewhere. :math:`V \le w/\lambda`, the
    marginal value at f = 0: a page too fast for its weight (w/λ < μ, priced at its floor)
    is not worth a visit even when it is known stale, since it will be stale again
    within 1/λ days.

    Parameters
    ----------
    lam, weight : array_like
        Change rate (per day, >= 0) and importance (>= 0) of each page.
    horizon_days : array_like
        Days to the page's next visit (> 0; inf: none planned).
    """
    lam, weight = check_pages(lam, weight)
    horizon = np.broadcast_to(np.asarray(horizon_days, dtype=float), lam.shape)
    if np.any(np.isnan(horizon) | (horizon <= 0)):
        raise ValueError("horizon_days must be > 0 (inf: no next visit)")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # -expm1(-x)/lam is exact for small x; lam = 0 leaves w T (inf with no next visit).
        fresh_days = np.where(lam > 0, -np.expm1(-lam * horizon) / lam, horizon)
        return np.where(weight > 0, weight * fresh_days, 0.0)


def optimal_rates(lam, weight, mu, f_min=0.0, f_max=np.inf, objective="freshness",
                  bounds=None):
    r"""Best refresh rate of each page at price μ per visit/day (KKT, box-clipped).

    Maximises :math:`w\bar F(\lambda, f) - \mu f` (or minimises
    :math:`w\bar A + \mu f`) over :math:`f \in [f_{min}, f_{max}]`:
    ``f = clip(λ / r, f_min, f_max)`` with r the root of
    :math:`g(r) = \mu\lambda/w` (freshness) or :math:`q(r) = \mu\lambda^2/w` (age),
    Cho & Garcia-Molina (SIGMOD 2000). Because the objective is concave in f,
    clipping the unconstrained root gives the box-constrained optimum.

    Parameters
    ----------
    lam, weight : array_like
        Change rates (per day, >= 0) and importance weights (>= 0).
    mu : float or array_like
        Price per visit/day, >= 0 (may be inf); broadcast against ``lam``.
    f_min, f_max : float
        Box bounds on each rate (visits/day).
    objective : {'freshness', 'age'}
    bounds : (lo, hi), optional
        :func:`jobs.core.allocation_prices.box_prices` of these pages and this box.
        Given, a page whose μ lies outside (lo, hi) gets its box bound without solving
        for the root (the same rate to round-off; used when the same pages are priced at
        many levels).

    Returns
    -------
    ndarray
        Rates. Pages with λ = 0 or w = 0 gain nothing from visits and get
        ``f_min``. At μ = 0 useful pages get ``f_max``. For freshness a page
        with :math:`\mu \ge w/\lambda` (one visit buys at most 1/λ days of
        freshness) gets ``f_min``; under age every page with λ > 0 gets a
        positive rate.
    """
    lam, weight = check_pages(lam, weight)
    f_min, f_max = check_box(f_min, f_max)
    check_objective(objective)
    mu = np.asarray(mu, dtype=float)
    if mu.size and not mu.min() >= 0:  # one pass over the levels; NaN fails it too
        raise ValueError("mu must be >= 0")
    if bounds is not None:
        lam, weight, mu, lo, hi = np.broadcast_arrays(lam, weight, mu, *bounds)
        rates = np.where(mu <= lo, f_max, f_min)
        # One scan for the (page, level) pairs inside their price range; only those are
        # gathered and solved (most of a demand curve's pairs sit on a box bound).
        inner = np.nonzero((mu > lo) & (mu < hi))
    else:
        lam, weight, mu = np.broadcast_arrays(lam, weight, mu)
        rates = np.full(lam.shape, f_min)
        inner = np.nonzero((lam > 0) & (weight > 0))
    rates[inner] = _interior_rates(lam[inner], weight[inner], mu[inner], f_min, f_max,
                                   objective)
    return rates


def _interior_rates(lam, w, mu, f_min, f_max, objective):
    """clip(λ/r) for pages with λ > 0 and w > 0 (1-D arrays)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if objective == "freshness":
            target = mu * lam / w
        else:
            target = mu / w * lam * lam
    target = np.where(mu == 0, 0.0, target)
    r = _ratio(target, objective)[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        f = lam / r
        if objective == "age":
            # Large-r closed form f = 1/sqrt(2μ/w + 2/λ²): no λ² overflow.
            big = target > _AGE_LARGE
            f = np.where(big, 1.0 / np.sqrt(2.0 * mu / w + 2.0 / (lam * lam)), f)
    f = np.where(r == 0, np.inf, f)
    return np.clip(f, f_min, f_max)


def objective_value(lam, weight, rates, objective="freshness"):
    r"""Total objective :math:`\sum_i w_i \bar F_i` (freshness) or :math:`\sum_i w_i \bar A_i` (age, days).

    Pages with zero weight contribute 0 (their age may be infinite at f = 0).
    """
    from jobs.core.freshness import age, freshness  # local: keep import graph flat
    check_objective(objective)
    lam, weight = check_pages(lam, weight)
    rates = np.asarray(rates, dtype=float)
    if objective == "freshness":
        return float(np.sum(weight * freshness(lam, rates)))
    per_page = np.where(weight > 0, age(lam, rates), 0.0)
    return float(np.sum(weight * per_page))
