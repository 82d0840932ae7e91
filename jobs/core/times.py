"""Timestamps <-> epoch seconds, whatever the datetime unit pandas or Arrow hands us."""
from __future__ import annotations

import numpy as np
import pandas as pd

_EPOCH = pd.Timestamp(0, tz="UTC")
DAY_S = 86400.0


def epoch_seconds(col) -> np.ndarray:
    """Float seconds since 1970 (UTC; naive values are UTC); NaN where missing."""
    ts = pd.to_datetime(pd.Series(col), utc=True)
    return ((ts - _EPOCH) / pd.Timedelta(1, "s")).to_numpy(dtype=float)


def from_epoch_seconds(sec) -> pd.Series:
    """UTC timestamps at microsecond resolution (Parquet's and Spark's)."""
    return pd.to_datetime(pd.Series(np.asarray(sec, dtype=float)), unit="s", utc=True).dt.floor("us")
