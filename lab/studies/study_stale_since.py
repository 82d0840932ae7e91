"""What an untrusted 304 does to the planner's staleness clock, on the demo's web.

The demo's synthetic web (``lab.tools.demo.make_web``: 20,000 URLs on 200 hosts, seed 7) is
fetched by the legacy crawler for ``--days`` days (conditional GETs wherever it holds a
validator), state is rebuilt from that history (``jobs.rebuild_state``) and the last day is
allocated (``jobs.allocate``), both in one local Spark session. On the plan of that day,
per host validator class (``hosts/dt=D``), the mean of

* ``p_stale_now`` as allocate writes it: counted from ``stale_since_at`` (the last confirmed
  copy, or the last success where the host's 304s are trusted, jobs.core.plan_work.stale_since);
* the same probability counted from ``last_success_at``, as it was before:
  :math:`1 - e^{-\\hat\\lambda (t_0 - \\texttt{last\\_success\\_at})}` at the window's start
  :math:`t_0`;

over the known, live pages of the class (frontier pages have no copy: 1 either way).

Run: ``python -m lab.studies.study_stale_since --workdir /tmp/stale`` (the demo's sizes;
``--urls/--hosts/--days`` to change them).
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from jobs.config import load_config
from jobs.paths import planning_window, shift_day


def figures(plan: pd.DataFrame, hosts: pd.DataFrame, window_start: float) -> pd.DataFrame:
    """Per validator class: pages, mean p_stale_now (from stale_since_at) and mean P(changed)
    counted from last_success_at."""
    live = plan[(plan["lane"] != "discovery") & (plan["reason"] != "gone_recheck")].copy()
    live = live.merge(hosts[["host", "validator_class"]], on="host", how="left")
    success = live["last_success_at"].map(lambda t: t.timestamp() if pd.notna(t) else np.nan)
    age = (window_start - success.to_numpy(float)) / 86400.0
    lam = live["lambda_hat"].to_numpy(float)
    live["p_from_success"] = np.where(np.isnan(age), 1.0, -np.expm1(-lam * np.nan_to_num(age)))
    out = live.groupby("validator_class").agg(
        pages=("url", "size"), p_stale_from_success=("p_from_success", "mean"),
        p_stale_now=("p_stale_now", "mean"))
    return out.reset_index()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--date", default="2026-11-26", help="the day allocated")
    parser.add_argument("--urls", type=int, default=20000)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--days", type=int, default=11, help="days of legacy history")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    from jobs import allocate, rebuild_state
    from jobs.spark_session import get_spark
    from lab.tools.demo import make_web

    root = Path(args.workdir).resolve() / "data"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    first = shift_day(args.date, -(args.days - 1))
    make_web(root, args.urls, args.hosts, args.seed, first, args.days)
    cfg = load_config(None, [f"paths.root={root}", "spark.master=local[2]"])
    spark = get_spark(cfg, "study_stale_since")
    rebuild_state.run(cfg, first, args.date, spark)
    allocate.run(cfg, args.date, spark)
    plan = pd.read_parquet(cfg.paths.table("plan", args.date))
    hosts = pd.read_parquet(cfg.paths.table("hosts", args.date))
    out = figures(plan, hosts, planning_window(args.date)[0])
    with pd.option_context("display.width", 120):
        print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
