"""Which shrinkage group buys the most freshness? A what-if on a backtest's state.

Usage::

    python -m lab.studies.study_priors --workdir var/backtest/work --seeds 0 1 2 \
        --dates 2026-01-07 2026-01-09

For each seed and state date of the ``optimal`` run in a backtest work directory, λ is
re-estimated from the stored sufficient statistics with every ``estimation.prior_level``
(the same pure functions update_state runs), the budgeted allocation is solved in memory
with each set of estimates (:func:`jobs.core.allocation_reference.allocate`, 1 h floor, 90 d cap),
and each allocation is scored with the simulator's true λ: expected importance-weighted
freshness Σ w F̄(λ, f) / Σ w. Printed relative to the allocation that knew the true λ
(the oracle), so 1.0 is perfect estimation. The budget is ``--budget`` × pages.
"""
from __future__ import annotations

import argparse
import glob
import json

import numpy as np
import pandas as pd

from jobs.core import state_update
from jobs.core.allocation_reference import allocate
from jobs.core.estimators_shrinkage import (PRIOR_CHAINS, STATS_COLUMNS, choose_prior,
                                         fit_group_priors, group_key_from_url)
from jobs.core.freshness import freshness
from jobs.paths import partition

LEVELS = tuple(PRIOR_CHAINS)  # every estimation.prior_level


def load(workdir: str, seed: int, dt: str, policy: str = "optimal") -> pd.DataFrame:
    root = f"{workdir}/seed{seed}/{policy}/data"
    part = partition(root, "state", dt)
    files = sorted(glob.glob(f"{part}/*.parquet"))
    if not files:
        raise FileNotFoundError(f"no state under {part}")
    state = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return state.merge(pd.read_parquet(f"{root}/_truth/lambda"), on="url")


def priors_for(state: pd.DataFrame, level: str, min_urls: int = 3):
    """Per-row (shape, rate) as update_state picks them: the same group keys and the same
    choice (:func:`jobs.core.estimators_shrinkage.choose_prior`), fitted on every URL."""
    stats = state[list(STATS_COLUMNS)].astype(float)
    shape, rate, em = [], [], []
    for lvl in PRIOR_CHAINS[level]:
        keys = group_key_from_url(state["url"], lvl, hosts=state["host"]).to_numpy(object)
        fit = fit_group_priors(stats, keys, min_urls=min_urls).reindex(keys)
        shape.append(fit["prior_shape"].to_numpy(float))
        rate.append(fit["prior_rate"].to_numpy(float))
        em.append((fit["method"] == "em").to_numpy(bool))
    return choose_prior(np.column_stack(shape), np.column_stack(rate), np.column_stack(em))


def expected_freshness(state: pd.DataFrame, lam_plan, budget: float) -> float:
    weight = state["importance"].to_numpy(float)
    rates = allocate(lam_plan, weight, host=state["host"].to_numpy(), budget=budget,
                     f_min=1 / 90, f_max=24).rates
    return float(np.sum(weight * freshness(state["lambda"].to_numpy(float), rates)) / weight.sum())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="var/backtest/work")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--dates", nargs="+", required=True)
    ap.add_argument("--budget", type=float, default=0.2, help="refresh visits/day per page")
    args = ap.parse_args(argv)
    rows = []
    for seed in args.seeds:
        for dt in args.dates:
            state = load(args.workdir, seed, dt)
            budget = args.budget * len(state)
            oracle = expected_freshness(state, state["lambda"].to_numpy(float), budget)
            row = {"seed": seed, "dt": dt, "pages": len(state), "oracle": round(oracle, 4)}
            for level in LEVELS:
                shape, rate = priors_for(state, level)
                lam = state_update.estimate_with_priors(state, shape, rate)["lambda_hat"]
                row[level] = round(expected_freshness(state, lam.to_numpy(float), budget)
                                   / oracle, 4)
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = pd.DataFrame(rows)
    print(json.dumps({"mean": {lvl: round(float(table[lvl].mean()), 4) for lvl in LEVELS}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
