"""Compact, decayable sufficient statistics for per-URL change-rate estimation.

One row per URL holds a fixed set of float columns (``STATS_COLUMNS``) that the
daily job updates from yesterday's row and today's fetch observations only.
Every column is a *decayed sum*, so forgetting is a single multiplication and
folding new observations is a scatter-add; the order in which days are folded
does not matter beyond the decay factors.

Each observation is one successful fetch: the interval ``t`` (days) since the
previous successful fetch of the URL and whether the content changed. Under the
Poisson change model the censored log-likelihood of a URL is

.. math:: \\ell(\\lambda) = \\sum_{i \\in \\text{changed}} \\log(1 - e^{-\\lambda t_i})
          - \\lambda \\sum_{j \\in \\text{unchanged}} t_j

(Cho & Garcia-Molina, "Estimating frequency of change", ACM TOIT 3(3), 2003,
irregular-access case). The unchanged side is summarised exactly by the total
exposure :math:`\\sum_j t_j`. The changed side is summarised by a count and a
sum of ``t`` in each of ``N_BINS`` log-spaced interval bins (1 hour … 1 year);
each bin contributes as if all its observations had the bin's mean interval,
which is exact for regular crawling and a small (measured) approximation
otherwise (see docs/estimation.md).

Where the host's Last-Modified header is trusted, a changed fetch also reveals
``s``, the time from the last modification to the fetch. Then the likelihood of
that fetch is :math:`\\lambda e^{-\\lambda s}` (a change at the LM instant, none
after it) and an unchanged fetch contributes :math:`e^{-\\lambda t}`; these are
summarised exactly by ``lm_changes`` and ``lm_exposure``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

N_BINS = 16
BIN_MIN_DAYS = 1.0 / 24.0
BIN_MAX_DAYS = 365.0
BIN_EDGES_DAYS = np.geomspace(BIN_MIN_DAYS, BIN_MAX_DAYS, N_BINS + 1)

CHANGED_COUNT_COLUMNS = tuple(f"chg_n_{k:02d}" for k in range(N_BINS))
CHANGED_TSUM_COLUMNS = tuple(f"chg_t_{k:02d}" for k in range(N_BINS))
UNCHANGED_COUNT = "unch_n"
UNCHANGED_EXPOSURE = "unch_t"
LM_COUNT = "lm_n"
LM_CHANGES = "lm_changes"
LM_EXPOSURE = "lm_exposure"

#: All state columns, in storage order. Every column is a decayed float sum.
STATS_COLUMNS: tuple[str, ...] = (
    CHANGED_COUNT_COLUMNS + CHANGED_TSUM_COLUMNS
    + (UNCHANGED_COUNT, UNCHANGED_EXPOSURE, LM_COUNT, LM_CHANGES, LM_EXPOSURE)
)

# Relative slack allowed when a Last-Modified age slightly exceeds the fetch
# interval because of clock skew between crawler and server.
_LM_SKEW = 1e-6


def empty_stats(n: int) -> pd.DataFrame:
    """Return ``n`` rows of all-zero statistics (a URL with no observations).

    Parameters
    ----------
    n : int
        Number of URLs.

    Returns
    -------
    pandas.DataFrame
        Columns ``STATS_COLUMNS``, float64, index ``0..n-1``.
    """
    if int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    return pd.DataFrame(np.zeros((int(n), len(STATS_COLUMNS))), columns=list(STATS_COLUMNS))


def check_stats(stats: pd.DataFrame) -> None:
    """Raise ``ValueError`` unless ``stats`` has every stats column, finite and ≥ 0."""
    missing = [c for c in STATS_COLUMNS if c not in stats.columns]
    if missing:
        raise ValueError(f"stats is missing columns {missing[:3]}{'...' if len(missing) > 3 else ''}")
    values = stats[list(STATS_COLUMNS)].to_numpy(dtype=float)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("stats columns must be finite and non-negative")


def observation_columns(use_lm: bool = True) -> list[str]:
    """The (non-negative) columns :func:`observation_count` sums: a row has an observation
    when any of them is positive."""
    return list(CHANGED_COUNT_COLUMNS) + [UNCHANGED_COUNT] + ([LM_COUNT] if use_lm else [])


def observation_count(stats: pd.DataFrame, use_lm: bool = True) -> np.ndarray:
    """Effective (decayed) observations per row: changed and unchanged fetches, plus the
    trusted Last-Modified ones with ``use_lm``."""
    return stats[observation_columns(use_lm)].to_numpy(float).sum(axis=1)


def interval_bin(interval_days) -> np.ndarray:
    """Index of the log-spaced bin of each interval; out-of-range values go to the end bins.

    Bin ``k`` covers ``[BIN_EDGES_DAYS[k], BIN_EDGES_DAYS[k+1])``. Clipping is
    harmless because each bin also stores the actual sum of ``t``.
    """
    t = np.asarray(interval_days, dtype=float)
    width = np.log(BIN_MAX_DAYS / BIN_MIN_DAYS) / N_BINS
    k = np.floor(np.log(np.maximum(t, 1e-300) / BIN_MIN_DAYS) / width)
    return np.clip(k, 0, N_BINS - 1).astype(np.int64)


def decay_factor(elapsed_days, half_life_days: float) -> np.ndarray:
    r""":math:`2^{-\Delta/h}` per row (1 for ``h`` = inf): the one forgetting rule of every
    decayed sum in state (the λ statistics here, the time-of-day sums of
    :mod:`jobs.core.timing`)."""
    h = float(half_life_days)
    if not h > 0:
        raise ValueError(f"half_life_days must be > 0 (inf disables decay), got {half_life_days!r}")
    elapsed = np.asarray(elapsed_days, dtype=float)
    if not np.all(np.isfinite(elapsed)) or np.any(elapsed < 0):
        raise ValueError("elapsed_days must be finite and >= 0")
    return np.exp2(-elapsed / h) if np.isfinite(h) else np.ones_like(elapsed)


def decay_stats(stats: pd.DataFrame, elapsed_days, half_life_days: float) -> pd.DataFrame:
    """Forget old evidence: multiply every statistic by :math:`2^{-\\Delta/h}`.

    Parameters
    ----------
    stats : pandas.DataFrame
        Statistics with ``STATS_COLUMNS``.
    elapsed_days : float or array_like
        Time Δ since the statistics were last decayed (scalar, or one per row).
    half_life_days : float
        Half-life ``h`` > 0; ``numpy.inf`` disables forgetting.

    Returns
    -------
    pandas.DataFrame
        A copy with decayed statistics (other columns untouched).

    Notes
    -----
    Because every column is a sum, decaying yesterday's state and then adding
    today's observations equals weighting each observation by
    :math:`2^{-\\text{age}/h}`: old behaviour fades, so a page whose change
    rate shifts is followed within a few half-lives.
    """
    check_stats(stats)
    elapsed = np.asarray(elapsed_days, dtype=float)
    if elapsed.ndim > 1 or (elapsed.ndim == 1 and len(elapsed) != len(stats)):
        raise ValueError("elapsed_days must be a scalar or have one value per stats row")
    factor = decay_factor(elapsed, half_life_days)
    out = stats.copy()
    cols = list(STATS_COLUMNS)
    out[cols] = stats[cols].to_numpy(dtype=float) * np.reshape(factor, (-1, 1))
    return out


def _check_observations(n_rows, row_index, interval_days, changed, lm_info):
    row_index = np.asarray(row_index)
    t = np.asarray(interval_days, dtype=float)
    chg = np.asarray(changed)
    if row_index.ndim != 1 or t.shape != row_index.shape or chg.shape != row_index.shape:
        raise ValueError("row_index, interval_days and changed must be 1-D arrays of equal length")
    if row_index.size and (not np.issubdtype(row_index.dtype, np.integer)
                           or row_index.min() < 0 or row_index.max() >= n_rows):
        raise ValueError(f"row_index must be integers in [0, {n_rows})")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("interval_days must be finite and > 0")
    if chg.dtype != bool:
        if not np.all(np.isin(chg, (0, 1))):
            raise ValueError("changed must be boolean (or 0/1)")
        chg = chg.astype(bool)
    if lm_info is None:
        lm = np.full(t.shape, np.nan)
    else:
        lm = np.asarray(lm_info, dtype=float)
        if lm.shape != t.shape:
            raise ValueError("lm_info must have one value per observation (NaN = not trusted)")
        if np.any(lm < 0):
            raise ValueError("lm_info (days since last modification) must be >= 0 or NaN")
    return row_index.astype(np.int64), t, chg, lm


def add_observations(stats: pd.DataFrame, row_index, interval_days, changed,
                     lm_info=None) -> pd.DataFrame:
    """Fold a batch of fetch observations (any number per URL) into the statistics.

    Parameters
    ----------
    stats : pandas.DataFrame
        Current statistics (``STATS_COLUMNS``), one row per URL.
    row_index : array_like of int
        Positional row of ``stats`` each observation belongs to.
    interval_days : array_like of float
        Interval ``t`` > 0 since the previous successful fetch of that URL.
    changed : array_like of bool
        Whether the content changed during the interval.
    lm_info : array_like of float, optional
        Days from the trusted Last-Modified time to the fetch, NaN where the
        host's Last-Modified is not trusted or absent. For changed fetches it
        must not exceed ``t``; a changed fetch whose LM age exceeds ``t`` is
        inconsistent and is folded as a censored observation instead. For
        unchanged fetches only its non-NaN-ness matters.

    Returns
    -------
    pandas.DataFrame
        Updated copy. Deterministic; summation order does not affect results
        beyond floating-point rounding.

    Notes
    -----
    * censored changed: ``chg_n_k += 1``, ``chg_t_k += t`` with ``k = interval_bin(t)``;
    * censored unchanged: ``unch_n += 1``, ``unch_t += t``;
    * trusted-LM changed: ``lm_n += 1``, ``lm_changes += 1``, ``lm_exposure += s``;
    * trusted-LM unchanged: ``lm_n += 1``, ``lm_exposure += t``.
    """
    check_stats(stats)
    rows, t, chg, lm = _check_observations(len(stats), row_index, interval_days, changed, lm_info)
    trusted = np.isfinite(lm) & (~chg | (lm <= t * (1 + _LM_SKEW)))
    censored = ~trusted
    n, K = len(stats), N_BINS
    values = stats[list(STATS_COLUMNS)].to_numpy(dtype=float, copy=True)

    cc = censored & chg
    flat = rows[cc] * K + interval_bin(t[cc])
    counts = np.bincount(flat, minlength=n * K).reshape(n, K)
    tsums = np.bincount(flat, weights=t[cc], minlength=n * K).reshape(n, K)
    values[:, :K] += counts
    values[:, K:2 * K] += tsums

    cu = censored & ~chg
    extra = np.column_stack([
        np.bincount(rows[cu], minlength=n),
        np.bincount(rows[cu], weights=t[cu], minlength=n),
        np.bincount(rows[trusted], minlength=n),
        np.bincount(rows[trusted & chg], minlength=n),
        np.bincount(rows[trusted], weights=np.where(chg, np.minimum(lm, t), t)[trusted],
                    minlength=n),
    ])
    values[:, 2 * K:] += extra
    out = stats.copy()
    out[list(STATS_COLUMNS)] = values
    return out


def add_age_at_first_fetch(stats: pd.DataFrame, row_index, age_days, since_days,
                           half_life_days: float) -> pd.DataFrame:
    r"""Fold the trusted Last-Modified a page had when it was first fetched.

    The first copy of a page is no observation of an interval, but its Last-Modified says
    the page changed ``a`` days before the first fetch and not since: likelihood
    :math:`\lambda e^{-\lambda a}`, the density of the age (backward recurrence time) of a
    Poisson process seen at an instant independent of it, which is Exp(λ) (Cox, *Renewal
    Theory*, 1962; the Last-Modified estimator of Cho & Garcia-Molina, ACM TOIT 3(3), 2003,
    reads the same age at each changed access). A publisher's age is uniform over its
    period instead; read as an instant it overstates the rate (2/7 a day for a weekly one's
    mean age), as every Last-Modified age of a publisher does, one observation among its
    others. A page that never changed before its birth reads its birth as the change, which
    errs fast, as a page without it does. Without it a page that changes twice a year is
    estimated from the few days since it was found, at its group's rate.

    The age is weighted as every decayed sum is (:func:`decay_stats`): the change by
    :math:`2^{-(s+a)/h}`, the exposure by its integral
    :math:`2^{-s/h}\,\tfrac{h}{\ln 2}(1 - 2^{-a/h})`, ``s`` the days from the first fetch
    to now. However old the Last-Modified (1970 included), it weighs at most ``h/ln 2`` days
    of exposure.

    Parameters
    ----------
    stats : pandas.DataFrame
        ``STATS_COLUMNS``, one row per URL.
    row_index : array_like of int
        Positional rows of ``stats``, each at most once.
    age_days : array_like of float
        Days from the Last-Modified to the first fetch, > 0.
    since_days : array_like of float
        Days from the first fetch to the fold, >= 0.
    half_life_days : float
        ``h`` of :func:`decay_factor` (inf: no decay, the exposure is ``a``).

    Returns
    -------
    pandas.DataFrame
        Updated copy: ``lm_n`` and ``lm_changes`` += the change's weight, ``lm_exposure``
        += the decayed exposure.
    """
    check_stats(stats)
    rows = np.asarray(row_index)
    age = np.asarray(age_days, dtype=float)
    since = np.asarray(since_days, dtype=float)
    if rows.ndim != 1 or age.shape != rows.shape or since.shape != rows.shape:
        raise ValueError("row_index, age_days and since_days must be 1-D arrays of equal length")
    if rows.size and (not np.issubdtype(rows.dtype, np.integer) or rows.min() < 0
                      or rows.max() >= len(stats) or len(np.unique(rows)) != rows.size):
        raise ValueError(f"row_index must be distinct integers in [0, {len(stats)})")
    if not (np.all(np.isfinite(age)) and np.all(age > 0) and np.all(np.isfinite(since))
            and np.all(since >= 0)):
        raise ValueError("age_days must be finite and > 0, since_days finite and >= 0")
    h = float(half_life_days)
    change = decay_factor(since + age, h)
    exposure = (decay_factor(since, h) * (h / np.log(2.0)) * -np.expm1(-age * np.log(2.0) / h)
                if np.isfinite(h) else age)
    out = stats.copy()
    for col, add in ((LM_COUNT, change), (LM_CHANGES, change), (LM_EXPOSURE, exposure)):
        values = out[col].to_numpy(dtype=float, copy=True)
        values[rows] += add
        out[col] = values
    return out


def update_state_frame(state: pd.DataFrame, observations: pd.DataFrame, *, key: str = "url",
                       elapsed_days=1.0, half_life_days: float = 90.0,
                       interval_col: str = "interval_days", changed_col: str = "changed",
                       lm_col: str | None = "lm_age_days") -> pd.DataFrame:
    """One daily step for a Spark ``applyInPandas``/cogroup batch: decay, then fold.

    Parameters
    ----------
    state : pandas.DataFrame
        Yesterday's rows: ``key`` plus ``STATS_COLUMNS`` (extra columns kept).
    observations : pandas.DataFrame
        Today's fetches: ``key``, ``interval_col``, ``changed_col`` and,
        optionally, ``lm_col`` (NaN where Last-Modified is not trusted).
    elapsed_days, half_life_days
        Passed to :func:`decay_stats`.

    Returns
    -------
    pandas.DataFrame
        Updated state; URLs seen for the first time get a new row (extra
        columns NaN), URLs without observations are only decayed.
    """
    if key not in state.columns or key not in observations.columns:
        raise ValueError(f"both frames need the key column {key!r}")
    if state[key].duplicated().any():
        raise ValueError("state must hold one row per key")
    new_keys = pd.Index(observations[key].unique()).difference(pd.Index(state[key]))
    fresh = empty_stats(len(new_keys))
    fresh.insert(0, key, new_keys.to_numpy())
    merged = pd.concat([state, fresh], ignore_index=True) if len(fresh) else state.reset_index(drop=True)
    merged = decay_stats(merged, elapsed_days if np.ndim(elapsed_days) == 0
                         else np.concatenate([np.asarray(elapsed_days, float), np.zeros(len(fresh))]),
                         half_life_days)
    position = pd.Series(np.arange(len(merged)), index=merged[key].to_numpy())
    rows = position.loc[observations[key].to_numpy()].to_numpy()
    lm = observations[lm_col].to_numpy(dtype=float) if lm_col and lm_col in observations else None
    return add_observations(merged, rows, observations[interval_col].to_numpy(dtype=float),
                            observations[changed_col].to_numpy(), lm)
