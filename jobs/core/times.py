"""Timestamps <-> epoch seconds, whatever the datetime unit pandas or Arrow hands us."""
from __future__ import annotations

import numpy as np
import pandas as pd

_EPOCH = pd.Timestamp(0, tz="UTC")
DAY_S = 86400.0
#: Largest |epoch seconds| a column can hold: whole seconds inside pandas' datetime64[ns]
#: range (±2^63 ns: 1677-09-21 .. 2262-04-11), so that adding the fraction cannot wrap.
MAX_ABS_S = 9_223_372_036.0


class TimestampOutOfRange(ValueError):
    """Epoch seconds no timestamp column can hold (±inf, or beyond :data:`MAX_ABS_S`);
    names the column, how many rows and one of the values."""

    def __init__(self, column: str, rows: int, example: float) -> None:
        self.column, self.rows, self.example = column, rows, example
        super().__init__(f"column '{column}': {rows} row(s) of epoch seconds out of range "
                         f"(|s| > {MAX_ABS_S:.0f} or not finite), e.g. {example!r}")


def epoch_seconds(col) -> np.ndarray:
    """Float seconds since 1970 (UTC; naive values are UTC); NaN where missing."""
    ts = pd.to_datetime(pd.Series(col), utc=True)
    return ((ts - _EPOCH) / pd.Timedelta(1, "s")).to_numpy(dtype=float)


def from_epoch_seconds(sec, column: str = "epoch seconds") -> pd.Series:
    """UTC timestamps at microsecond resolution (Parquet's and Spark's); NaT where NaN.

    Rounded to the nearest microsecond, not floored: a float64 epoch second holds a
    microsecond timestamp only to ~0.1 µs (until 2106), so flooring moved half of all
    timestamps that went through :func:`epoch_seconds` back by 1 µs on each round trip.

    Only the non-missing values are handed to pandas: pandas 2.3's float path
    (``to_datetime(unit="s")``) leaves its fraction buffer uninitialised at NaN positions
    and rounds it under ``np.errstate(over="raise")``, so whatever bytes that memory held
    raised ``FloatingPointError`` now and then (any value above float max / 1e9 ≈ 1.8e299;
    pandas GH 58419, fixed in 3.0). Values out of range raise :class:`TimestampOutOfRange`
    naming ``column``.
    """
    sec = np.asarray(sec, dtype=float).reshape(-1)
    present = ~np.isnan(sec)
    bad = present & ~(np.abs(sec) <= MAX_ABS_S)
    if bad.any():
        raise TimestampOutOfRange(column, int(bad.sum()), float(sec[bad][0]))
    ns = np.full(sec.shape, np.datetime64("NaT"), dtype="datetime64[ns]")
    if present.any():
        ns[present] = pd.to_datetime(sec[present], unit="s").round("us").to_numpy()
    return pd.Series(pd.DatetimeIndex(ns).tz_localize("UTC"))
