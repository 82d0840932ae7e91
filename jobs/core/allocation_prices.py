r"""The prices between which a page's optimal rate moves (pure numpy).

At price μ per visit/day the optimal rate of a page is the root of
``marginal value = μ`` clipped to the box (:func:`jobs.core.allocation_kkt.optimal_rates`).
The marginal value falls as the rate grows, so each page has a price range outside which
its rate sits on a box bound: the driver's level grid spans the union of these ranges
(:func:`multiplier_bounds`, reduced over hosts with min/max), and the demand pass skips the
root for every (page, level) outside its page's range (:func:`box_prices`).
"""
from __future__ import annotations

import numpy as np

from jobs.core.allocation_kkt import check_pages, marginal_value


def price_range(lam, weight, f_low, f_high, objective="freshness"):
    r"""Per page, the prices between which its optimal rate moves from f_high to f_low.

    The marginal value v = :func:`marginal_value` of a visit falls as f grows, so the
    rate is >= f_high for :math:`\mu \le lo = v(f_{high})` and <= f_low for
    :math:`\mu \ge hi = v(f_{low})` (freshness: :math:`v(f) = w\,g(\lambda/f)/\lambda`).
    A page with λ = 0 or w = 0 never moves: (inf, 0). NaN where v is 0/0 (age, λ²
    underflows), as :func:`marginal_value` gives it.
    """
    lam, weight = check_pages(lam, weight)
    useful = (lam > 0) & (weight > 0)
    lo, hi = np.full(lam.shape, np.inf), np.zeros(lam.shape)
    n = int(useful.sum())
    lo[useful] = marginal_value(lam[useful], weight[useful], np.full(n, float(f_high)), objective)
    hi[useful] = marginal_value(lam[useful], weight[useful], np.full(n, float(f_low)), objective)
    return lo, hi


def box_prices(lam, weight, f_min, f_max, objective="freshness"):
    """:func:`price_range` of the box [f_min, f_max], for ``optimal_rates(bounds=...)``:
    at μ <= lo the rate is f_max, at μ >= hi it is f_min. A page with λ = 0 or w = 0 always
    gets f_min: (-1, -1); one whose prices are NaN always gets the root: (-1, inf)."""
    lo, hi = price_range(lam, weight, f_min, f_max, objective)
    never = np.isinf(lo) & (hi == 0)
    lo[never], hi[never] = -1.0, -1.0
    unknown = np.isnan(lo) | np.isnan(hi)
    lo[unknown], hi[unknown] = -1.0, np.inf
    return lo, hi


def multiplier_bounds(lam, weight, f_low, f_high, objective="freshness"):
    r"""Range of prices over which the given pages' rates move.

    For μ <= ``lo`` every useful page's optimal rate is >= ``f_high``; for
    μ >= ``hi`` every page's rate is <= ``f_low`` (``lo``/``hi`` are the min/max over the
    pages of :func:`price_range`). Both reduce across hosts with min/max, so they can be
    computed as an aggregate. Returns (lo, hi); (inf, 0) when no page has λ > 0 and w > 0.
    """
    lam, weight = check_pages(lam, weight)
    useful = (lam > 0) & (weight > 0)
    if not useful.any():
        return np.inf, 0.0
    lo, hi = price_range(lam[useful], weight[useful], f_low, f_high, objective)
    return float(lo.min()), float(hi.max())
