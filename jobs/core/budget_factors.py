"""The what-if curve's budget multiples and its metrics columns (stdlib only, so that the
contracts in :mod:`jobs.schemas` can name the columns without the curve's maths;
:mod:`jobs.core.budget_curve` computes the points)."""
from __future__ import annotations

#: Budget multiples of the what-if curve (today's, 1, is the plan itself).
FACTORS = (0.5, 0.75, 0.9, 1.1, 1.25, 1.5, 2.0)


def factor_key(factor: float) -> str:
    """``0.75`` -> ``"075"``: the suffix of a point's columns (hundredths of the budget)."""
    return f"{int(round(factor * 100)):03d}"


#: metrics columns of the curve: expected freshness and age (days) at each factor.
FRESHNESS_COLUMNS = tuple(f"curve_freshness_{factor_key(c)}" for c in FACTORS)
AGE_COLUMNS = tuple(f"curve_age_days_{factor_key(c)}" for c in FACTORS)
