"""One table of backtest runs against an oracle that ran in another run of the same web.

Usage::

    python -m lab.tools.family_table --oracle /tmp/bt_base --run before=/tmp/bt_base \\
        --run after=/tmp/bt_after
    python -m lab.tools.family_table --family /tmp/fam --label base [--label lag]

The second form reads a root of runs named ``<label>_<web>_s<seed>`` (one web of
:data:`lab.sim.params.WEB_FAMILY` and one seed each, as ``lab.backtest --web-family WEB
--seeds SEED --out ROOT/<label>_<web>_s<seed>`` writes them) and prints one row per label
and web: the mean over its seeds of each ratio to the oracle of ``base_<web>_s<seed>``
(the run of label ``base`` must have run the oracle), the number of seeds, and the
smallest seed's overall ratio.

Each ``--run LABEL=DIR`` is a backtest report directory (``lab.backtest --out``); its
``optimal`` pages (``data/pages.parquet``) are scored per page kind against the ``oracle`` pages
of ``--oracle`` (same web, seed and history, so the same oracle: the oracle runs with timing
and probes off, which is what lets a run of ``optimal`` alone be compared with it). Prints, per
label: importance-weighted freshness ÷ the oracle's overall and per kind, visits a day (all and
per kind), and the
run's politeness violations and budget overrun (``data/metrics.parquet``). With ``--shares``
also each kind's share of the oracle's importance-weighted fresh days (``share KIND``): the
overall ratio is Σ share × ratio over the kinds, so the shares say how far each kind's
ratio can move it. ``--kind-from KIND=DIR:POLICY`` adds, per run, that sum with one kind's
ratio taken from another run (e.g. ``informed`` with the bursty pages as ``optimal`` read
them: what true rates would buy a planner that kept its own reading of bursts); one seed per
run, where the sum is exactly the overall ratio.
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


def late_ratio(oracle_dir: str, report: str, policy: str, first_day: int = 6) -> float:
    """Mean over planned days ``first_day`` on of the day's importance-weighted freshness
    over the oracle's (``data/daily.parquet``): the ratio once the planner has learnt."""
    def daily(d, pol):
        t = pd.read_parquet(Path(d) / "data" / "daily.parquet")
        t = t[t["policy"] == pol].groupby("day")["freshness_weighted"].mean()
        return t.sort_index()
    mine, ref = daily(report, policy), daily(oracle_dir, "oracle")
    ratio = (mine / ref).dropna()
    return float(ratio.iloc[first_day - 1:].mean()) if len(ratio) >= first_day else float("nan")


def shares(oracle: pd.DataFrame) -> dict:
    """Each kind's share of the oracle's importance-weighted fresh days, Σ w·fresh over the
    kind's pages ÷ over all pages, pooled over seeds (``oracle``: its pages)."""
    w_fresh = oracle["importance"].to_numpy(float) * oracle["fresh_days"].to_numpy(float)
    per = pd.Series(w_fresh).groupby(page_kinds(oracle)).sum()
    return {f"share {k}": float(per.get(k, 0.0) / per.sum()) for k in KINDS}


def kind_ratios(oracle: pd.DataFrame, mine: pd.DataFrame, policy: str) -> pd.Series:
    """``policy``'s importance-weighted freshness ÷ the oracle's, per kind and "all" (mean
    over seeds), from both runs' pages."""
    k = kind_freshness(pd.concat([mine, oracle], ignore_index=True))
    return k[k["policy"] == policy].groupby("kind", observed=True)[
        "freshness_weighted_vs_oracle"].mean()


def _mixed(oracle_shares: dict, mine: pd.Series, theirs: pd.Series, kind: str) -> float:
    """Σ share × ratio over the kinds, ``kind``'s ratio from ``theirs``, the others' from
    ``mine`` (:func:`kind_ratios`)."""
    if kind not in KINDS:
        raise KeyError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    return float(sum(share * (theirs if name == f"share {kind}" else mine).get(
        name.removeprefix("share "), float("nan")) for name, share in oracle_shares.items()
        if share > 0))


def composite(oracle_dir: str, report: str, policy: str, kind: str, other: str,
              other_policy: str) -> float:
    """Σ share × ratio over the kinds (shares: the oracle's, :func:`shares`), with ``kind``'s
    ratio from ``other_policy`` of ``other`` and every other kind's from ``policy`` of
    ``report``. With ``other`` = ``report`` it is the overall ratio (one seed)."""
    oracle = pages(oracle_dir, "oracle")
    return _mixed(shares(oracle), kind_ratios(oracle, pages(report, policy), policy),
                  kind_ratios(oracle, _other_pages(other, other_policy), other_policy), kind)


def _other_pages(report: str, policy: str) -> pd.DataFrame:
    """The pages ``--kind-from`` takes a kind's ratio from: a run without that policy is an
    error, not a NaN."""
    df = pages(report, policy)
    if df.empty:
        raise KeyError(f"{report}: no pages of policy {policy!r}")
    return df


def table(oracle_dir: str, runs: list[tuple[str, str]], policy: str = "optimal",
          ndigits: int | None = 3, with_shares: bool = False,
          kind_from: tuple[str, str, str] | None = None) -> pd.DataFrame:
    """One row per run: its ratios to the oracle (rounded to ``ndigits``; None: unrounded, as
    :func:`family` averages them), visits a day and metrics; with ``with_shares`` also the
    oracle's :func:`shares`; with ``kind_from`` = (kind, report, policy) also
    :func:`composite` (``all, KIND from POLICY``)."""
    def rnd(x: float) -> float:
        return round(x, ndigits) if ndigits is not None else x

    oracle = pages(oracle_dir, "oracle")
    all_shares = shares(oracle)
    oracle_shares = all_shares if with_shares else {}
    if kind_from is not None:  # the other run's ratios: the same for every row
        kind, other, other_policy = kind_from
        theirs = kind_ratios(oracle, _other_pages(other, other_policy), other_policy)
    rows = []
    for label, report in runs:
        mine = pages(report, policy)
        k = kind_ratios(oracle, mine, policy)
        row = {"run": label}
        for name in ("all", *KINDS):
            if name in k.index:
                row[name] = rnd(float(k.loc[name]))
        row["all, days 6-"] = rnd(late_ratio(oracle_dir, report, policy))
        if kind_from is not None:
            row[f"all, {kind} from {other_policy}"] = rnd(_mixed(all_shares, k, theirs, kind))
        row.update(visits(mine))
        row.update(metrics(report, policy))
        row.update({k: rnd(v) for k, v in oracle_shares.items()})
        rows.append(row)
    return pd.DataFrame([*rows, {"run": "oracle", **visits(oracle)}])


def family(root: str, labels, oracle_label: str = "base", policy: str = "optimal",
           with_shares: bool = False) -> pd.DataFrame:
    """Per label and web of the family under ``root``: the mean over seeds of
    :func:`table`'s ratios, visits a day and the summed violations (module notes)."""
    from lab.sim.params import WEB_FAMILY

    rows = []
    for label in labels:
        for web in WEB_FAMILY:
            per_seed = []
            for run in sorted(Path(root).glob(f"{label}_{web}_s*")):
                seed = run.name.rsplit("_s", 1)[1]
                oracle = Path(root) / f"{oracle_label}_{web}_s{seed}"
                if not (run / "data" / "pages.parquet").is_file() or not (
                        oracle / "data" / "pages.parquet").is_file():
                    continue
                per_seed.append(table(str(oracle), [(label, str(run))], policy,
                                      ndigits=None, with_shares=with_shares).iloc[0])
            if not per_seed:
                continue
            t = pd.DataFrame(per_seed)
            row = {"run": label, "web": web, "seeds": len(t)}
            for col in t.columns.drop("run"):
                row[col] = (int(t[col].sum()) if col in KEYS
                            else round(float(t[col].astype(float).mean()), 3))
            row["all, worst seed"] = round(float(t["all"].astype(float).min()), 3)
            rows.append(row)
        if label == oracle_label:
            for web in WEB_FAMILY:
                runs = sorted(Path(root).glob(f"{oracle_label}_{web}_s*"))
                v = [visits(pages(str(r), "oracle")) for r in runs
                     if (r / "data" / "pages.parquet").is_file()]
                if v:
                    rows.append({"run": "oracle", "web": web, "seeds": len(v),
                                 **pd.DataFrame(v).mean().round(1).to_dict()})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.tools.family_table",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", help="report directory with an oracle run")
    ap.add_argument("--run", action="append", metavar="LABEL=DIR")
    ap.add_argument("--family", metavar="ROOT", help="a root of <label>_<web>_s<seed> runs")
    ap.add_argument("--label", action="append", help="with --family: the runs' labels")
    ap.add_argument("--oracle-label", default="base",
                    help="with --family: the label of the runs that ran the oracle (base)")
    ap.add_argument("--policy", default="optimal")
    ap.add_argument("--kind-from", metavar="KIND=DIR:POLICY",
                    help="also the overall ratio with KIND's pages as POLICY of DIR scored them")
    ap.add_argument("--shares", action="store_true",
                    help="also each kind's share of the oracle's weighted fresh days")
    args = ap.parse_args(argv)
    if not args.family and not (args.oracle and args.run):
        ap.error("need --oracle and --run, or --family")
    runs = [r.split("=", 1) for r in args.run or []]
    if any(len(r) != 2 for r in runs):
        ap.error("--run takes LABEL=DIR")
    kind_from = None
    if args.kind_from and args.family:
        ap.error("--kind-from needs --oracle and --run, not --family")
    if args.kind_from:
        kind, _, rest = args.kind_from.partition("=")
        other, _, other_policy = rest.rpartition(":")
        if not (kind and other and other_policy):
            ap.error("--kind-from takes KIND=DIR:POLICY")
        kind_from = (kind, other, other_policy)
    try:
        if args.family:
            t = family(args.family, args.label or ["base"], oracle_label=args.oracle_label,
                       policy=args.policy, with_shares=args.shares).astype(object)
            if t.empty:
                raise ValueError(f"no run under {args.family} is <label>_<web>_s<seed> with "
                                 f"its oracle in {args.oracle_label}_<web>_s<seed> (labels "
                                 f"{', '.join(args.label or ['base'])}; --oracle-label)")
            print(t.where(t.notna(), "").to_markdown(index=False))
            return 0
        t = table(args.oracle, [tuple(r) for r in runs], args.policy, with_shares=args.shares,
                  kind_from=kind_from)
    except (FileNotFoundError, KeyError, ValueError) as exc:  # a missing run, its columns
        ap.exit(2, f"family_table: {exc}\n")
    print(t.to_markdown(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
