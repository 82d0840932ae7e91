"""Seeded accuracy study of the change-rate estimators (tables for docs/estimation.md).

Run:  .venv/bin/python -m lab.studies.study_estimation            (full, < 2 min on 1 core)
      .venv/bin/python -m lab.studies.study_estimation --reps 60 --hosts 80   (quick)

Ground truth: Poisson changes at rate λ; a URL is fetched ``n`` times at
intervals ``t`` that are either regular (``t = I``) or jittered (``t = I·e^Z``,
``Z ~ N(0, 0.5²)``). Every fetch reports changed/unchanged; on the
Last-Modified path it also reports the time ``s`` since the last change, which
by time reversal of a Poisson process is an Exp(λ) draw ``E`` with
"changed" ⇔ ``E < t``. Shrinkage is studied on simulated hosts whose URLs'
rates scatter log-normally around a host rate.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from jobs.core import estimators as est
from jobs.core.estimators_shrinkage import apply_group_priors, fit_group_priors
from jobs.core.estimators_solver import CensoredPosterior, solve_mode

R_GRID = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)      # λ·I
I_GRID = (1.0 / 6.0, 1.0, 7.0)                             # access interval, days
N_GRID = (5, 10, 20, 50)                                   # history length
JITTER_SIGMA = 0.5


def simulate_fetches(rng, lam, mean_interval, n_obs, jitter):
    """Observations for URLs with rates ``lam``: rows, t, changed, lm_age (flat arrays)."""
    rows = np.repeat(np.arange(len(lam)), n_obs)
    t = np.repeat(mean_interval, n_obs).astype(float)
    jittered = np.repeat(np.broadcast_to(jitter, lam.shape), n_obs)
    t = np.where(jittered, t * np.exp(rng.normal(0.0, JITTER_SIGMA, t.size)), t)
    since_change = rng.exponential(1.0, t.size) / lam[rows]
    changed = since_change < t
    return rows, t, changed, since_change


def exact_censored_mle(rows, t, changed, n_urls, prior_shape, prior_rate):
    """Same posterior mode without interval binning (one column per observation)."""
    order = np.argsort(rows, kind="stable")
    rows, t, changed = rows[order], t[order], changed[order]
    pos = np.arange(rows.size) - np.searchsorted(rows, rows)
    width = pos.max() + 1
    counts = np.zeros((n_urls, width))
    tbar = np.ones((n_urls, width))
    counts[rows[changed], pos[changed]] = 1.0
    tbar[rows, pos] = t
    s_u = np.bincount(rows, np.where(changed, 0.0, t), minlength=n_urls)
    post = CensoredPosterior(counts, tbar, prior_shape, prior_rate + s_u)
    return solve_mode(post)[0]


def _summarise(frame, by):
    g = frame.groupby(by, observed=True)
    return pd.DataFrame({
        "median_abs_log": g["abs_log"].median(),
        "bias_mean": g["ratio"].mean() - 1.0,
        "bias_median": g["ratio"].median() - 1.0,
        "coverage90": g["covered"].mean(),
        "urls": g.size(),
    }).round(3)


def grid_study(reps, seed):
    """Estimator errors on the λ·I × I × n × regularity grid; one row per URL × estimator."""
    rng = np.random.default_rng(seed)
    cells = pd.MultiIndex.from_product([R_GRID, I_GRID, N_GRID, (False, True)],
                                       names=["r", "I", "n", "jitter"]).to_frame(index=False)
    urls = cells.loc[cells.index.repeat(reps)].reset_index(drop=True)
    lam = (urls["r"] / urls["I"]).to_numpy()
    rows, t, changed, since = simulate_fetches(rng, lam, urls["I"].to_numpy(),
                                               urls["n"].to_numpy(), urls["jitter"].to_numpy())
    censored = est.add_observations(est.empty_stats(len(urls)), rows, t, changed)
    lm_age = np.where(changed, since, t)
    with_lm = est.add_observations(est.empty_stats(len(urls)), rows, t, changed, lm_age)
    results = {
        "MLE": est.estimate_censored_mle(censored),
        "LM": est.estimate_last_modified(with_lm),
        "naive": est.estimate_naive(censored),
    }
    frames = []
    for name, res in results.items():
        ratio = res["lambda_hat"].to_numpy() / lam
        with np.errstate(divide="ignore"):   # naive λ̂ = 0 has |log| = ∞, kept as such
            log_ratio = np.log(ratio)
        frames.append(urls.assign(
            estimator=name, ratio=ratio, abs_log=np.abs(log_ratio),
            covered=(res["lambda_lo"].to_numpy() <= lam) & (lam <= res["lambda_hi"].to_numpy()),
            converged=res["converged"].to_numpy()))
    # Binning error: binned vs exact per-observation equation, jittered URLs only.
    jit = urls["jitter"].to_numpy()
    keep = jit[rows]
    new_id = np.cumsum(jit) - 1
    shape = np.full(jit.sum(), est.DEFAULT_PRIOR_SHAPE)
    rate = est.default_prior_rate(censored)[jit]
    exact = exact_censored_mle(new_id[rows[keep]], t[keep], changed[keep], jit.sum(), shape, rate)
    binned = results["MLE"]["lambda_hat"].to_numpy()[jit]
    binning = np.abs(np.log(binned / exact))
    return pd.concat(frames, ignore_index=True), binning


def mle_requirement(errors):
    """Pooled and per-cell median |log(λ̂/λ)| of the MLE for n ≥ 20, 0.05 ≤ λI ≤ 3."""
    region = errors[(errors.estimator == "MLE") & (errors.n >= 20)
                    & (errors.r >= 0.05) & (errors.r <= 3)]
    per_cell = region.groupby(["r", "n"])["abs_log"].median()
    cramer_rao = {(r, n): 0.6745 * np.sqrt(np.expm1(r) / (n * r * r)) for r, n in per_cell.index}
    cells = pd.DataFrame({"median_abs_log": per_cell.round(3),
                          "cramer_rao_floor": pd.Series(cramer_rao).round(3)})
    return float(region["abs_log"].median()), cells


def host_study(n_hosts, seed, urls_per_host=40, url_sigma=0.5):
    """Shrinkage on simulated hosts; returns per-URL errors with and without EB."""
    rng = np.random.default_rng(seed)
    host = np.repeat(np.arange(n_hosts), urls_per_host)
    host_rate = 10 ** rng.uniform(-2, 1, n_hosts)
    host_interval = np.exp(rng.uniform(np.log(0.25), np.log(7.0), n_hosts))
    lam = host_rate[host] * np.exp(rng.normal(0, url_sigma, host.size))
    n_obs = rng.choice([0, 1, 2, 3, 5, 10, 20, 50], size=host.size,
                       p=[.05, .15, .15, .15, .15, .15, .1, .1])
    rows, t, changed, _ = simulate_fetches(rng, lam, host_interval[host], n_obs, True)
    stats = est.add_observations(est.empty_stats(host.size), rows, t, changed)
    priors = fit_group_priors(stats, host)
    shrunk = apply_group_priors(stats, host, priors)
    plain = est.estimate_rate(stats)
    hist = pd.cut(n_obs, [-1, 0, 3, 10, 1000], labels=["0", "1-3", "5-10", "20-50"])
    frames = []
    for name, res in (("MLE", plain), ("MLE+shrinkage", shrunk)):
        ratio = res["lambda_hat"].to_numpy() / lam
        frames.append(pd.DataFrame({
            "estimator": name, "history": hist, "n": n_obs, "ratio": ratio,
            "host_r": (host_rate * host_interval)[host],
            "abs_log": np.abs(np.log(ratio)),
            "covered": (res["lambda_lo"].to_numpy() <= lam) & (lam <= res["lambda_hi"].to_numpy()),
        }))
    return pd.concat(frames, ignore_index=True), priors


def drift_study(seed, n_urls=2000, days=150, switch_day=90, half_lives=(14.0, 60.0, np.inf)):
    """Daily fetches; λ jumps ×10 (0.1 → 1 per day) at ``switch_day``; tracking error after."""
    rng = np.random.default_rng(seed)
    out = {}
    for h in half_lives:
        stats = est.empty_stats(n_urls)
        rows = np.arange(n_urls)
        record = {}
        for day in range(1, days + 1):
            lam = 0.1 if day <= switch_day else 1.0
            changed = rng.random(n_urls) < -np.expm1(-lam)
            stats = est.add_observations(est.decay_stats(stats, 1.0, h), rows, np.ones(n_urls), changed)
            if day - switch_day in (7, 14, 30, 60):
                res = est.estimate_rate(stats)["lambda_hat"].to_numpy()
                record[f"day+{day - switch_day}"] = float(np.median(np.abs(np.log(res / lam))))
        out[f"half-life {h:g} d"] = record
    return pd.DataFrame(out).T.round(3)


def run_study(reps=400, n_hosts=300, seed=20240501, drift=True):
    """Run every part; returns a dict of tables (DataFrames) and scalar figures."""
    errors, binning = grid_study(reps, seed)
    pooled, cells = mle_requirement(errors)
    hosts, priors = host_study(n_hosts, seed + 1)
    low = hosts[hosts.n.between(1, 3)].groupby("estimator")["abs_log"].median()
    tables = {
        "by_n": _summarise(errors, ["estimator", "n"]),
        "by_r": _summarise(errors, ["estimator", "r"]),
        "by_r_jitter": _summarise(errors[errors.estimator == "MLE"], ["jitter", "r"]),
        "mle_cells": cells,
        "shrinkage": _summarise(hosts, ["history", "estimator"]),
        "shrinkage_hosts_r_0.05_to_5": _summarise(hosts[hosts.host_r.between(0.05, 5)],
                                                 ["history", "estimator"]),
        "prior_methods": priors["method"].value_counts(),
        "mle_region_median": pooled,
        "low_history_plain": float(low["MLE"]),
        "low_history_shrunk": float(low["MLE+shrinkage"]),
        "binning_median": float(np.median(binning)),
        "binning_p99": float(np.quantile(binning, 0.99)),
        "all_converged": bool(errors["converged"].all()),
    }
    if drift:
        tables["drift"] = drift_study(seed + 2)
    return tables


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400, help="URLs per grid cell")
    parser.add_argument("--hosts", type=int, default=300, help="simulated hosts (40 URLs each)")
    parser.add_argument("--seed", type=int, default=20240501)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    tables = run_study(args.reps, args.hosts, args.seed)
    pd.set_option("display.width", 120)
    for key, value in tables.items():
        print(f"\n== {key} ==")
        print(value if isinstance(value, (pd.DataFrame, pd.Series)) else f"{value:.4g}"
              if isinstance(value, float) else value)
    print(f"\nelapsed {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
