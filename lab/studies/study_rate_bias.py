"""Issue 14 §3: fast pages at few observations, against Kolobov et al.'s estimator.

Run:  .venv/bin/python -m lab.studies.study_rate_bias                 (3 seeds, ~25 s)
      .venv/bin/python -m lab.studies.study_rate_bias --seeds 1 --pages 500   (quick)

Setup of the issue: 2,000 Poisson pages per seed, λ log-uniform on [0.05, 5] per day,
``n`` ∈ {20, 100} fetches at intervals uniform on [0.5, 3] days, change bits only; the
same on two other time scales, intervals uniform on [0.05, 0.3] and [3, 14] days. For
each λ decade ([0.05, 0.5), [0.5, 2), [2, 5]) and estimator it prints the median
|log(λ̂/λ)| and the median signed log(λ̂/λ), as mean (sd) over seeds, and the share of
pages whose every fetch saw a change (their likelihood is flat in λ above ~ log n / t,
so their estimate is set by the prior alone).

Estimators: ``current`` = :func:`jobs.core.estimators.estimate_censored_mle` with its
default prior; ``reference`` = :func:`reference_estimate` (Kolobov et al.);
``shrunk`` = the production path, :func:`jobs.core.estimators.estimate_rate` with the
group prior fitted on the batch by :func:`jobs.core.estimators_shrinkage.fit_group_priors`
(all pages one group, as update_state does for a host, template or URL class), applied as
:func:`jobs.core.estimators_shrinkage.apply_group_priors` does; ``shrunk_gamma`` = the same
prior applied as its Gamma (production before issue 14 §3); ``oracle`` =
:func:`oracle_estimate`, which knows the true λ distribution (a ceiling, not an estimator
one can run).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from jobs.core import estimators as est
from jobs.core.estimators_shrinkage import apply_group_priors, fit_group_priors
from jobs.core.estimators_solver import CensoredPosterior
from lab.studies.study_estimation import exact_censored_mle

TIME_SCALES = ((0.5, 3.0), (0.05, 0.3), (3.0, 14.0))     # interval ~ U(lo, hi), days
N_OBS = (20, 100)
DECADES = (0.05, 0.5, 2.0, 5.0)                          # λ bins [0.05,0.5) [0.5,2) [2,5]
DECADE_LABELS = ("[0.05,0.5)", "[0.5,2)", "[2,5]")
LAMBDA_RANGE = (0.05, 5.0)                               # true λ ~ log-uniform, per day
ESTIMATORS = ("current", "reference", "shrunk", "shrunk_gamma", "oracle")
#: Kolobov et al.'s smoothing: one pseudo interval with a change and one without, each this long.
REFERENCE_SMOOTHING_DAYS = 0.5
#: The search bracket of their bisection, per day; a root outside it is returned as the end.
REFERENCE_BRACKET = (0.0005, 7.0)


def reference_estimate(rows, t, changed, n_pages, smoothing=REFERENCE_SMOOTHING_DAYS,
                       bracket=REFERENCE_BRACKET):
    """Kolobov, Peres, Lu & Horvitz (NeurIPS 2019) change-rate estimate, incomplete observations.

    Their estimate (the paper's equation for incomplete change observations, the
    irregular-interval MLE of Cho & Garcia-Molina 2003) solves

    .. math:: \\sum_{i\\,\\in\\,\\text{changed}} \\frac{t_i}{e^{\\lambda t_i} - 1}
              + \\frac{s}{e^{\\lambda s} - 1} = \\sum_{j\\,\\in\\,\\text{unchanged}} t_j + s

    with the smoothing their published experiment code (``LearnChRates_IncomplObs``)
    uses: one imaginary interval of length ``s = 0.5`` day that saw a change and one
    that did not, so all-changed and none-changed histories have a finite root; the
    root is searched by bisection on ``[0.0005, 7]`` per day, so a root outside is
    returned as the bracket end (here: clipped). With no observation it is ``ln 2 / s``.
    The paper's own text could not be retrieved in full here; the smoothing and bracket
    were read from that code, which is not copied: this is the same equation solved by
    this repository's vectorised Newton (:func:`jobs.core.estimators_solver.solve_mode`
    with ``a = 0``, ``b = s`` and the pseudo changed interval as one more observation),
    on exact per-fetch intervals (no binning). A comparison baseline only.
    """
    n = int(n_pages)
    rows = np.r_[np.asarray(rows), np.arange(n)]
    t = np.r_[np.asarray(t, float), np.full(n, smoothing)]
    changed = np.r_[np.asarray(changed, bool), np.ones(n, bool)]
    lam = exact_censored_mle(rows, t, changed, n, np.zeros(n), np.full(n, smoothing))
    return np.clip(lam, *bracket)


def oracle_estimate(stats, lam_range=LAMBDA_RANGE, grid_size=400):
    """Posterior median of ``log λ`` under the true prior, log-uniform on ``lam_range``.

    The Bayes rule for absolute error on the log scale given the simulation's own λ
    distribution: no estimator does better on average over the population, although
    one that is tuned towards a sub-range can do better inside it. Evaluated on a grid
    of ``grid_size`` values of ``log λ`` from the censored likelihood of the statistics.
    """
    counts, _, tbar = est._arrays(stats)
    n = len(stats)
    unchanged = stats[est.UNCHANGED_EXPOSURE].to_numpy(float)
    post = CensoredPosterior(counts, tbar, np.zeros(n), unchanged)
    grid = np.linspace(np.log(lam_range[0]), np.log(lam_range[1]), grid_size)
    rows = np.arange(n)
    loglik = np.column_stack([post.logpost(np.full(n, u), rows) for u in grid])
    weight = np.exp(loglik - loglik.max(axis=1, keepdims=True))
    cdf = np.cumsum(weight, axis=1)
    return np.exp(grid[np.argmax(cdf >= 0.5 * cdf[:, -1:], axis=1)])


def simulate(rng, n_pages, n_obs, t_range, lam_range=LAMBDA_RANGE):
    """Pages with log-uniform λ fetched ``n_obs`` times at U(t_range) intervals."""
    lam = np.exp(rng.uniform(np.log(lam_range[0]), np.log(lam_range[1]), n_pages))
    rows = np.repeat(np.arange(n_pages), n_obs)
    t = rng.uniform(t_range[0], t_range[1], rows.size)
    changed = rng.random(rows.size) < -np.expm1(-lam[rows] * t)
    return lam, rows, t, changed


def estimates(rows, t, changed, n_pages):
    """λ̂ of every compared estimator for one simulated batch."""
    stats = est.add_observations(est.empty_stats(n_pages), rows, t, changed)
    group = np.zeros(n_pages, dtype=np.int64)
    priors = fit_group_priors(stats, group)
    return {
        "current": est.estimate_censored_mle(stats)["lambda_hat"].to_numpy(),
        "reference": reference_estimate(rows, t, changed, n_pages),
        "shrunk": apply_group_priors(stats, group, priors)["lambda_hat"].to_numpy(),
        "shrunk_gamma": apply_group_priors(stats, group, priors,
                                           prior_family="gamma")["lambda_hat"].to_numpy(),
        "oracle": oracle_estimate(stats),
    }


def one_seed(seed, n_pages=2000):
    """Per-cell medians for one seed: rows (scale, n, decade, estimator)."""
    out = []
    for k, scale in enumerate(TIME_SCALES):
        for n_obs in N_OBS:
            rng = np.random.default_rng([seed, k, n_obs])
            lam, rows, t, changed = simulate(rng, n_pages, n_obs, scale)
            decade = pd.cut(lam, DECADES, right=False, labels=DECADE_LABELS)
            decade = decade.fillna(DECADE_LABELS[-1])         # λ = 5 exactly
            all_changed = np.bincount(rows, changed, minlength=n_pages) == n_obs
            for name, lam_hat in estimates(rows, t, changed, n_pages).items():
                err = np.log(lam_hat / lam)
                frame = pd.DataFrame({"decade": decade, "abs": np.abs(err), "signed": err,
                                      "all_changed": all_changed})
                cells = frame.groupby("decade", observed=True).median()
                cells.loc["all"] = frame[["abs", "signed", "all_changed"]].median()
                cells["all_changed"] = frame.groupby("decade", observed=True)["all_changed"] \
                    .mean().reindex(cells.index).fillna(all_changed.mean())
                for dec, row in cells.iterrows():
                    out.append({"scale": f"U({scale[0]:g},{scale[1]:g})", "n": n_obs,
                                "decade": dec, "estimator": name, "abs": row["abs"],
                                "signed": row["signed"], "all_changed": row["all_changed"],
                                "seed": seed})
    return out


def run_study(seeds=(0, 1, 2), n_pages=2000):
    """Long table (one row per seed × cell × estimator) and the mean/sd summary table."""
    long = pd.DataFrame([r for s in seeds for r in one_seed(s, n_pages)])
    keys = ["scale", "n", "decade", "estimator"]
    g = long.groupby(keys, sort=False)
    summary = pd.DataFrame({"abs": g["abs"].mean(), "abs_sd": g["abs"].std(ddof=1),
                            "signed": g["signed"].mean(),
                            "all_changed": g["all_changed"].mean()})
    return long, summary


def wide(summary):
    """Cells as rows, estimators as columns: 'median|log err| (sd) / median signed'."""
    def fmt(r):
        sd = "" if np.isnan(r["abs_sd"]) else f" ({r['abs_sd']:.3f})"
        return f"{r['abs']:.3f}{sd} / {r['signed']:+.3f}"
    cells = summary.apply(fmt, axis=1).unstack("estimator")
    share = summary["all_changed"].xs("current", level="estimator")
    cells.insert(0, "all-changed", share.map(lambda v: f"{v:.2f}"))
    return cells[["all-changed", *ESTIMATORS]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..k-1")
    parser.add_argument("--pages", type=int, default=2000)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    _, summary = run_study(tuple(range(args.seeds)), args.pages)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 200)
    print(f"median |log(λ̂/λ)| (sd over {args.seeds} seeds) / median signed log(λ̂/λ); "
          f"{args.pages} pages per seed and cell")
    print(wide(summary).to_string())
    print(f"\nelapsed {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
