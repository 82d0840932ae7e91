"""Freshness and age of a copy refreshed at a constant rate under Poisson change.

All rates are per day. Closed forms follow Cho & Garcia-Molina, "Effective page
refresh policies for web crawlers", ACM TODS 28(4), 2003.
"""
from __future__ import annotations

import numpy as np


def _ratio(lam, f):
    lam = np.asarray(lam, dtype=float)
    f = np.asarray(f, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return lam / f


def freshness(lam, f):
    r"""Time-averaged freshness of a page visited evenly at rate ``f``.

    .. math:: \bar F(\lambda, f) = \frac{f}{\lambda}\left(1 - e^{-\lambda/f}\right)

    Parameters
    ----------
    lam : array_like
        Change rate λ ≥ 0 (changes per day).
    f : array_like
        Visit rate f ≥ 0 (visits per day).

    Returns
    -------
    ndarray
        Freshness in [0, 1]; 1 where λ = 0 (a page that never changes stays
        fresh once fetched) and 0 where f = 0 and λ > 0.
    """
    lam = np.asarray(lam, dtype=float)
    f = np.asarray(f, dtype=float)
    r = _ratio(lam, f)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # -expm1(-r)/r is accurate for tiny r where 1 - exp(-r) cancels.
        out = np.where(r > 0, -np.expm1(-r) / r, 1.0)
    out = np.where((f <= 0) & (lam > 0), 0.0, out)
    return np.clip(out, 0.0, 1.0)


def age(lam, f):
    r"""Time-averaged age (days) of a page visited evenly at rate ``f``.

    .. math:: \bar A = \frac{1}{f}\left(\tfrac12 - \tfrac1r + \frac{1-e^{-r}}{r^2}\right),
       \quad r = \lambda / f

    Returns ``inf`` where f = 0 and λ > 0, and 0 where λ = 0.
    """
    lam = np.asarray(lam, dtype=float)
    f = np.asarray(f, dtype=float)
    r = _ratio(lam, f)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        small = r < 1e-4
        # Series r/6 - r^2/24 avoids cancellation for small r.
        bracket = np.where(small, r / 6.0 - r * r / 24.0,
                           0.5 - 1.0 / r - np.expm1(-r) / (r * r))
        out = bracket / f
    out = np.where(lam <= 0, 0.0, out)
    out = np.where((f <= 0) & (lam > 0), np.inf, out)
    return out


def p_changed(lam, elapsed_days):
    r"""Probability of at least one change in ``elapsed_days``: :math:`1 - e^{-\lambda t}`."""
    lam = np.asarray(lam, dtype=float)
    t = np.clip(np.asarray(elapsed_days, dtype=float), 0.0, None)
    with np.errstate(invalid="ignore"):
        out = -np.expm1(-lam * t)
    return np.where(lam <= 0, 0.0, out)  # a page that never changes, even after forever
