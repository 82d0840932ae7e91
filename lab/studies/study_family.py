"""Daily publishers of a family web by how they keep time: where a run's ratio to the oracle
on the ``daily`` kind comes from.

Usage::

    python -m lab.studies.study_family --family /tmp/fam --label base [--label lag]

For every run ``<label>_<web>_s<seed>`` under the root (as ``lab.tools.family_table
--family`` reads them), the web is rebuilt from the run's spec (``data/summary.json``) and
its daily publishers split into ``editions`` (2-3 a day), ``weekdays`` (no weekend),
``mover`` (moves its hour once), ``plain`` (the rest) and ``new`` (born during the run, not
in the day-0 web). Per label, web and sub-kind, mean over seeds: the pages, the
importance-weighted freshness over the oracle's of ``base_<web>_s<seed>``, and the visits a
day of both.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from lab.backtest.loop import BacktestSpec
from lab.backtest.report import page_kinds
from lab.sim.params import WEB_FAMILY
from lab.sim.web import SyntheticWeb


def subkinds(report: Path) -> pd.Series:
    """url -> sub-kind of each daily publisher of the run's day-0 web."""
    d = json.loads((report / "data" / "summary.json").read_text())["spec"]
    spec = BacktestSpec(urls=d["urls"], hosts=d["hosts"], seed=d["seed"], start=d["start"],
                        web=tuple(d["web"]))
    p = SyntheticWeb(spec.params()).pages
    n = len(p)
    editions = p.editions if p.editions is not None else np.ones(n)
    weekdays = p.weekdays_only if p.weekdays_only is not None else np.zeros(n, bool)
    moves = np.isfinite(p.move_day) if p.move_day is not None else np.zeros(n, bool)
    sub = np.where(editions > 1, "editions", np.where(weekdays, "weekdays",
                                                      np.where(moves, "mover", "plain")))
    return pd.Series(sub, index=pd.Index(p.url, name="url"))


def compare(run: Path, oracle: Path, policy: str = "optimal") -> pd.DataFrame:
    """Per sub-kind of the daily publishers: pages, weighted freshness ÷ the oracle's, visits."""
    frames = []
    for d, pol in ((run, policy), (oracle, "oracle")):
        df = pd.read_parquet(d / "data" / "pages.parquet")
        df = df[(df["policy"] == pol) & (page_kinds(df) == "daily")]
        frames.append(df.set_index("url"))
    mine, ref = frames
    sub = subkinds(run).reindex(ref.index).fillna("new")
    t = pd.DataFrame({"sub": sub, "w": ref["importance"],
                      "mine": ref["importance"] * mine["fresh_days"].reindex(ref.index),
                      "ref": ref["importance"] * ref["fresh_days"],
                      "v": mine["visits_per_day"].reindex(ref.index),
                      "v_oracle": ref["visits_per_day"]})
    g = t.groupby("sub").agg(pages=("w", "size"), mine=("mine", "sum"), ref=("ref", "sum"),
                             visits=("v", "sum"), visits_oracle=("v_oracle", "sum"))
    g["vs_oracle"] = g.pop("mine") / g.pop("ref")
    return g


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.studies.study_family",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--family", required=True, metavar="ROOT")
    ap.add_argument("--label", action="append")
    args = ap.parse_args(argv)
    root = Path(args.family)
    out = []
    for label in args.label or ["base"]:
        for web in WEB_FAMILY:
            for run in sorted(root.glob(f"{label}_{web}_s*")):
                oracle = root / f"base_{web}_s{run.name.rsplit('_s', 1)[1]}"
                if (run / "data" / "pages.parquet").is_file() and (
                        oracle / "data" / "pages.parquet").is_file():
                    out.append(compare(run, oracle).assign(run=label, web=web).reset_index())
    if not out:
        print("no run with its base oracle under", root)
        return 1
    t = pd.concat(out).groupby(["run", "web", "sub"], sort=False)[
        ["pages", "vs_oracle", "visits", "visits_oracle"]].mean()
    print(t.round(3).to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
