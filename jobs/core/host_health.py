"""Per-host health and the AIMD ``cap_factor`` the allocator multiplies a host's cap by.

Rule (additive increase, multiplicative decrease — Jacobson, "Congestion avoidance and
control", SIGCOMM 1988; the same shape as Googlebot's crawl-rate limit, which backs off
when a server answers slowly or with errors and creeps back up when it recovers):

.. math::

    f_{D} = \\begin{cases}
      \\max(f_{min},\\ \\beta f_{D-1}) & \\text{bad day: error share} > e_{max}
          \\text{ or mean latency} > L_{max} \\text{ or any 429} \\\\
      \\min(1,\\ f_{D-1} + \\alpha) & \\text{good day} \\\\
      f_{D-1} & \\text{fewer than } n_{min} \\text{ fetches (no verdict)}
    \\end{cases}

with ``f`` starting at 1, error share = (status 0 + 5xx + 429) / fetches, β =
``health.decrease``, α = ``health.increase``. A host that keeps failing is cut
geometrically (0.5, 0.25, … down to ``f_min``) and needs (1 − f)/α good days to recover.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

HEALTH_COLUMNS = ("fetches_today", "timeouts_today", "errors_5xx_today", "throttled_429_today",
                  "error_rate_today", "mean_latency_ms_today", "cap_factor")


def next_cap_factor(prev, fetches, errors, throttled, mean_latency_ms, *, max_error_rate=0.05,
                    max_latency_ms=2000.0, decrease=0.5, increase=0.1, min_cap_factor=0.05,
                    min_fetches=5) -> np.ndarray:
    """One AIMD step of the cap factor per host (see the module docstring).

    Parameters
    ----------
    prev : array_like
        Yesterday's factor (NaN for a new host: starts at 1).
    fetches, errors, throttled : array_like
        Today's fetch attempts, those with status 0/5xx/429, and those with 429.
    mean_latency_ms : array_like
        Mean response time today (NaN if unknown: not judged on latency).
    """
    f = np.nan_to_num(np.asarray(prev, float), nan=1.0)
    n = np.asarray(fetches, float)
    err = np.asarray(errors, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n > 0, err / n, 0.0)
    lat = np.asarray(mean_latency_ms, float)
    bad = (rate > max_error_rate) | (np.nan_to_num(lat, nan=0.0) > max_latency_ms) \
        | (np.asarray(throttled, float) > 0)
    judged = n >= max(min_fetches, 1)
    stepped = np.where(bad, np.maximum(min_cap_factor, decrease * f), np.minimum(1.0, f + increase))
    return np.where(judged, stepped, f)


@dataclass(frozen=True)
class HealthParams:
    """The AIMD rule's parameters (``[health]``; built by :func:`jobs.params.health_params`,
    defaults only in ``jobs.config``)."""

    max_error_rate: float
    max_latency_ms: float
    decrease: float
    increase: float
    min_cap_factor: float
    min_fetches: int


def health_frame(today: pd.DataFrame, prev_cap, params: HealthParams) -> pd.DataFrame:
    """Today's health columns per host from aggregated log counts.

    ``today`` has ``fetches``, ``timeouts``, ``errors_5xx``, ``throttled_429`` and
    ``latency_sum_ms``/``latency_n``.
    """
    fetches = today["fetches"].fillna(0).to_numpy(float)
    errors = (today["timeouts"].fillna(0) + today["errors_5xx"].fillna(0)
              + today["throttled_429"].fillna(0)).to_numpy(float)
    lat_n = today["latency_n"].fillna(0).to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        lat = np.where(lat_n > 0, today["latency_sum_ms"].fillna(0).to_numpy(float) / lat_n, np.nan)
        rate = np.where(fetches > 0, errors / fetches, np.nan)
    cap = next_cap_factor(prev_cap, fetches, errors, today["throttled_429"].fillna(0), lat,
                          max_error_rate=params.max_error_rate,
                          max_latency_ms=params.max_latency_ms, decrease=params.decrease,
                          increase=params.increase, min_cap_factor=params.min_cap_factor,
                          min_fetches=params.min_fetches)
    return pd.DataFrame({
        "fetches_today": fetches.astype(np.int64),
        "timeouts_today": today["timeouts"].fillna(0).to_numpy(np.int64),
        "errors_5xx_today": today["errors_5xx"].fillna(0).to_numpy(np.int64),
        "throttled_429_today": today["throttled_429"].fillna(0).to_numpy(np.int64),
        "error_rate_today": rate, "mean_latency_ms_today": lat, "cap_factor": cap,
    }, index=today.index)
