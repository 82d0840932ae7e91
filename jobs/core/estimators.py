"""Per-URL change-rate (λ, changes per day) estimators over compact statistics.

Every estimator takes the statistics frame of :mod:`jobs.core.estimators_stats`
(one row per URL) and returns a DataFrame with ``RESULT_COLUMNS`` on the same
index, so a Spark ``applyInPandas`` function can simply concatenate it to the
state. No loop over URLs: all work is array arithmetic across the batch.

Model: page changes form a Poisson process of rate λ; a fetch after an interval
``t`` reports "changed" with probability :math:`1 - e^{-\\lambda t}`
(Cho & Garcia-Molina, "Estimating frequency of change", ACM TOIT 3(3):256-290,
2003). Each estimate is the mode of the posterior density of
:math:`u = \\log\\lambda` under a Gamma(a, b) prior on λ (shape ``a``, rate
``b`` in days). On the log scale the Jacobian adds ``log λ``, so the mode solves
the estimating equation with ``a`` (not ``a − 1``): it stays finite and positive
for every ``a > 0`` and reduces to the maximum-likelihood estimate as
``a, b → 0``. See docs/estimation.md for the derivations and the accuracy.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from .estimators_solver import CensoredPosterior, likelihood_ratio_interval, solve_mode
from .estimators_stats import (  # noqa: F401  (re-exported public API)
    BIN_EDGES_DAYS, CHANGED_COUNT_COLUMNS, CHANGED_TSUM_COLUMNS, LM_CHANGES, LM_COUNT,
    LM_EXPOSURE, N_BINS, STATS_COLUMNS, UNCHANGED_COUNT, UNCHANGED_EXPOSURE,
    add_age_at_first_fetch, add_observations, check_stats, decay_stats, empty_stats,
    interval_bin, observation_count,
    update_state_frame,
)

#: Default smoothing prior shape ``a`` (Jeffreys-like: half a pseudo-change).
DEFAULT_PRIOR_SHAPE = 0.5
#: Default prior rate ``b`` as a multiple of the URL's mean fetch interval
#: (half an interval of pseudo unchanged exposure), which keeps the default
#: prior scale-free: hourly and monthly crawls are smoothed alike.
DEFAULT_PRIOR_RATE_INTERVALS = 0.5
#: Default central probability of the reported interval.
DEFAULT_LEVEL = 0.9
#: How a given (non-NaN) prior Gamma(α, β) is applied: as that Gamma, or as the normal
#: N(log(α/β), 1/α) on log λ it is the Laplace match of (the group priors' fitted form).
PRIOR_FAMILIES = ("gamma", "lognormal")

RESULT_COLUMNS = ("lambda_hat", "lambda_lo", "lambda_hi", "log_sd", "n_obs",
                  "converged", "iterations")


def _arrays(stats):
    check_stats(stats)
    counts = stats[list(CHANGED_COUNT_COLUMNS)].to_numpy(dtype=float)
    tsums = stats[list(CHANGED_TSUM_COLUMNS)].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tbar = np.where(counts > 0, tsums / counts, 1.0)
    return counts, tsums, tbar


def default_prior_rate(stats: pd.DataFrame) -> np.ndarray:
    """Scale-free default prior rate: ``DEFAULT_PRIOR_RATE_INTERVALS`` × mean interval.

    The mean interval is total observed time over the (decayed) observation
    count; a URL without observations gets 1 day (prior mean ``a`` per day).
    """
    _, tsums, _ = _arrays(stats)
    n = observation_count(stats)
    total = tsums.sum(axis=1) + stats[UNCHANGED_EXPOSURE].to_numpy(float) \
        + stats[LM_EXPOSURE].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_interval = np.where(n > 0, total / n, 1.0)
    return DEFAULT_PRIOR_RATE_INTERVALS * mean_interval


def _prior(stats, prior_shape, prior_rate, family="gamma"):
    """Per-row Gamma ``(a, b)`` and normal-on-log ``(m, P)`` prior terms of the solver.

    Rows with a given prior and ``family="lognormal"`` get ``a = b = 0``,
    ``m = log(α/β)``, ``P = α``; every other row its Gamma (given or default) and ``P = 0``.
    """
    if family not in PRIOR_FAMILIES:
        raise ValueError(f"prior_family must be one of {PRIOR_FAMILIES}, got {family!r}")
    n = len(stats)
    shape = np.broadcast_to(np.asarray(prior_shape, dtype=float), (n,)).copy()
    rate = (np.full(n, np.nan) if prior_rate is None
            else np.broadcast_to(np.asarray(prior_rate, dtype=float), (n,)).copy())
    if np.any(shape < 0) or np.any(rate < 0) or np.any(np.isinf(shape)) or np.any(np.isinf(rate)):
        raise ValueError("prior_shape and prior_rate must be finite and >= 0 (NaN = default)")
    # NaN marks "no group prior here": fall back to the default smoothing prior.
    missing = np.isnan(shape) | np.isnan(rate)
    normal = ~missing if family == "lognormal" else np.zeros(n, dtype=bool)
    if np.any(normal & ~((shape > 0) & (rate > 0))):
        raise ValueError("a log-normal prior needs prior_shape > 0 and prior_rate > 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        log_mean = np.where(normal, np.log(shape / rate), 0.0)
    precision = np.where(normal, shape, 0.0)
    if missing.any():
        shape[missing] = DEFAULT_PRIOR_SHAPE
        rate[missing] = default_prior_rate(stats)[missing]
    shape[normal], rate[normal] = 0.0, 0.0
    return shape, rate, log_mean, precision


def _check_level(level):
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def _frame(stats, lam, lo, hi, log_sd, n_obs, converged, iterations):
    return pd.DataFrame({"lambda_hat": lam, "lambda_lo": lo, "lambda_hi": hi, "log_sd": log_sd,
                         "n_obs": n_obs, "converged": converged, "iterations": iterations},
                        index=stats.index)


def _solve(stats, prior, level, xtol, maxiter, use_lm):
    shape, rate, log_mean, precision = prior
    counts, _, tbar = _arrays(stats)
    A = shape.copy()
    B = rate + stats[UNCHANGED_EXPOSURE].to_numpy(float)
    n_obs = observation_count(stats, use_lm)
    if use_lm:
        A += stats[LM_CHANGES].to_numpy(float)
        B += stats[LM_EXPOSURE].to_numpy(float)
    post = CensoredPosterior(counts, tbar, A, B, log_mean, precision)
    lam, conv, iters = solve_mode(post, xtol=xtol, maxiter=maxiter)
    undefined = (post.C + A <= 0) & (B <= 0) & (precision <= 0)
    lam[undefined] = np.nan
    drop = 0.5 * sps.chi2.ppf(level, 1)
    lo, hi = likelihood_ratio_interval(post, lam, drop)
    # Plain MLE with no change seen: ℓ(λ) = -Bλ peaks at 0, so the bound is drop / B.
    at_zero = (lam == 0) & (B > 0)
    hi[at_zero] = drop / B[at_zero]
    rows = np.arange(len(lam))
    finite = np.isfinite(lam) & (lam > 0)
    log_sd = np.full(len(lam), np.nan)
    prior_only = finite & post.prior_only()  # ℓ''(u) = −P
    log_sd[prior_only] = 1.0 / np.sqrt(post.P[prior_only])
    finite &= ~prior_only
    if finite.any():
        _, d2 = post.score(np.log(lam[finite]), rows[finite])
        log_sd[finite] = 1.0 / np.sqrt(-d2)
    lo[undefined], hi[undefined] = np.nan, np.nan
    return _frame(stats, lam, lo, hi, log_sd, n_obs, conv, iters)


def estimate_censored_mle(stats: pd.DataFrame, prior_shape=DEFAULT_PRIOR_SHAPE, prior_rate=None,
                          *, level: float = DEFAULT_LEVEL, xtol: float = 1e-12,
                          maxiter: int = 100, prior_family: str = "gamma") -> pd.DataFrame:
    """Irregular-interval censored MLE (smoothed), using changed/unchanged outcomes only.

    Solves, per URL and vectorised across URLs by safeguarded Newton on
    ``u = log λ`` (bisection whenever a Newton step leaves the bracket),

    .. math:: \\sum_{k} c_k \\frac{\\bar t_k}{e^{\\lambda \\bar t_k} - 1} + \\frac{a}{\\lambda}
              = \\sum_{j\\,\\in\\,\\text{unchanged}} t_j + b,

    the irregular-access MLE equation of Cho & Garcia-Molina (2003, ACM TOIT
    3(3), irregular-access estimator, :math:`\\sum_{\\text{changed}} t_i/(e^{\\lambda t_i}-1)
    = \\sum_{\\text{unchanged}} t_j`) with changed intervals grouped in log bins
    (count :math:`c_k`, mean interval :math:`\\bar t_k`) and a Gamma(a, b) prior.
    The root is bracketed by :math:`(C+a)/(S_u+b+\\tfrac12\\sum_k c_k\\bar t_k) \\le
    \\hat\\lambda \\le (C+a)/(S_u+b)`. All pages changed stays finite because
    ``b > 0``; no change ever gives :math:`\\hat\\lambda = a/(S_u+b)`.

    Parameters
    ----------
    stats : pandas.DataFrame
        Statistics with ``STATS_COLUMNS`` (Last-Modified columns are ignored).
    prior_shape, prior_rate : float or array_like
        Gamma prior ``a`` ≥ 0 and ``b`` ≥ 0 (days); per-URL arrays allowed,
        NaN or ``prior_rate=None`` selects the default smoothing prior. Use
        ``0, 0`` for the plain MLE (then λ̂ may be 0 or ∞).
    level : float
        Central probability of the interval.
    prior_family : {"gamma", "lognormal"}
        How the given (non-NaN) priors are applied: as Gamma(a, b), or as the
        normal :math:`N(\\log(a/b),\\, 1/a)` on ``log λ`` that Gamma(a, b) is the
        Laplace match of, which adds :math:`-\\tfrac{a}{2}(u - \\log(a/b))^2` to the
        log posterior instead of :math:`a u - b\\lambda`. The group priors are fitted
        as that normal (:mod:`jobs.core.estimators_shrinkage`) and applied this way:
        the Gamma's right tail :math:`e^{-b\\lambda}` is far lighter than the normal's,
        and pulls pages whose every fetch saw a change below their group (lab/notes/estimation-study.md,
        "Fast pages"). The default prior (NaN rows) is always the Gamma.

    Returns
    -------
    pandas.DataFrame
        ``RESULT_COLUMNS``: λ̂ (posterior mode of log λ), the likelihood-ratio
        interval :math:`\\{\\lambda: \\ell(\\log\\lambda) \\ge \\ell(\\hat u) - \\chi^2_{1,\\text{level}}/2\\}`
        (Wilks calibration on the log-posterior), ``log_sd`` (curvature-based
        standard deviation of log λ), effective (decayed) observation count,
        ``converged`` and Newton ``iterations``.
    """
    _check_level(level)
    prior = _prior(stats, prior_shape, prior_rate, prior_family)
    return _solve(stats, prior, level, xtol, maxiter, use_lm=False)


def estimate_rate(stats: pd.DataFrame, prior_shape=DEFAULT_PRIOR_SHAPE, prior_rate=None, *,
                  level: float = DEFAULT_LEVEL, xtol: float = 1e-12,
                  maxiter: int = 100, prior_family: str = "gamma") -> pd.DataFrame:
    """Production estimator: censored outcomes and trusted Last-Modified evidence jointly.

    The joint log posterior adds the Last-Modified terms (``X_lm`` observed
    change instants, exposure ``T_lm``) to the censored equation of
    :func:`estimate_censored_mle`:

    .. math:: \\sum_k c_k \\frac{\\bar t_k}{e^{\\lambda \\bar t_k} - 1} + \\frac{a + X_{lm}}{\\lambda}
              = S_u + T_{lm} + b .

    A URL with only Last-Modified evidence gets exactly :func:`estimate_last_modified`
    (with ``prior_family="gamma"``) and one with none gets :func:`estimate_censored_mle`.
    Parameters and return value as in :func:`estimate_censored_mle`.
    """
    _check_level(level)
    prior = _prior(stats, prior_shape, prior_rate, prior_family)
    return _solve(stats, prior, level, xtol, maxiter, use_lm=True)


def estimate_last_modified(stats: pd.DataFrame, prior_shape=DEFAULT_PRIOR_SHAPE, prior_rate=None,
                           *, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Last-Modified estimator for hosts whose Last-Modified header is trusted.

    A changed fetch whose last modification happened ``s`` days before it
    contributes :math:`\\lambda e^{-\\lambda s}` to the likelihood (one change at
    that instant, none after); an unchanged fetch after ``t`` days contributes
    :math:`e^{-\\lambda t}`. With ``X`` changes and exposure
    :math:`T = \\sum s_i + \\sum t_j` the likelihood is :math:`\\lambda^X e^{-\\lambda T}`,
    the Poisson-process form behind Cho & Garcia-Molina's (2003, ACM TOIT
    3(3)) estimator from last-modified dates, which accumulates exactly these
    ``X`` and ``T``. With a Gamma(a, b) prior the posterior is conjugate,
    Gamma(a + X, b + T), so

    .. math:: \\hat\\lambda = \\frac{a + X}{b + T}, \\qquad
              [\\lambda_{lo}, \\lambda_{hi}] = \\text{Gamma}(a+X, b+T)
              \\text{ quantiles } \\tfrac{1 \\mp \\text{level}}{2}.

    ``λ̂`` is the mode of log λ (equal to the posterior mean) and tends to the
    MLE ``X / T`` as the prior vanishes. Uses only the ``lm_*`` columns.
    """
    _check_level(level)
    shape, rate, _, _ = _prior(stats, prior_shape, prior_rate)
    A = shape + stats[LM_CHANGES].to_numpy(float)
    B = rate + stats[LM_EXPOSURE].to_numpy(float)
    ok = (A > 0) & (B > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(ok, A / B, np.where(B > 0, 0.0, np.nan))
        tail = 0.5 * (1.0 - level)
        lo = np.where(ok, sps.gamma.ppf(tail, np.where(ok, A, 1.0)) / B, np.nan)
        hi = np.where(ok, sps.gamma.isf(tail, np.where(ok, A, 1.0)) / B, np.nan)
        log_sd = np.where(ok, 1.0 / np.sqrt(A), np.nan)
    n = len(stats)
    return _frame(stats, lam, lo, hi, log_sd, stats[LM_COUNT].to_numpy(float),
                  np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64))


def estimate_naive(stats: pd.DataFrame, *, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Naive estimator ``X / T`` (detected changes over observed time); comparison only.

    .. math:: \\hat\\lambda = \\frac{\\sum_k c_k}{\\sum_k c_k \\bar t_k + S_u}

    It counts at most one change per interval, so it is biased low: with equal
    intervals :math:`E\\hat\\lambda \\to (1 - e^{-\\lambda I})/I`, i.e.
    :math:`-37\\%` at :math:`\\lambda I = 1` and :math:`-57\\%` at
    :math:`\\lambda I = 2` (Cho & Garcia-Molina 2003).
    The interval is Garwood's exact Poisson interval for ``X`` over ``T``,
    which ignores that bias. Uses the censored columns only.
    """
    _check_level(level)
    counts, tsums, _ = _arrays(stats)
    X = counts.sum(axis=1)
    T = tsums.sum(axis=1) + stats[UNCHANGED_EXPOSURE].to_numpy(float)
    tail = 0.5 * (1.0 - level)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(T > 0, X / T, np.nan)
        lo = np.where(X > 0, sps.chi2.ppf(tail, 2 * np.maximum(X, 1e-12)) / (2 * T), 0.0)
        hi = sps.chi2.isf(tail, 2 * X + 2) / (2 * T)
        log_sd = np.where(X > 0, 1.0 / np.sqrt(X), np.nan)
    n = len(stats)
    lo[~(T > 0)], hi[~(T > 0)] = np.nan, np.nan
    return _frame(stats, lam, lo, hi, log_sd, X + stats[UNCHANGED_COUNT].to_numpy(float),
                  np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64))
