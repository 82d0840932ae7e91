"""Empirical-Bayes shrinkage of per-URL change rates towards a host (or template) prior.

A URL with a handful of fetches says little about its own λ, but URLs of the
same host (or host + first path segment) tend to change alike. We fit, per
group, a Gamma(α, β) prior for λ from the batch and use it in place of the weak
smoothing prior of :func:`jobs.core.estimators.estimate_rate`.

Fit (random-effects meta-analysis on the log scale, DerSimonian & Laird,
"Meta-analysis in clinical trials", Controlled Clinical Trials 7:177-188, 1986;
empirical Bayes in the sense of Morris, JASA 78:47-55, 1983):

1. each URL with at least ``min_obs`` effective observations gives
   :math:`y_i = \\log\\hat\\lambda_i` (weak-prior estimate) and a within-URL
   variance :math:`s_i^2` from the posterior curvature;
2. between-URL variance, method of moments:
   :math:`\\hat\\tau^2 = \\max\\left(0, \\frac{Q - (k-1)}{\\sum w_i - \\sum w_i^2/\\sum w_i}\\right)`,
   :math:`Q = \\sum w_i (y_i - \\bar y_w)^2`, :math:`w_i = 1/s_i^2`;
3. group centre :math:`\\hat\\mu = \\sum w_i^* y_i / \\sum w_i^*`,
   :math:`w_i^* = 1/(s_i^2 + \\hat\\tau^2)`;
4. Gamma prior matched to :math:`N(\\hat\\mu, \\hat\\tau^2)` on ``log λ`` by Laplace
   matching (same mode and curvature of the log-density of ``log λ``, which is
   what the log-scale posterior mode uses): :math:`\\alpha = 1/\\hat\\tau^2`,
   :math:`\\beta = \\alpha e^{-\\hat\\mu}`, with α clipped to
   ``[min_shape, max_shape]`` so a homogeneous host never freezes its URLs.
   (α, β) is how the prior is stored and passed; it is *applied* as the normal
   :math:`N(\\log(\\alpha/\\beta), 1/\\alpha)` on ``log λ`` it stands for
   (``prior_family="lognormal"`` of :func:`jobs.core.estimators.estimate_rate`):
   the Gamma's right tail :math:`e^{-\\beta\\lambda}` pulled URLs whose every fetch
   saw a change far below their group (lab/notes/estimation-study.md, "Fast pages").

Groups with fewer than ``min_urls`` informative URLs fall back to the pooled
rate of the group (all its statistics summed, which are still sufficient) with
strength ``fallback_shape``; groups with less than ``min_obs`` pooled
observations get no prior (NaN, i.e. the default smoothing prior).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .estimators import estimate_rate
from .estimators_solver import CensoredPosterior
from .estimators_stats import (CHANGED_COUNT_COLUMNS, CHANGED_TSUM_COLUMNS, LM_CHANGES,
                               LM_EXPOSURE, STATS_COLUMNS, UNCHANGED_EXPOSURE, check_stats,
                               observation_count)
from .hosts import url_host

PRIOR_COLUMNS = ("prior_shape", "prior_rate", "prior_mean", "log_mean", "log_var_between",
                 "n_urls", "n_observed", "method", "converged", "iterations")

# The one URL pattern of the shrinkage groups, written so Python's re and Java's regex read it
# alike (jobs.update_state builds its Spark expressions from these constants; a test checks
# both engines agree): its only group is the first path segment with its leading slash
# ("" or "/" when the URL has none). The host comes from the one host rule (jobs.core.hosts).
URL_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?[^/?#:]+(?::[0-9]+)?(/[^/?#]*)?"
# A first segment of just "/" is no segment: https://ex.com, https://ex.com/ and
# https://ex.com/?q are the same front page (RFC 9110 4.2.3: an empty path is "/").
EMPTY_SEGMENT = "/"
# Digits (and the separator before them) in a path segment are ids, not part of the class.
ID_PATTERN = r"[-_.]?[0-9]+"
GROUP_LEVELS = ("host", "template", "class")
#: How a fitted group prior is applied (:data:`jobs.core.estimators.PRIOR_FAMILIES`): as the
#: normal on log λ the EM fits, not its Laplace-matched Gamma (module docstring, step 4).
GROUP_PRIOR_FAMILY = "lognormal"
# estimation.prior_level -> the groups tried for each URL, most specific first: a URL takes
# the prior of the first group with an EM fit, else of the first with a pooled prior.
PRIOR_CHAINS = {"host": ("host",), "template": ("template",), "class": ("class",),
                "hierarchical": ("template", "class", "host")}


def group_key_from_url(urls, level: str = "host", hosts=None) -> pd.Series:
    """Shrinkage group of each URL: host, host + first path segment, or URL class.

    ``level="template"`` maps ``https://ex.com/news/2024/x`` to ``ex.com/news``;
    ``level="host"`` to ``ex.com``; ``level="class"`` to ``*/news``: the first path
    segment without ids, across hosts (every site's ``/feed`` is one class, every
    front page is ``*``). ``https://ex.com``, ``https://ex.com/`` and ``https://ex.com/?q``
    are all the front page (template ``ex.com``). URLs without a host map to ``""``.

    Parameters
    ----------
    urls : array_like of str
    level : {"host", "template", "class"}
    hosts : array_like of str, optional
        The URLs' normalised hosts when already known (the ``host`` column of state, as
        update_state uses it); by default :func:`jobs.core.hosts.url_host` of each URL.

    Returns
    -------
    pandas.Series
        One group label (object dtype) per URL, on a fresh ``RangeIndex``.
    """
    if level not in GROUP_LEVELS:
        raise ValueError(f"level must be one of {GROUP_LEVELS}, got {level!r}")
    urls = pd.Series(urls, dtype="string").reset_index(drop=True)
    if hosts is None:
        hosts = [url_host(u) for u in urls.astype(object).where(urls.notna(), None)]
    host = pd.Series(hosts, dtype="string").reset_index(drop=True).fillna("")
    if len(host) != len(urls):
        raise ValueError("hosts must have one entry per URL")
    if level == "host":
        return host.astype(object)
    segment = urls.str.extract(URL_PATTERN, expand=False).fillna("")
    segment = segment.mask(segment == EMPTY_SEGMENT, "")
    key = "*" + segment.str.replace(ID_PATTERN, "", regex=True) if level == "class" \
        else host + segment
    return key.where(host != "", "").astype(object)


def choose_prior(shape, rate, em) -> tuple[np.ndarray, np.ndarray]:
    """Each URL's prior among its groups' fits (``estimation.prior_level``, most specific first).

    The rule of ``PRIOR_CHAINS``: the first group whose prior is an EM fit, else the first
    group with any prior (a pooled one), else none (NaN: the default smoothing prior).
    update_state calls it per batch of URLs (``mapInPandas``) on the fits joined by group;
    lab.studies.study_priors on the fits reindexed by group.

    Parameters
    ----------
    shape, rate : array_like of float, shape (n_urls, n_levels)
        The Gamma prior of each URL's group at each level (columns in chain order); NaN
        where that group has no prior (``method == "none"``, or no fit at all).
    em : array_like of bool, shape (n_urls, n_levels)
        Whether that prior is an EM fit (``method == "em"``).

    Returns
    -------
    shape, rate : numpy.ndarray of float, shape (n_urls,)
        The chosen prior per URL, NaN where no level has one.
    """
    shape, rate = np.asarray(shape, dtype=float), np.asarray(rate, dtype=float)
    em = np.asarray(em, dtype=bool)
    if shape.ndim != 2 or rate.shape != shape.shape or em.shape != shape.shape:
        raise ValueError("shape, rate and em must be (n_urls, n_levels) arrays of one shape")
    n, levels = shape.shape
    if levels == 0:
        return np.full(n, np.nan), np.full(n, np.nan)
    has = ~np.isnan(shape)
    order = np.concatenate([em & has, has], axis=1)  # EM fits first, then any prior
    found = order.any(axis=1)
    pick = np.argmax(order, axis=1) % levels
    rows = np.arange(n)
    return (np.where(found, shape[rows, pick], np.nan),
            np.where(found, rate[rows, pick], np.nan))


def _grid_loglik(stats, grid):
    """Log-likelihood (no prior) of every URL at every grid value of ``u = log λ``."""
    counts = stats[list(CHANGED_COUNT_COLUMNS)].to_numpy(float)
    tsums = stats[list(CHANGED_TSUM_COLUMNS)].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tbar = np.where(counts > 0, tsums / counts, 1.0)
    post = CensoredPosterior(counts, tbar, stats[LM_CHANGES].to_numpy(float),
                             stats[UNCHANGED_EXPOSURE].to_numpy(float)
                             + stats[LM_EXPOSURE].to_numpy(float))
    rows = np.arange(len(stats))
    loglik = np.column_stack([post.logpost(np.full(len(rows), u), rows) for u in grid])
    return loglik - loglik.max(axis=1, keepdims=True)


def fit_group_priors(stats: pd.DataFrame, groups, *, min_urls: int = 3, min_obs: float = 5.0,
                     min_shape: float = 0.1, max_shape: float = 20.0,
                     fallback_shape: float = 1.0, grid_size: int = 96,
                     rate_range=(1e-4, 1e3), tol: float = 1e-4,
                     maxiter: int = 200, chunk_rows: int = 65_536) -> pd.DataFrame:
    """Fit one Gamma prior per group by marginal maximum likelihood (EM on a grid).

    Parameters
    ----------
    stats : pandas.DataFrame
        ``STATS_COLUMNS`` for the URLs of one or many groups.
    groups : array_like
        Group label per row (e.g. from :func:`group_key_from_url`).
    min_urls : int
        URLs with observations needed for the EM fit of (μ, τ).
    min_obs : float
        Pooled effective observations needed for the pooled fallback.
    min_shape, max_shape : float
        Clip for the prior strength α = 1/τ² (≈ pseudo-changes).
    fallback_shape : float
        α used with the pooled group rate when the EM fit is not possible.
    grid_size, rate_range : int, (float, float)
        Grid of λ (per day, log-spaced) on which likelihoods are evaluated.
    tol, maxiter : float, int
        EM stops when μ and τ move less than ``tol`` (log units).
    chunk_rows : int
        The EM holds several (observed URLs × ``grid_size``) arrays: it runs on chunks of
        whole groups of at most this many observed URLs (a group larger than that alone),
        so memory stays bounded whatever the input (each array is 8 × rows × grid_size
        bytes: 288 MB at 375k rows). A group's fit does not depend on its chunk mates.

    Returns
    -------
    pandas.DataFrame
        Indexed by group, with ``PRIOR_COLUMNS``; ``method`` is ``"em"``,
        ``"pooled"`` or ``"none"`` (prior NaN, default smoothing applies).
    """
    check_stats(stats)
    groups = np.asarray(groups, dtype=object)
    if groups.shape != (len(stats),):
        raise ValueError("groups must have one label per stats row")
    if not (min_obs > 0 and min_urls >= 2 and 0 < min_shape <= max_shape and fallback_shape > 0
            and grid_size >= 8 and 0 < rate_range[0] < rate_range[1] and chunk_rows >= 1):
        raise ValueError("need min_obs > 0, min_urls >= 2, 0 < min_shape <= max_shape, "
                         "fallback_shape > 0, grid_size >= 8, 0 < rate_range[0] < rate_range[1], "
                         "chunk_rows >= 1")
    codes, labels = pd.factorize(pd.Series(groups), sort=True)
    G = len(labels)
    seen = observation_count(stats) > 0
    k = np.bincount(codes[seen], minlength=G).astype(float)
    use_em = k >= min_urls
    # Only the groups the EM fit is kept for enter it: a smaller group's fit was thrown
    # away below, and its EM (one or two URLs: τ² creeps to its floor) ran all ``maxiter``
    # iterations over every group of its chunk (most of the fit's time at 10M URLs).
    em_rows = seen & use_em[codes]
    c = codes[em_rows]
    k_em = np.where(use_em, k, 0.0)
    grid = np.linspace(np.log(rate_range[0]), np.log(rate_range[1]), grid_size)
    mu, tau2 = np.zeros(G), np.ones(G)
    converged, iterations = np.zeros(G, dtype=bool), np.zeros(G, dtype=np.int64)
    em_stats = stats[em_rows]
    # Stable: a group's rows keep their order, so its sums run in the same order.
    order = np.argsort(c, kind="stable")
    for first, last, lo, hi in _group_chunks(k_em, chunk_rows):
        rows = order[lo:hi]
        lik = np.exp(_grid_loglik(em_stats.iloc[rows], grid))
        fit = _em_normal_on_grid(lik, c[rows] - first, k_em[first:last], grid, mu[first:last],
                                 tau2[first:last], 1.0 / max_shape, tol, maxiter)
        mu[first:last], tau2[first:last], converged[first:last], iterations[first:last] = fit

    # Pooled fallback: summed statistics are sufficient for one shared rate.
    pooled = estimate_rate(stats[list(STATS_COLUMNS)].groupby(codes).sum()).reindex(range(G))
    use_pooled = ~use_em & (pooled["n_obs"].to_numpy() >= min_obs)
    mu = np.where(use_em, mu, np.where(use_pooled, np.log(pooled["lambda_hat"].to_numpy()), np.nan))
    shape = np.where(use_em, np.clip(1.0 / tau2, min_shape, max_shape),
                     np.where(use_pooled, fallback_shape, np.nan))
    return pd.DataFrame({
        "prior_shape": shape,
        "prior_rate": shape * np.exp(-mu),
        "prior_mean": np.exp(mu),
        "log_mean": mu,
        "log_var_between": np.where(use_em, tau2, np.nan),
        "n_urls": np.bincount(codes, minlength=G),
        "n_observed": k.astype(np.int64),
        "method": np.where(use_em, "em", np.where(use_pooled, "pooled", "none")),
        "converged": np.where(use_em, converged, True),
        "iterations": np.where(use_em, iterations, 0),
    }, index=pd.Index(labels, name="group"))


def _group_chunks(k, chunk_rows):
    """Ranges [first, last) of consecutive group codes holding at most ``chunk_rows`` rows
    (``k`` rows per group; a larger group forms a range of its own), with their rows'
    range [lo, hi) in code order; ranges without rows are skipped."""
    ends = np.cumsum(k).astype(np.int64)
    first = 0
    while first < len(k):
        lo = int(ends[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(ends, lo + chunk_rows, side="right")))
        if ends[last - 1] > lo:
            yield first, last, lo, int(ends[last - 1])
        first = last


def _em_normal_on_grid(lik, codes, k, grid, mu, tau2, tau2_min, tol, maxiter):
    """EM for a N(μ_g, τ_g²) prior on log λ shared by each group (vectorised over groups).

    E-step: posterior weights of each URL on the grid,
    :math:`w_{ig} \\propto L_i(u_g)\\,\\phi((u_g-\\mu)/\\tau)`; M-step:
    :math:`\\mu = \\overline{m_i}`, :math:`\\tau^2 = \\overline{v_i + (m_i-\\mu)^2}`
    with posterior means/variances :math:`m_i, v_i` (Dempster, Laird & Rubin 1977).

    A group is frozen once it converges, and it and its rows leave the working set: a
    bucket's slowest group does not cost every row an E-step, nor every group a prior on
    the grid (a group's sums run over the same rows in the same order: the fit moves by
    rounding only).
    """
    G = len(mu)
    mu, tau2 = np.array(mu, dtype=float), np.array(tau2, dtype=float)
    kk = np.maximum(k, 1.0)
    converged = np.zeros(G, dtype=bool)
    iterations = np.zeros(G, dtype=np.int64)
    groups = np.arange(G)  # the working set's groups; ``codes`` index into it
    for _ in range(maxiter):
        mu_w, tau2_w, conv_w, n = mu[groups], tau2[groups], converged[groups], len(groups)
        prior = np.exp(-0.5 * (grid[None, :] - mu_w[:, None]) ** 2 / tau2_w[:, None])
        weights = lik * prior[codes]
        weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
        m = weights @ grid
        v = np.maximum(weights @ (grid * grid) - m * m, 0.0)
        new_mu = np.bincount(codes, m, minlength=n) / kk[groups]
        new_tau2 = np.maximum(np.bincount(codes, v + (m - new_mu[codes]) ** 2, minlength=n)
                              / kk[groups], tau2_min)
        step = np.maximum(np.abs(new_mu - mu_w), np.abs(np.sqrt(new_tau2) - np.sqrt(tau2_w)))
        iterations[groups] += ~conv_w
        mu[groups] = np.where(conv_w, mu_w, new_mu)
        tau2[groups] = np.where(conv_w, tau2_w, new_tau2)
        converged[groups] = conv_w | (step < tol)
        if converged.all():
            break
        keep = ~converged[groups]
        active = keep[codes]
        if active.mean() < 0.75:  # compact only when it pays for the copy
            lik, codes = lik[active], (np.cumsum(keep) - 1)[codes[active]]
            groups = groups[keep]
    return mu, tau2, converged, iterations


def apply_group_priors(stats: pd.DataFrame, groups, priors: pd.DataFrame, **estimate_kwargs
                       ) -> pd.DataFrame:
    """Shrunk estimates: :func:`estimate_rate` with each URL's group prior (``GROUP_PRIOR_FAMILY``).

    URLs whose group is absent from ``priors`` or has no prior (``method ==
    "none"``) keep the default smoothing prior. A URL with no observations
    gets the prior itself: :math:`\\hat\\lambda = \\alpha/\\beta = e^{\\hat\\mu}`.

    Returns
    -------
    pandas.DataFrame
        ``RESULT_COLUMNS`` plus the ``prior_shape`` and ``prior_rate`` used.
    """
    groups = pd.Series(np.asarray(groups, dtype=object), index=stats.index)
    if len(groups) != len(stats):
        raise ValueError("groups must have one label per stats row")
    missing = [c for c in ("prior_shape", "prior_rate") if c not in priors.columns]
    if missing:
        raise ValueError(f"priors is missing columns {missing}")
    shape = groups.map(priors["prior_shape"]).to_numpy(dtype=float)
    rate = groups.map(priors["prior_rate"]).to_numpy(dtype=float)
    out = estimate_rate(stats, prior_shape=shape, prior_rate=rate,
                        **({"prior_family": GROUP_PRIOR_FAMILY} | estimate_kwargs))
    out["prior_shape"] = shape
    out["prior_rate"] = rate
    return out
