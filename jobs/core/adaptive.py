"""The seed's backoff-and-advance interval rule (the ``adaptive`` baseline policy).

A change seen halves the interval (floored); no change doubles it (capped). This is the
rule most open-source crawlers ship (Nutch's AdaptiveFetchSchedule is a variant); we
keep it as a baseline so that every other policy stays comparable with it.
"""
from __future__ import annotations

import numpy as np


def next_interval(interval_s, observed, changed, floor_s: float, cap_s: float) -> np.ndarray:
    """Interval after one observation.

    Parameters
    ----------
    interval_s : array_like
        Current interval in seconds.
    observed : array_like of bool
        Whether the fetch produced a changed/unchanged observation; others keep the interval.
    changed : array_like of bool
        Whether the observation found a change.
    floor_s, cap_s : float
        Bounds of the interval.
    """
    interval_s = np.asarray(interval_s, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    changed = np.asarray(changed, dtype=bool)
    stepped = np.where(changed, interval_s / 2.0, interval_s * 2.0)
    return np.where(observed, np.clip(stepped, floor_s, cap_s), interval_s)
