"""Where does ``optimal`` gain and lose against the oracle, page by page? (issue 14)

Usage::

    python -m lab.studies.study_gap --out /tmp/bt_B --workdir /tmp/bt_B_w --seeds 0 1 2

Reads a backtest's per-page frame (``data/pages.parquet``: both policies' visits per day and
days fresh) and the last committed state and hosts of the ``optimal`` run, and prints per
page kind, true-λ decade and host evidence class (``lm``: trusted Last-Modified; ``push``:
trusted push signals and no trusted Last-Modified; ``none``):

* ``net``: the importance-weighted freshness ``optimal`` gained over the oracle on those
  pages, less the visits it spent beyond the oracle's priced at the oracle's budget
  multiplier μ (the median marginal value of its ``multiplier`` rows on the last plan),
  in % of the oracle's total weighted freshness. Both policies spend the same budget, so
  the per-kind gaps of the backtest's own table overstate a loss that freed visits for
  pages elsewhere; ``net`` charges each group for the visits it took.
* ``log_err``: the median of log(λ̂/λ) (the optimal run's last state against the truth).
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

from lab.backtest.report import page_kinds
from lab.studies.study_timing import newest

LAMBDA_EDGES = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, np.inf)


def evidence_class(trust_lm, signal_trusted) -> np.ndarray:
    """``lm`` where the host's Last-Modified is trusted, else ``push`` where its push
    signals are, else ``none``."""
    lm = np.asarray(trust_lm, dtype=bool)
    push = np.asarray(signal_trusted, dtype=bool)
    return np.where(lm, "lm", np.where(push, "push", "none"))


def gap_table(pages: pd.DataFrame, mu: float) -> pd.DataFrame:
    """Per (kind, λ decade, class) of ``pages`` (one row per page: ``kind``, ``lam``,
    ``lambda_hat``, ``cls``, ``importance``, ``F``/``F_oracle`` time-averaged freshness and
    ``f``/``f_oracle`` visits per day): pages, ``net`` (% of the oracle's total) and
    ``log_err``."""
    if not mu >= 0:
        raise ValueError(f"mu must be >= 0, got {mu!r}")
    total = float((pages["importance"] * pages["F_oracle"]).sum())
    frame = pages.assign(
        net=100.0 * (pages["importance"] * (pages["F"] - pages["F_oracle"])
                     - mu * (pages["f"] - pages["f_oracle"])) / total,
        log_err=np.log(pages["lambda_hat"] / pages["lam"]),
        decade=pd.cut(pages["lam"], LAMBDA_EDGES, right=True))
    return frame.groupby(["kind", "decade", "cls"], observed=True).agg(
        pages=("net", "size"), net=("net", "sum"), log_err=("log_err", "median"))


def seed_pages(out: str, workdir: str, seed: int) -> tuple[pd.DataFrame, float, int]:
    """One seed's per-page frame (with its ``url``) joined to the optimal run's state and
    hosts, μ, and the pages left out (never observed in the window, or without a λ̂)."""
    alloc = pd.read_parquet(os.path.join(out, "data", "pages.parquet"))
    alloc = alloc[alloc["seed"] == seed]
    cols = ["url", "visits_per_day", "obs_days", "fresh_days"]
    opt = alloc[alloc["policy"] == "optimal"]
    orc = alloc[alloc["policy"] == "oracle"][cols]
    both = opt.merge(orc, on="url", suffixes=("", "_oracle"))
    data = os.path.join(workdir, f"seed{seed}", "optimal", "data")
    _, state = newest(data, "state")
    _, hosts = newest(data, "hosts")
    _, plan = newest(os.path.join(workdir, f"seed{seed}", "oracle", "data"), "plan")
    state = state[["url", "host", "lambda_hat"]].merge(
        hosts[["host", "trust_lm", "signal_trusted"]], on="host", how="left")
    both = both.merge(state[["url", "lambda_hat", "trust_lm", "signal_trusted"]], on="url",
                      how="inner")
    pages = pd.DataFrame({
        "url": both["url"], "kind": page_kinds(both), "lam": both["lam"],
        "lambda_hat": both["lambda_hat"],
        "cls": evidence_class(both["trust_lm"].fillna(False), both["signal_trusted"].fillna(False)),
        "importance": both["importance"],
        "F": both["fresh_days"] / both["obs_days"],
        "F_oracle": both["fresh_days_oracle"] / both["obs_days_oracle"],
        "f": both["visits_per_day"], "f_oracle": both["visits_per_day_oracle"]})
    kept = pages.dropna()
    mu = float(plan.loc[plan["reason"] == "multiplier", "marginal_value"].median())
    return kept, mu, len(pages) - len(kept)


def run_parser(doc: str) -> argparse.ArgumentParser:
    """The arguments of a study of one backtest run: its ``--out``, ``--workdir`` and
    ``--seeds``; ``doc``'s first line describes the study."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", required=True, help="the backtest's --out (data/pages.parquet)")
    ap.add_argument("--workdir", required=True, help="the backtest's --workdir")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    return ap


def main(argv=None) -> int:
    args = run_parser(__doc__).parse_args(argv)
    tables = []
    for seed in args.seeds:
        pages, mu, left_out = seed_pages(args.out, args.workdir, seed)
        table = gap_table(pages, mu)
        by_kind = table.groupby(level="kind")["net"].sum()
        print(f"seed {seed}: {len(pages)} pages ({left_out} left out: never observed in the "
              f"window or no λ̂); μ = {mu:.3f}; net per kind (% of the oracle's weighted freshness): "
              + ", ".join(f"{k} {v:+.2f}" for k, v in by_kind.items())
              + f"; all {by_kind.sum():+.2f}")
        tables.append(table.assign(seed=seed).reset_index())
    both = pd.concat(tables)
    mean = both.groupby(["kind", "decade", "cls"], observed=True)[["pages", "net", "log_err"]].mean()
    print(f"mean over seeds {args.seeds}: pages, net (%), median log(λ̂/λ)")
    print(mean.round(3).unstack("cls").to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
