"""One table of backtest runs against an oracle that ran in another run of the same web.

Usage::

    python -m lab.tools.family_table --oracle /tmp/bt_base --run before=/tmp/bt_base \\
        --run after=/tmp/bt_after

Each ``--run LABEL=DIR`` is a backtest report directory (``lab.backtest --out``); its
``optimal`` pages (``data/pages.parquet``) are scored per page kind against the ``oracle`` pages
of ``--oracle`` (same web, seed and history, so the same oracle: the oracle runs with timing
and probes off, which is what lets a run of ``optimal`` alone be compared with it). Prints, per
label: importance-weighted freshness ÷ the oracle's overall and per kind, visits a day (all and
per kind), and the
run's politeness violations and budget overrun (``data/metrics.parquet``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from lab.backtest.report import KINDS, kind_freshness, page_kinds

KEYS = ("politeness_gap_violations", "politeness_cap_violations", "budget_overrun")


def pages(report: str, policy: str) -> pd.DataFrame:
    df = pd.read_parquet(Path(report) / "data" / "pages.parquet")
    return df[df["policy"] == policy]


def metrics(report: str, policy: str) -> dict:
    """Politeness violations and budget overrun of ``policy``, summed over seeds."""
    m = pd.read_parquet(Path(report) / "data" / "metrics.parquet")
    m = m[m["policy"] == policy]
    return {k: int(m[k].sum()) for k in KEYS if k in m}


def visits(df: pd.DataFrame) -> dict:
    """Visits a day, all pages and per kind (mean over seeds)."""
    per = df["visits_per_day"].groupby(page_kinds(df)).sum() / df["seed"].nunique()
    return {"visits/day": round(float(per.sum()), 1),
            **{f"v/day {k}": round(float(per.get(k, 0.0)), 1) for k in KINDS}}


def table(oracle_dir: str, runs: list[tuple[str, str]], policy: str = "optimal") -> pd.DataFrame:
    oracle = pages(oracle_dir, "oracle")
    rows = []
    for label, report in runs:
        mine = pages(report, policy)
        k = kind_freshness(pd.concat([mine, oracle], ignore_index=True))
        k = k[k["policy"] == policy].groupby("kind")[["freshness_weighted_vs_oracle"]].mean()
        row = {"run": label}
        for kind in ("all", *KINDS):
            if kind in k.index:
                row[kind] = round(float(k.loc[kind, "freshness_weighted_vs_oracle"]), 3)
        row.update(visits(mine))
        row.update(metrics(report, policy))
        rows.append(row)
    return pd.DataFrame([*rows, {"run": "oracle", **visits(oracle)}])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.tools.family_table",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", required=True, help="report directory with an oracle run")
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=DIR")
    ap.add_argument("--policy", default="optimal")
    args = ap.parse_args(argv)
    runs = [tuple(r.split("=", 1)) for r in args.run]
    print(table(args.oracle, runs, args.policy).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
