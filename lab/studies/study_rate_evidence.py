"""How much of the Poisson pages' loss is the estimate, and how much the evidence? A what-if
on a backtest's state.

Usage::

    python -m lab.studies.study_rate_evidence --workdir RUN_w --seed S --dates D [D ...]

For each state date of the ``optimal`` run, λ is re-estimated from the stored sufficient
statistics, all on the hierarchical chain's groups (``estimation.prior_level =
hierarchical``: each URL in the first of template, class, host with an EM fit):

* ``single``: the production estimate (:func:`jobs.core.state_update.estimate_with_priors`
  with the group's log-normal prior, :func:`jobs.core.estimators_shrinkage.fit_group_priors`);
* ``grid1``: the same prior, the posterior mode of log λ found on a fine grid (checks the
  grid against the production estimate);
* ``mix2``: a two-component normal mixture on log λ per group, fitted by EM on the same grid
  likelihoods (Dempster, Laird & Rubin 1977, the mixture case of their section 4.3), the
  posterior mode on the fine grid. Groups with fewer than ``--mix-min-urls`` observed URLs keep
  the single prior;
* ``mean``: the posterior mean of λ under the single prior (on the fine grid);
* ``bayes``: no point estimate: the allocation that maximises the posterior expected
  freshness Σ w E[F̄(λ, f)] (:func:`bayes_allocate`, each URL's posterior as 48 equal-mass
  points), the best any allocation can do with the evidence and the prior as they are.

Each is allocated with the budget ``--budget`` × pages, f in [1/90, 24] a day (the
Cho & Garcia-Molina optimum; :func:`bayes_allocate`, which with one point per URL is that
optimum without host caps) and scored with the true λ: expected importance-weighted Poisson
freshness Σ w F̄(λ, f) of the front pages and feeds and of the Poisson pages, relative to the
allocation that knew the true λ. ``1 − bayes`` is then what more evidence (not a better
estimate) could buy those pages on that day's state.

``voi`` asks what that evidence would cost (:func:`value_of_information`): at the plug-in
allocation's level μ (the value of one more visit a day), each page's best learning probe or
bundle of probes is worth gain × H over a horizon of H days against its price μ per probe.
Printed per horizon: the pages where a probe pays, their probes, and their net worth as a
share of H days of the oracle's gap (every page scored as Poisson here).
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pandas as pd

from jobs.cli import guarded
from jobs.core import state_update
from jobs.core.estimators_shrinkage import (PRIOR_CHAINS, STATS_COLUMNS, _grid_loglik,
                                            fit_group_priors, group_key_from_url)
from jobs.core.estimators_stats import observation_count
from jobs.core.freshness import freshness
from jobs.errors import MissingPartitionError
from lab.studies.study_priors import load

FIT_GRID = np.linspace(np.log(1e-4), np.log(1e3), 96)  # fit_group_priors' grid
FINE_GRID = np.linspace(np.log(1e-4), np.log(1e3), 801)
TAU2_MIN = 1.0 / 20.0  # fit_group_priors' max_shape = 20


def chosen_groups(state: pd.DataFrame, stats: pd.DataFrame, min_urls: int = 3):
    """Per URL: the level index and key of the first hierarchical group with an EM fit
    (-1 where none has one), and that level's fit (mu, tau2)."""
    n = len(state)
    level = np.full(n, -1)
    key = np.full(n, None, dtype=object)
    mu, tau2 = np.full(n, np.nan), np.full(n, np.nan)
    keys_by_level = []
    for i, lvl in enumerate(PRIOR_CHAINS["hierarchical"]):
        keys = group_key_from_url(state["url"], lvl, hosts=state["host"]).to_numpy(object)
        keys_by_level.append(keys)
        fit = fit_group_priors(stats, keys, min_urls=min_urls).reindex(keys)
        em = (fit["method"] == "em").to_numpy(bool)
        take = em & (level < 0)
        level[take] = i
        key[take] = keys[take]
        mu[take] = fit["log_mean"].to_numpy(float)[take]
        tau2[take] = np.clip(fit["log_var_between"].to_numpy(float)[take], TAU2_MIN, None)
    return level, key, mu, tau2, keys_by_level


def fit_mixture(lik: np.ndarray, grid: np.ndarray, mu0: float, tau20: float,
                maxiter: int = 500, tol: float = 1e-5):
    """EM for a two-component normal mixture prior on log λ from URLs' likelihoods on
    ``grid`` (rows: URLs, normalised to max 1). Starts from the single fit split at ±τ;
    each component's variance floored at ``TAU2_MIN``; the weights get a Beta(2, 2)
    pseudo-count so a component cannot vanish onto one URL."""
    du = grid[1] - grid[0]
    pi = np.array([0.5, 0.5])
    sd = np.sqrt(tau20)
    mu = np.array([mu0 - sd, mu0 + sd])
    tau2 = np.full(2, max(tau20 / 2, TAU2_MIN))
    n = lik.shape[0]
    for _ in range(maxiter):
        dens = (pi[:, None] / np.sqrt(2 * np.pi * tau2[:, None])
                * np.exp(-0.5 * (grid[None, :] - mu[:, None]) ** 2 / tau2[:, None]) * du)
        joint = lik[:, None, :] * dens[None, :, :]  # URL x component x grid
        joint /= np.maximum(joint.sum(axis=(1, 2), keepdims=True), 1e-300)
        r = joint.sum(axis=2)  # URL x component
        nk = r.sum(axis=0)
        new_pi = (nk + 1.0) / (n + 2.0)
        m = np.einsum("ikg,g->k", joint, grid) / np.maximum(nk, 1e-12)
        v = np.einsum("ikg,kg->k", joint, (grid[None, :] - m[:, None]) ** 2) / np.maximum(nk, 1e-12)
        new_tau2 = np.maximum(v, TAU2_MIN)
        step = max(np.abs(m - mu).max(), np.abs(new_pi - pi).max(),
                   np.abs(np.sqrt(new_tau2) - np.sqrt(tau2)).max())
        pi, mu, tau2 = new_pi, m, new_tau2
        if step < tol:
            break
    return pi, mu, tau2


def grid_mode(loglik_fine: np.ndarray, logprior_fine: np.ndarray) -> np.ndarray:
    """The posterior mode of log λ on the fine grid (per row)."""
    return FINE_GRID[np.argmax(loglik_fine + logprior_fine, axis=1)]


def log_normal_mix(pi, mu, tau2, grid):
    dens = (np.asarray(pi)[:, None] / np.sqrt(2 * np.pi * np.asarray(tau2)[:, None])
            * np.exp(-0.5 * (grid[None, :] - np.asarray(mu)[:, None]) ** 2
                     / np.asarray(tau2)[:, None]))
    return np.log(np.maximum(dens.sum(axis=0), 1e-300))


def estimates(state: pd.DataFrame, stats: pd.DataFrame, groups, fine: np.ndarray,
              mix_min_urls: int):
    """Production's λ̂ (single group prior) and the two-component mixture prior's grid mode;
    ``groups`` is :func:`chosen_groups`' answer, ``fine`` the log-likelihood on FINE_GRID."""
    level, key, mu, tau2, keys_by_level = groups
    # production: the same choice through update_state's pure estimate
    shape = np.where(level >= 0, 1.0 / tau2, np.nan)
    single = state_update.estimate_with_priors(
        state, shape, shape * np.exp(-np.nan_to_num(mu)))["lambda_hat"].to_numpy(float)
    observed = np.asarray(observation_count(stats)) > 0
    coarse = np.exp(_grid_loglik(stats, FIT_GRID))
    mix2 = single.copy()
    n_mix = 0
    for lv in range(len(keys_by_level)):
        for g in pd.unique(key[level == lv]):
            rows = np.flatnonzero((level == lv) & (key == g))
            members = np.flatnonzero((keys_by_level[lv] == g) & observed)
            m0, t0 = mu[rows[0]], tau2[rows[0]]
            if len(members) >= mix_min_urls:
                pi, mk, tk = fit_mixture(coarse[members], FIT_GRID, m0, t0)
                lp2 = log_normal_mix(pi, mk, tk, FINE_GRID)
                n_mix += 1
            else:
                lp2 = log_normal_mix([1.0], [m0], [t0], FINE_GRID)
            mix2[rows] = np.exp(grid_mode(fine[rows], lp2[None, :]))
    return {"single": single, "mix2": mix2}, n_mix


def marginal_value(f, lam, p, w):
    """w E[∂F̄/∂f] at rates ``f`` (N) under posteriors of points ``lam`` with masses ``p``
    (N × K): ∂F̄/∂f = (1 − e^(−x)(1 + x))/λ with x = λ/f (F̄ = (1 − e^(−x))/x)."""
    x = lam / f[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(lam > 0, (-np.expm1(-x) - x * np.exp(-x)) / lam, 0.0)  # λ = 0: F̄ = 1
    return w * (p * d).sum(axis=1)


def bayes_allocate(lam, p, w, budget, f_min=1 / 90, f_max=24.0, iters=50,
                   return_level=False):
    """Rates f in [f_min, f_max] with Σ f = budget maximising Σ w E[F̄(λ, f)] under each
    URL's discrete posterior (points ``lam``, masses ``p``, N × K; K = 1 is the plug-in
    optimum). The objective is concave in f, so the optimum is one level μ: f solves
    w E[∂F̄/∂f] = μ, clipped to the bounds (Cho & Garcia-Molina 2003, the Lagrange condition
    of their section 4, with the expectation inside); μ and each f by bisection on logs.
    With ``return_level``, also μ: the value of one more visit a day at the optimum."""
    lam, p, w = np.asarray(lam, float), np.asarray(p, float), np.asarray(w, float)
    if lam.shape != p.shape or lam.shape[0] != w.shape[0] or not budget > 0:
        raise ValueError("lam and p must be N x K, w N long, budget > 0")
    if not f_min * len(w) <= budget <= f_max * len(w):
        raise ValueError("budget outside [f_min, f_max] x pages")

    def rates_at(mu):
        a, b = np.full(len(w), np.log(f_min)), np.full(len(w), np.log(f_max))
        for _ in range(iters):
            c = 0.5 * (a + b)
            up = marginal_value(np.exp(c), lam, p, w) > mu
            a, b = np.where(up, c, a), np.where(up, b, c)
        return np.exp(0.5 * (a + b))

    lo, hi = np.log(1e-9), np.log(1e9)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if rates_at(np.exp(mid)).sum() > budget:
            lo = mid
        else:
            hi = mid
    level = np.exp(0.5 * (lo + hi))
    return (rates_at(level), float(level)) if return_level else rates_at(level)


def grid_posterior(ll, level, mu, tau2, grid=FINE_GRID):
    """Each URL's posterior on ``grid`` (log λ) from its log-likelihood there (``ll``, URLs x
    grid) under its single group prior N(mu, tau2) (flat on log λ where ``level`` < 0: no
    group fit), rows summing to 1."""
    has = level >= 0
    lp = np.where(has[:, None], -0.5 * (grid[None, :] - np.nan_to_num(mu)[:, None]) ** 2
                  / np.where(has, tau2, 1.0)[:, None], 0.0)
    post = np.exp(ll + lp - (ll + lp).max(axis=1, keepdims=True))
    return post / post.sum(axis=1, keepdims=True)


def posterior_points(post, k=48, grid=FINE_GRID):
    """From grid posteriors: k equal-mass points of λ per URL, its mode and its mean."""
    cdf = np.cumsum(post, axis=1)
    qs = (np.arange(k) + 0.5) / k
    idx = np.stack([np.searchsorted(c, qs) for c in cdf]).clip(0, len(grid) - 1)
    return (np.exp(grid[idx]), np.exp(grid[np.argmax(post, axis=1)]), post @ np.exp(grid))


#: Probe intervals tried, in units of 1/λ̂, and the bundle sizes of ``value_of_information``.
PROBE_INTERVALS = (0.25, 0.5, 1.0, 2.0)
PROBE_BUNDLES = (1, 2, 4, 8, 16)


def value_of_information(post, grid, w, level, trusted, f_min=1 / 90, f_max=24.0,
                         s_bins=6, f_points=64):
    """What one probe is expected to add to a page's day, per probe: the knowledge gradient
    (Frazier, Powell & Dayanik, *SIAM J. Control Optim.* 47, 2008) of the page's own
    Lagrangian value V(f) = w E[F̄(λ, f)] − level · f, maximised over f.

    A probe fetches the page Δ = c/λ̂ after a fetch (c in ``PROBE_INTERVALS``, λ̂ the
    posterior mode) and sees a change or none; on a ``trusted`` page (Last-Modified) a change
    also tells the age of the last change, read into ``s_bins`` equal bins of [0, Δ). The
    gain is E_y[max_f V(f | y)] − max_f V(f) ≥ 0 (Jensen). As one probe tells little, bundles
    of m probes at the same Δ (changed/unchanged bits only, m in ``PROBE_BUNDLES``) are
    scored too, per probe: the KG(*) of Frazier & Powell (*Decision Analysis* 7, 2010) for
    values of information that grow faster than linearly. Returns each page's best gain per
    probe (in w·F̄ per day, the units of ``level``) and the bundle size that gives it.
    """
    from scipy.stats import binom

    lam_g = np.exp(grid)
    fk = np.exp(np.linspace(np.log(f_min), np.log(f_max), f_points))
    fresh = freshness(lam_g[:, None], fk[None, :])  # grid x rates

    def best(p):
        return (w[:, None] * (p @ fresh) - level * fk[None, :]).max(axis=1)

    def after(lik):  # E_y[max_f V(f | y)] over one outcome's likelihood (N x grid)
        joint = post * lik
        py = joint.sum(axis=1)
        return py * best(joint / np.maximum(py, 1e-300)[:, None])

    now = best(post)
    lam_hat = np.maximum(lam_g[np.argmax(post, axis=1)], 1e-3)
    gain, bundle = np.zeros(len(w)), np.ones(len(w))
    edges = np.linspace(0.0, 1.0, s_bins + 1)
    for c in PROBE_INTERVALS:
        x = lam_g[None, :] * (c / lam_hat)[:, None]
        unchanged = np.exp(-x)
        one = after(unchanged)
        one += np.where(trusted, sum(after(np.exp(-x * a) - np.exp(-x * b))
                                     for a, b in zip(edges[:-1], edges[1:])), 0.0)
        one += np.where(trusted, 0.0, after(1.0 - unchanged))
        gain = np.maximum(gain, one - now)
        for m in PROBE_BUNDLES[1:]:
            per = (sum(after(binom.pmf(k, m, 1.0 - unchanged)) for k in range(m + 1)) - now) / m
            better = per > gain
            gain, bundle = np.where(better, per, gain), np.where(better, m, bundle)
    return np.maximum(gain, 0.0), bundle


def voi_summary(state, post, budget, horizons):
    """Learning visits against what knowing λ buys, at the plug-in allocation's level μ:
    per horizon H, the pages whose best probe is worth its price over H days (gain · H > μ),
    their probes, and their net worth Σ (gain · H − μ) · m as a share of H days of the
    oracle's gap Σ w (F̄(λ, f_oracle) − F̄(λ, f_plug-in)), every page scored as Poisson.
    ``post`` is the posterior on FINE_GRID; this works on every fourth point of it."""
    grid = FINE_GRID[::4]
    w, lam = state["importance"].to_numpy(float), state["lambda"].to_numpy(float)
    post = post[:, ::4] / post[:, ::4].sum(axis=1, keepdims=True)
    mode = np.exp(grid[np.argmax(post, axis=1)])
    one = np.ones((len(w), 1))
    f_plug, mu_level = bayes_allocate(mode[:, None], one, w, budget, return_level=True)
    f_oracle = bayes_allocate(lam[:, None], one, w, budget)
    gap = float(np.sum(w * (freshness(lam, f_oracle) - freshness(lam, f_plug))))
    gain, bundle = value_of_information(post, grid, w, mu_level,
                                        state["lm_n"].to_numpy(float) > 0)
    out = {"level": round(mu_level, 3), "oracle_gap_per_day": round(gap, 1)}
    for h in horizons:
        worth = gain * h > mu_level
        net = float(np.sum((gain * h - mu_level)[worth] * bundle[worth]))
        out[f"H{h:g}"] = {"pages": int(worth.sum()), "probes": int(bundle[worth].sum()),
                          "net": round(net, 1), "share_of_gap": round(net / (h * gap), 4)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--dates", nargs="+", required=True)
    ap.add_argument("--budget", type=float, default=0.2, help="refresh visits/day per page")
    ap.add_argument("--mix-min-urls", type=int, default=8)
    ap.add_argument("--horizons", type=float, nargs="+", default=[7, 14, 30],
                    help="days a probe's better decision is assumed to last (value of "
                         "information)")
    args = ap.parse_args(argv)
    pages = f"{args.workdir}/seed{args.seed}/optimal/data/_truth/pages"
    if not os.path.isdir(pages):
        raise MissingPartitionError("_truth", pages, "no backtest run of optimal here "
                                    "(python -m lab.backtest ... --workdir DIR)")
    truth = pd.read_parquet(pages)
    for dt in args.dates:
        try:
            state = load(args.workdir, args.seed, dt)
        except FileNotFoundError as err:
            raise MissingPartitionError("state", f"{args.workdir} dt={dt}", str(err)) from None
        state = state.merge(truth[["url", "kind"]], on="url")
        kinds = state["kind"].to_numpy(object)
        w, lam = state["importance"].to_numpy(float), state["lambda"].to_numpy(float)
        budget = args.budget * len(state)
        stats = state[list(STATS_COLUMNS)].astype(float)
        groups = chosen_groups(state, stats)
        level, _, mu, tau2, _ = groups
        fine = _grid_loglik(stats, FINE_GRID)  # once: the estimates and the posterior share it
        post = grid_posterior(fine, level, mu, tau2)
        points, mode, mean = posterior_points(post)
        ests, n_mix = estimates(state, stats, groups, fine, args.mix_min_urls)
        one = np.ones((len(w), 1))
        arms = {"oracle": (lam[:, None], one), "single": (ests["single"][:, None], one),
                "grid1": (mode[:, None], one), "mix2": (ests["mix2"][:, None], one),
                "mean": (mean[:, None], one),
                "bayes": (points, np.full(points.shape, 1.0 / points.shape[1]))}
        fresh = {}
        for name, (pts, mass) in arms.items():
            wf = w * freshness(lam, bayes_allocate(pts, mass, w, budget))
            fresh[name] = {"front": wf[kinds == "front"].sum(),
                           "poisson": wf[kinds == "poisson"].sum()}
            fresh[name]["front+poisson"] = fresh[name]["front"] + fresh[name]["poisson"]
        row = {"seed": args.seed, "dt": dt, "pages": len(state), "mixture_groups": n_mix}
        for name in list(arms)[1:]:
            row[name] = {k: round(v / fresh["oracle"][k], 4) for k, v in fresh[name].items()}
        row["voi"] = voi_summary(state, post, budget, args.horizons)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(guarded(main, prog="study_rate_evidence"))
