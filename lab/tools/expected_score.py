r"""Importance-weighted freshness with the Poisson pages' change noise taken out: a score
for comparing two runs of one web and seed.

Usage::

    python -m lab.tools.expected_score --oracle /tmp/fam/base_own-sparse_s0 \
        --run base=/tmp/fam/base_own-sparse_s0 --run after=/tmp/fam/after_own-sparse_s0

A backtest scores each page by its realised fresh days: the simulator's own change instants
against the fetches. For a Poisson page (kinds ``poisson`` and ``front``: the simulator draws
their changes as a Poisson process with rate λ) that realisation is noise a planner cannot
act on: two runs that differ by a minute in one recheck delay score 0.004 apart overall
(lab/notes/backtest-log.md). Here such a page's fresh days are replaced by their expectation
given its successful fetches :math:`v_1 < v_2 < \dots` and its true λ: fetched at
:math:`v_i`, the copy is fresh until the first change after it (Exp(λ)), so over
:math:`[v_i, v_{i+1})` it is fresh for

.. math:: \mathbb E[\text{fresh}] = \frac{1 - e^{-\lambda (v_{i+1} - v_i)}}{\lambda}

days (Cho & Garcia-Molina, "Effective page refresh policies for Web crawlers", ACM TODS
28(4), 2003), counted inside the planned window only. Pages of other kinds, pages not alive
through the whole window, and pages never fetched before it keep their realised fresh days.
A 200 or 304 answer is a fresh copy (a lying 304 is not seen here: the same for both runs).

Each ``--run LABEL=DIR`` is a report directory (``lab.backtest --out DIR``) whose work
directory is ``DIR_w`` (``--workdir``); its ``--policy`` pages are scored against the
oracle pages of ``--oracle`` (same web, seed and history).

``--by-day`` prints, per run, the same expectation day by day for the two Poisson kinds:
the ratio to the oracle of each planned day, which tells a gap the planner closes as it
learns (a ratio that climbs) from one it keeps (a flat one).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from lab.backtest.report import KINDS, kind_freshness, page_kinds
from lab.tools.family_table import pages as run_pages

DAY_S = 86400.0
POISSON_KINDS = ("poisson", "front")
FRESH_STATUS = (200, 304)


def expected_fresh_days(fetch_s, lam, start_s, end_s):
    r"""Expected fresh days of one Poisson page in ``[start_s, end_s)`` (module notes).

    Parameters
    ----------
    fetch_s : array_like
        Epoch seconds of its successful fetches, any order; at least one before ``start_s``
        (else NaN: its copy at the window's start is unknown).
    lam : float
        True change rate, per day (0: fresh throughout once fetched).
    start_s, end_s : float
        The window, epoch seconds.
    """
    t = np.sort(np.asarray(fetch_s, dtype=float))
    before = t[t < start_s]
    if not before.size:
        return float("nan")
    inside = t[(t >= start_s) & (t < end_s)]
    starts = np.concatenate([before[-1:], inside])
    ends = np.concatenate([inside, [end_s]])
    # fresh from each fetch v until min(next fetch, first change); only [start, end) counts
    gap = (ends - starts) / DAY_S
    lead = (np.maximum(start_s - starts, 0.0)) / DAY_S  # the part before the window
    if lam <= 0:
        return float(np.sum(gap - lead))
    return float(np.sum((np.exp(-lam * lead) - np.exp(-lam * gap)) / lam))


def expected_pages(report: str, policy: str, by_day: bool = False) -> pd.DataFrame:
    """``policy``'s pages of ``report`` with ``fresh_days`` replaced by their expectation
    where the module notes allow (``expected``: whether it was); with ``by_day``, also each
    planned day's expected fresh days (columns ``day1``, ``day2``, ..., NaN where not
    ``expected``)."""
    pages = run_pages(report, policy).reset_index(drop=True)
    if pages.empty:
        raise ValueError(f"{report}: no {policy!r} pages in data/pages.parquet")
    if pages["seed"].nunique() != 1:
        raise ValueError(f"{report}: one seed per run, found {sorted(pages['seed'].unique())}")
    seed = int(pages["seed"].iloc[0])
    data = Path(f"{report}_w") / f"seed{seed}" / policy / "data"
    daily = pd.read_parquet(Path(report) / "data" / "daily.parquet")
    dates = pd.to_datetime(daily.loc[daily["policy"] == policy, "date"].astype(str), utc=True)
    start = dates.min().timestamp()
    end = dates.max().timestamp() + DAY_S
    logs = pd.read_parquet(data / "fetch_logs", columns=["url", "fetched_at", "status"])
    logs = logs[logs["status"].isin(FRESH_STATUS)]
    at = (pd.to_datetime(logs["fetched_at"], utc=True) - pd.Timestamp(0, tz="UTC"))
    fetches = pd.Series(at.dt.total_seconds().to_numpy(), index=logs["url"].to_numpy())
    by_url = fetches.groupby(level=0).apply(lambda s: s.to_numpy())
    window = (end - start) / DAY_S
    kind = page_kinds(pages)
    ok = np.isin(kind, POISSON_KINDS) & np.isclose(pages["obs_days"], window)
    n_days = int(round(window))
    exp = np.full(len(pages), np.nan)
    days = np.full((len(pages), n_days), np.nan)
    for i in np.flatnonzero(ok):
        t = by_url.get(pages.at[i, "url"])
        if t is not None:
            lam = float(pages.at[i, "lam"])
            exp[i] = expected_fresh_days(t, lam, start, end)
            if by_day and np.isfinite(exp[i]):
                days[i] = [expected_fresh_days(t, lam, start + d * DAY_S, start + (d + 1) * DAY_S)
                           for d in range(n_days)]
    out = pages.copy()
    out["expected"] = np.isfinite(exp)
    out["fresh_days"] = np.where(out["expected"], exp, pages["fresh_days"])
    if by_day:
        for d in range(n_days):
            out[f"day{d + 1}"] = days[:, d]
    return out


def ratios(mine: pd.DataFrame, oracle: pd.DataFrame) -> dict:
    """Importance-weighted freshness ÷ the oracle's, overall and per kind
    (:func:`lab.backtest.report.kind_freshness` of the rescored pages)."""
    policy = mine["policy"].iloc[0]
    k = kind_freshness(pd.concat([mine, oracle], ignore_index=True))
    k = k[k["policy"] == policy].set_index("kind")["freshness_weighted_vs_oracle"]
    row = {kind: round(float(k[kind]), 4) for kind in ("all", *KINDS) if kind in k.index}
    row["pages expected"] = int(mine["expected"].sum())
    return row


def day_ratios(mine: pd.DataFrame, oracle: pd.DataFrame) -> pd.DataFrame:
    """Per planned day and Poisson kind: importance-weighted expected freshness ÷ the
    oracle's, over the pages expected in both runs (:func:`expected_pages` with ``by_day``)."""
    cols = [c for c in mine.columns if c.startswith("day") and c[3:].isdigit()]
    both = mine[["url", "importance", "kind", "front", *cols]].merge(
        oracle[["url", *cols]], on="url", suffixes=("", "_oracle"))
    both = both[both[cols[0]].notna() & both[f"{cols[0]}_oracle"].notna()]
    kind = page_kinds(both)
    rows = {}
    for name, sel in (("poisson and front", np.ones(len(both), bool)),
                      *((k, kind == k) for k in POISSON_KINDS)):
        w = both["importance"].to_numpy(float)[sel]
        rows[name] = [float(w @ both[c].to_numpy(float)[sel]
                            / (w @ both[f"{c}_oracle"].to_numpy(float)[sel])) for c in cols]
    return pd.DataFrame(rows, index=pd.Index(range(1, len(cols) + 1), name="day")).T


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.tools.expected_score",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", required=True, help="report directory with an oracle run")
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=DIR")
    ap.add_argument("--policy", default="optimal")
    ap.add_argument("--by-day", action="store_true",
                    help="also each planned day's ratio of the Poisson kinds (module notes)")
    args = ap.parse_args(argv)
    runs = [r.split("=", 1) for r in args.run]
    if any(len(r) != 2 for r in runs):
        ap.error("--run takes LABEL=DIR")
    try:
        oracle = expected_pages(args.oracle, "oracle", args.by_day)
        mine = {label: expected_pages(report, args.policy, args.by_day)
                for label, report in runs}
    except (FileNotFoundError, ValueError) as exc:  # a missing run or a run without pages
        ap.exit(2, f"expected_score: {exc}\n")
    rows = [{"run": label, **ratios(pages, oracle)} for label, pages in mine.items()]
    print(pd.DataFrame(rows).to_markdown(index=False))
    for label, pages in mine.items() if args.by_day else ():
        print(f"\n{label}: expected freshness ÷ the oracle's by planned day")
        print(day_ratios(pages, oracle).round(4).to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
