"""Vectorised root finding on the log-rate scale for the censored Poisson posterior.

Internal module of :mod:`jobs.core.estimators`. With :math:`u = \\log\\lambda`,
binned changed counts :math:`c_k` at representative intervals :math:`\\bar t_k`,
and :math:`A, B` collecting the Gamma prior and the exactly-observed terms, the
log posterior density of ``u`` is

.. math:: \\ell(u) = \\sum_k c_k \\log\\left(1 - e^{-\\lambda \\bar t_k}\\right) + A u - B\\lambda,

.. math:: \\ell'(u) = \\sum_k c_k\\,\\varphi(\\lambda \\bar t_k) + A - B\\lambda,
   \\qquad \\varphi(x) = \\frac{x}{e^x - 1},

which is strictly decreasing in ``u`` (``ℓ`` is concave), so the mode is the
unique root of ``ℓ'``. Setting ``ℓ'(u)=0`` and dividing by λ recovers Cho &
Garcia-Molina's (2003) irregular-access equation
:math:`\\sum_i t_i/(e^{\\lambda t_i}-1) = \\sum_j t_j` when ``A = 0`` and ``B``
is the unchanged exposure.

A log-normal prior :math:`u \\sim N(m, 1/P)` (the group priors of
:mod:`jobs.core.estimators_shrinkage`, applied as the normal they were fitted as)
adds :math:`-\\tfrac{P}{2}(u-m)^2` to ``ℓ``, :math:`-P(u-m)` to ``ℓ'`` and ``-P`` to
``ℓ''``: ``ℓ`` stays strictly concave and the mode finite for every history.
"""
from __future__ import annotations

import numpy as np


class CensoredPosterior:
    """Per-URL arrays of the log posterior above; rows are URLs, columns bins."""

    def __init__(self, counts, tbar, shape_term, rate_term, log_mean=None, log_precision=None):
        self.counts = np.asarray(counts, dtype=float)
        # Empty bins get t=1 so that 0 * finite stays 0 in every sum.
        self.tbar = np.where(self.counts > 0, np.asarray(tbar, dtype=float), 1.0)
        self.A = np.asarray(shape_term, dtype=float)
        self.B = np.asarray(rate_term, dtype=float)
        self.C = self.counts.sum(axis=1)
        self.half_ct = 0.5 * (self.counts * self.tbar).sum(axis=1)
        n = len(self.C)
        # Normal prior on u (precision 0 = none); rows with P > 0 use it instead of A, B's prior.
        self.P = np.zeros(n) if log_precision is None else np.asarray(log_precision, dtype=float)
        self.m = np.zeros(n) if log_mean is None else np.asarray(log_mean, dtype=float)
        self.m = np.where(self.P > 0, self.m, 0.0)

    def logpost(self, u, rows):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            lam = np.exp(u)[:, None]
            x = lam * self.tbar[rows]
            changed = (self.counts[rows] * np.log(-np.expm1(-x))).sum(axis=1)
        normal = 0.5 * self.P[rows] * (u - self.m[rows]) ** 2
        return changed + self.A[rows] * u - self.B[rows] * lam[:, 0] - normal

    def score(self, u, rows):
        """Return ``ℓ'(u)`` and ``ℓ''(u)`` for the given rows."""
        lam = np.exp(u)
        x = lam[:, None] * self.tbar[rows]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            phi = np.where(x > 1e-12, x / np.expm1(x), 1.0)
            # φ² eˣ = x² / (4 sinh²(x/2)), written so that large x underflows to 0.
            phi2ex = np.where(x > 1e-12, (x / (2.0 * np.sinh(0.5 * x))) ** 2, 1.0)
        c = self.counts[rows]
        d1 = (c * phi).sum(axis=1) + self.A[rows] - self.B[rows] * lam \
            - self.P[rows] * (u - self.m[rows])
        d2 = (c * (phi - phi2ex)).sum(axis=1) - self.B[rows] * lam - self.P[rows]
        return d1, d2

    def prior_only(self):
        """Rows whose posterior is the normal prior on ``u`` alone (no change, no exposure,
        no Gamma term): mode ``m``, interval ``m ± sqrt(2 drop / P)``, both closed-form. Most
        of a young crawl's URLs (one fetch, no interval yet) are such rows."""
        return (self.P > 0) & (self.C + self.A <= 0) & (self.B <= 0)

    def mode_bracket(self):
        """Bounds on λ̂ from :math:`1 - x/2 \\le \\varphi(x) \\le 1`.

        Returns ``(lo, hi)`` with ``(C+A)/(B + Σ c t/2) ≤ λ̂ ≤ (C+A)/B``.
        """
        num = self.C + self.A
        with np.errstate(divide="ignore", invalid="ignore"):
            return num / (self.B + self.half_ct), num / self.B

    def log_bracket(self):
        """Bounds ``(lo, hi)`` on the mode of ``u``, valid with or without the normal prior.

        Without it, the logs of :meth:`mode_bracket`. With it (``P > 0``), both parts of
        ``ℓ'`` are ≥ 0 below :math:`\\min(\\log\\lambda_{lo}, m)` and ≤ 0 above
        :math:`\\max(\\log\\lambda_{hi}, m)`; also ``ℓ' ≥ 0`` at :math:`u \\le m - B e^m/P`
        and ``ℓ' ≤ 0`` at :math:`u \\ge m + (C+A)/P` (as :math:`\\sum_k c_k\\varphi \\le C`);
        the tighter of each pair is used.
        """
        lam_lo, lam_hi = self.mode_bracket()
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lo, hi = np.log(lam_lo), np.log(lam_hi)
            has = self.P > 0
            P = np.where(has, self.P, 1.0)
            lo_n = np.maximum(np.where(self.C + self.A > 0, np.minimum(lo, self.m), -np.inf),
                              self.m - self.B * np.exp(self.m) / P)
            hi_n = np.minimum(np.where(self.B > 0, np.maximum(hi, self.m), np.inf),
                              self.m + (self.C + self.A) / P)
        return np.where(has, lo_n, lo), np.where(has, hi_n, hi)


def solve_decreasing(fun, lo, hi, rows, *, x0=None, xtol=1e-12, maxiter=100):
    """Safeguarded Newton for a decreasing function on brackets ``[lo, hi]``, vectorised.

    ``fun(x, rows)`` returns ``(f, f')``. A Newton step is taken only when it lands
    strictly inside the current bracket and moves less than half its width; otherwise
    the row bisects (the guard of *rtsafe*, Press et al., *Numerical Recipes*, 3rd ed.,
    §9.4), so the bracket at least halves every other iteration and every row converges;
    near the root steps are Newton (quadratic). Newton alone can cycle: from a point far
    below a flat root it overshoots to the far bracket end, and the step back lands on the
    end it came from (an all-changed page under a weak log-normal prior did, for all
    ``maxiter`` iterations).

    Returns
    -------
    x, converged, iterations : ndarray
    """
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    x = 0.5 * (lo + hi) if x0 is None else np.clip(np.array(x0, dtype=float), lo, hi)
    converged = hi - lo <= xtol * (1.0 + np.abs(x))
    iterations = np.zeros(len(x), dtype=np.int64)
    active = np.flatnonzero(~converged)
    for _ in range(maxiter):
        if active.size == 0:
            break
        xa = x[active]
        f, df = fun(xa, rows[active])
        iterations[active] += 1
        above = f > 0
        lo[active] = np.where(above, xa, lo[active])
        hi[active] = np.where(above, hi[active], xa)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = xa - f / df
        width = hi[active] - lo[active]
        inside = np.isfinite(step) & (step >= lo[active]) & (step <= hi[active])
        tol = xtol * (1.0 + np.abs(xa))
        # Judge convergence on the Newton step itself: at the root it lands on
        # a bracket end, which must not trigger a bisection away from it.
        done = (f == 0) | (inside & (np.abs(step - xa) <= tol)) | (width <= tol)
        strictly = (step > lo[active]) & (step < hi[active]) & (np.abs(step - xa) < 0.5 * width)
        newton = inside & (done | strictly)
        new = np.where(newton, step, 0.5 * (lo[active] + hi[active]))
        x[active] = np.where(f == 0, xa, new)
        converged[active] = done
        active = active[~done]
    return x, converged, iterations


def solve_mode(post: CensoredPosterior, *, xtol=1e-12, maxiter=100):
    """Posterior mode of ``u = log λ`` per row: λ̂, converged, iterations.

    Without a normal prior, rows with no evidence for a change (``C + A = 0``)
    have λ̂ = 0 and rows with no evidence against (``B = 0``) have λ̂ = ∞; both
    are exact, not failures. With one (``P > 0``) the mode is always finite.
    """
    n = len(post.C)
    u_lo, u_hi = post.log_bracket()
    lam = np.full(n, np.nan)
    conv = np.ones(n, dtype=bool)
    iters = np.zeros(n, dtype=np.int64)
    gamma = post.P <= 0
    lam[gamma & (post.C + post.A <= 0)] = 0.0
    lam[gamma & (post.C + post.A > 0) & (post.B <= 0)] = np.inf
    closed = gamma & (post.C == 0) & (post.A > 0) & (post.B > 0)
    lam[closed] = post.A[closed] / post.B[closed]
    nodata = post.prior_only()   # the prior alone: mode m
    lam[nodata] = np.exp(post.m[nodata])
    rows = np.flatnonzero(np.isnan(lam))
    if rows.size:
        lo, hi = u_lo[rows], u_hi[rows]
        u, c, it = solve_decreasing(post.score, lo, hi, rows, x0=lo, xtol=xtol, maxiter=maxiter)
        lam[rows], conv[rows], iters[rows] = np.exp(u), c, it
    return lam, conv, iters


def likelihood_ratio_interval(post: CensoredPosterior, lam_hat, drop, *, xtol=1e-10,
                              maxiter=100):
    """Endpoints of ``{u : ℓ(u) ≥ ℓ(û) − drop}`` per row (0 / ∞ when unbounded)."""
    n = len(lam_hat)
    lo_out = np.zeros(n)
    hi_out = np.full(n, np.inf)
    finite = np.isfinite(lam_hat) & (lam_hat > 0)
    # ℓ(u) = −P (u − m)² / 2 there: the endpoints need no search (and the search, over every
    # bin of every row, was most of update_state's estimate on a young crawl).
    closed = finite & post.prior_only()
    half_width = np.sqrt(2.0 * drop / post.P[closed])
    lo_out[closed] = np.exp(post.m[closed] - half_width)
    hi_out[closed] = np.exp(post.m[closed] + half_width)
    ok = np.flatnonzero(finite & ~closed)
    if ok.size == 0:
        return lo_out, hi_out
    u_hat = np.log(lam_hat[ok])
    threshold = post.logpost(u_hat, ok) - drop
    position = np.full(n, -1)
    position[ok] = np.arange(ok.size)

    def gap(u, rows):
        return post.logpost(u, rows) - threshold[position[rows]]

    for side in (+1.0, -1.0):
        # Expand a step outwards from the mode until the curve falls below the threshold.
        step = np.ones(ok.size)
        far = u_hat + side * step
        for _ in range(8):
            short = gap(far, ok) >= 0
            if not short.any():
                break
            step = np.where(short, 2.0 * step, step)
            far = u_hat + side * step
        bounded = gap(far, ok) < 0
        rows = ok[bounded]
        if rows.size == 0:
            continue

        def signed(u, r, side=side):
            f = gap(u, r)
            d1, _ = post.score(u, r)
            # Orient so the function decreases in u on this side of the mode.
            return (f, d1) if side > 0 else (-f, -d1)

        a, b = u_hat[bounded], far[bounded]
        lo, hi = (a, b) if side > 0 else (b, a)
        u, _, _ = solve_decreasing(signed, lo, hi, rows, xtol=xtol, maxiter=maxiter)
        (hi_out if side > 0 else lo_out)[rows] = np.exp(u)
    return lo_out, hi_out
