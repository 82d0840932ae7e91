"""The budget advisor against the truth: what the curve predicted at other budgets, and what
running the planner at those budgets realised.

Usage::

    python -m lab.backtest.budget_check --urls 3000 --hosts 40 --days 3 --seeds 0

For each seed one history is built; the planner (``--policy``, optimal by default) then runs
the closed loop (:func:`lab.backtest.loop.run_policy`) at the day's budget and at each
``--factors`` multiple of it, every run from that same history. Each planned day's run for D
predicts, in its what-if curve (``jobs.core.budget_curve``), the expected importance-weighted
freshness of the day D+1 its schedule covers at c × the budget; the run at c × the budget
realises a freshness of that day (the simulator's truth, importance-weighted). The table
pairs them per (seed, day, factor):

* ``predicted``: the base run's curve at c; ``expected``: what the c run's own plan expected;
* ``realised``: the c run's true weighted freshness of D+1;
* ``delta_predicted`` = predicted − the base run's expected freshness, ``delta_realised`` =
  realised − the base run's realised freshness: the gain (or loss) the curve promised
  against the one the fleet saw, free of the model's level bias.

From the second planned day on, the runs' states differ (each ran its own budget the day
before), so day 1 is the clean comparison; later days are shown too. Writes
``budget_check.csv`` and ``budget_check.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lab.backtest.loop import BacktestSpec, prepare_history, run_policy
from jobs.core import budget_curve

REPO = Path(__file__).resolve().parents[2]
COLUMNS = ("seed", "day", "date", "factor", "budget", "predicted", "expected", "realised",
           "error", "delta_predicted", "delta_realised", "delta_error")


def curve_point(row: pd.Series, factor: float):
    """The curve's expected freshness at ``factor`` in a daily row (1: the plan's own)."""
    if abs(factor - 1.0) < 1e-12:
        return row.get("expected_freshness")
    col = f"curve_freshness_{budget_curve.factor_key(factor)}"
    return row.get(col)


def compare(base: pd.DataFrame, runs: dict, seed: int, budget: int) -> pd.DataFrame:
    """The table of :data:`COLUMNS` from the base run's daily rows and each factor's
    (``{factor: daily rows}``)."""
    out = []
    base = base.set_index("day")
    for factor, daily in sorted(runs.items()):
        for day, row in daily.set_index("day").iterrows():
            if day not in base.index:
                continue
            b = base.loc[day]
            predicted, expected = _num(curve_point(b, factor)), _num(row.get("expected_freshness"))
            realised, b_real = _num(row["freshness_weighted"]), _num(b["freshness_weighted"])
            b_exp = _num(b.get("expected_freshness"))
            out.append({"seed": seed, "day": int(day), "date": row["date"], "factor": factor,
                        "budget": int(round(factor * budget)), "predicted": predicted,
                        "expected": expected, "realised": realised,
                        "error": realised - predicted,
                        "delta_predicted": predicted - b_exp, "delta_realised": realised - b_real,
                        "delta_error": (realised - b_real) - (predicted - b_exp)})
    return pd.DataFrame(out, columns=list(COLUMNS))


def _num(v) -> float:
    return float("nan") if v is None or pd.isna(v) else float(v)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per factor and whether the day is the first (same state for every run): mean
    predicted, realised, their mean error and mean |error|, and the same for the deltas."""
    t = table.assign(first_day=table["day"] == table.groupby("seed")["day"].transform("min"))
    g = t.groupby(["factor", "first_day"], sort=True)
    return pd.DataFrame({
        "days": g.size(), "predicted": g["predicted"].mean(), "realised": g["realised"].mean(),
        "error": g["error"].mean(), "abs_error": g["error"].apply(lambda e: e.abs().mean()),
        "delta_predicted": g["delta_predicted"].mean(),
        "delta_realised": g["delta_realised"].mean(),
        "delta_abs_error": g["delta_error"].apply(lambda e: e.abs().mean()),
    }).reset_index()


def run(spec: BacktestSpec, workdir: Path, spark, endpoint: str, factors=(0.75, 1.25),
        policy: str = "optimal", log=print) -> pd.DataFrame:
    """One seed: the base run and one run per factor from the same history."""
    history = prepare_history(spec, workdir, spark)
    base = run_policy(spec, policy, history, workdir, spark, endpoint, log=log)
    if base.status != "ok":
        raise RuntimeError(f"{policy}: {base.status} {base.error}")
    runs = {}
    for c in factors:
        r = run_policy(spec, policy, history, workdir, spark, endpoint,
                       budget=int(round(c * spec.budget)), tag=f"{policy}@{c:g}x", log=log)
        if r.status != "ok":
            raise RuntimeError(f"{policy} at {c:g} x budget: {r.status} {r.error}")
        runs[c] = r.daily
    return compare(base.daily, runs, spec.seed, spec.budget)


def markdown(table: pd.DataFrame) -> str:
    s = summary(table)
    lines = ["| × budget | day | days | predicted | realised | error (mean) | abs error | "
             "Δ predicted | Δ realised | Δ abs error |", "|---" * 10 + "|"]
    for r in s.itertuples(index=False):
        lines.append(f"| {r.factor:g} | {'first' if r.first_day else 'later'} | {r.days} | "
                     f"{r.predicted:.3f} | {r.realised:.3f} | {r.error:+.3f} | {r.abs_error:.3f} | "
                     f"{r.delta_predicted:+.3f} | {r.delta_realised:+.3f} | "
                     f"{r.delta_abs_error:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.backtest.budget_check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=3000)
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--history-days", type=int, default=7)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--budget-share", type=float, default=0.25)
    ap.add_argument("--factors", type=float, nargs="+", default=[0.75, 1.25],
                    choices=[c for c in budget_curve.FACTORS])
    ap.add_argument("--policy", default="optimal", choices=["optimal", "uniform", "proportional"])
    ap.add_argument("--out", default=str(REPO / "var" / "backtest" / "budget_check"))
    ap.add_argument("--workdir", default=str(REPO / "var" / "backtest" / "budget_work"))
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = ap.parse_args(argv)
    from jobs.config import load_config
    from lab.sim.s3server import MotoS3Server, dummy_aws_env
    from jobs.spark_session import get_spark

    tables = []
    with dummy_aws_env(), MotoS3Server() as s3:
        spark = get_spark(load_config(None, ["spark.master=local[2]",
                                             "spark.settings.spark.sql.shuffle.partitions=4"]),
                          "budget_check")
        for seed in args.seeds:
            spec = BacktestSpec(urls=args.urls, hosts=args.hosts, history_days=args.history_days,
                                days=args.days, seed=seed, budget_share=args.budget_share,
                                overrides=tuple(args.set))
            tables.append(run(spec, Path(args.workdir) / f"seed{seed}", spark, s3.endpoint_url,
                              tuple(args.factors), args.policy))
    table = pd.concat(tables, ignore_index=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "budget_check.csv", index=False)
    text = markdown(table)
    (out / "budget_check.md").write_text(text)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(4).to_string(index=False))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
