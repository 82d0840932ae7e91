"""Run a closed-loop backtest and write the HTML report.

Usage (the default is sized for a few minutes on 2 cores)::

    bash infra/backtest.sh                       # = python -m lab.backtest
    bash infra/backtest.sh --seeds 0 1 2 --no-sweep --out var/backtest/seeds3

Each seed builds one synthetic web and its history; every policy then runs the real
planner jobs (one Spark session) for ``--days`` days against a loopback moto S3 server.
The what-if budget sweep reruns the sweep policy at other budgets on the first seed.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from lab.backtest.loop import (DEFAULT_POLICIES, POLICIES, BacktestSpec, prepare_history,
                               run_policy, spec_dict)
from lab.backtest.report import kind_text, write_report
from lab.sim.params import WEB_FAMILY, family_web, web_overrides

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m lab.backtest", description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=3000, help="pages at day 0")
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--history-days", type=int, default=7, help="legacy-crawler days before")
    ap.add_argument("--days", type=int, default=5, help="planned days per policy")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--budget-share", type=float, default=0.25, help="budget, share of URLs/day")
    ap.add_argument("--policies", nargs="+", default=list(DEFAULT_POLICIES), choices=POLICIES)
    ap.add_argument("--sweep", type=float, nargs="*", default=[0.1, 0.5],
                    help="extra budget shares for the what-if sweep (first seed only)")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--sweep-policy", default="auto",
                    help="policy of the sweep; auto: optimal if it ran, else adaptive")
    ap.add_argument("--audit-rate", type=float, default=0.05, help="audit sample share")
    ap.add_argument("--out", default=str(REPO / "var" / "backtest" / "report"))
    ap.add_argument("--workdir", default=str(REPO / "var" / "backtest" / "work"))
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="planner config override for every policy; repeatable")
    ap.add_argument("--web", action="append", default=[], metavar="NAME=VALUE",
                    help="synthetic-web parameter (lab.sim.params.WebParams), e.g. "
                         "quota_host_share=0.1 (hidden host health); repeatable")
    ap.add_argument("--intake", action="store_true",
                    help="sitemap and feed signals through the sim fleet's fetched documents "
                         "and jobs.intake instead of hand-written signals")
    ap.add_argument("--web-family", default=None, choices=sorted(WEB_FAMILY),
                    help="a named web of the family (lab.sim.params.WEB_FAMILY); --web "
                         "settings given too override its own")
    args = ap.parse_args(argv)
    if args.web_family:
        args.web = [*family_web(args.web_family), *args.web]
    web_overrides(args.web)  # a typo fails here, before any work
    return args


def _frames(run, seed: int, budget_share: float):
    """Tag one PolicyRun's frames with its seed (and budget for the sweep)."""
    m = {"policy": run.policy, "seed": seed, "budget_share": budget_share, "status": run.status,
         "error": run.error, "seconds": round(run.seconds, 1), **run.metrics,
         **{f"s_{k}": v for k, v in run.stage_seconds.items()}}
    tag = {"policy": run.policy, "seed": seed}
    out = [pd.DataFrame([m])]
    for df in (run.daily, run.allocation, run.hosts, run.audit):
        out.append(df.assign(**tag) if df is not None else pd.DataFrame())
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    from jobs.config import load_config
    from jobs.spark_session import get_spark
    from lab.sim.s3server import MotoS3Server, dummy_aws_env

    command = "python -m lab.backtest " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    workdir, out = Path(args.workdir), Path(args.out)
    t0 = time.monotonic()
    collected = {k: [] for k in ("metrics", "daily", "alloc", "hosts", "audit")}
    sweep_rows, notes = [], []
    # The loopback S3 server accepts these dummy credentials; real ones are never read.
    with dummy_aws_env(), MotoS3Server() as s3:
        spark = get_spark(load_config(None, ["spark.master=local[2]",
                                             "spark.settings.spark.sql.shuffle.partitions=4"]),
                          "backtest")
        specs = {}
        for seed in args.seeds:
            spec = BacktestSpec(urls=args.urls, hosts=args.hosts, history_days=args.history_days,
                                days=args.days, seed=seed, budget_share=args.budget_share,
                                audit_rate=args.audit_rate, overrides=tuple(args.set),
                                web=tuple(args.web), intake=args.intake)
            print(f"[backtest] seed {seed}: history ({args.history_days} days, {args.urls} URLs)",
                  flush=True)
            history = prepare_history(spec, workdir / f"seed{seed}", spark)
            specs[seed] = (spec, history)
            for pol in args.policies:
                run = run_policy(spec, pol, history, workdir / f"seed{seed}", spark,
                                 s3.endpoint_url)
                for key, df in zip(collected, _frames(run, seed, args.budget_share)):
                    collected[key].append(df)
        metrics = pd.concat(collected["metrics"], ignore_index=True)
        ran = set(metrics.loc[metrics["status"] == "ok", "policy"])
        sweep_pol = args.sweep_policy
        if sweep_pol == "auto":
            sweep_pol = next((p for p in ("optimal", "adaptive") if p in ran), None)
        if not args.no_sweep and args.sweep and sweep_pol:
            seed = args.seeds[0]
            spec, history = specs[seed]
            base = metrics[(metrics["policy"] == sweep_pol) & (metrics["seed"] == seed)]
            sweep_rows.append(base[["policy", "budget_share", "seed", "freshness",
                                    "freshness_weighted", "age_days", "fetches"]])
            for share in args.sweep:
                run = run_policy(spec, sweep_pol, history, workdir / f"seed{seed}", spark,
                                 s3.endpoint_url, budget=int(round(share * spec.urls)),
                                 tag=f"{sweep_pol}@{share:g}")
                if run.status == "ok":
                    sweep_rows.append(pd.DataFrame([{
                        "policy": sweep_pol, "budget_share": share, "seed": seed,
                        **{k: run.metrics[k] for k in ("freshness", "freshness_weighted",
                                                       "age_days", "fetches")}}]))
            notes.append(f"Budget sweep: policy {sweep_pol}, seed {seed}, shares "
                         f"{sorted([args.budget_share, *args.sweep])}.")

    for _, row in metrics[metrics["status"] != "ok"].iterrows():
        notes.append(f"{row['policy']} (seed {row['seed']}): {row['status']} - {row['error']}")
    notes.append("Audit: 'shadow audit' is computed by the harness (lab/backtest/audit.py) from "
                 "policy-independent full-fetch checks of the audit sample that do not update the "
                 "copy; 'planner audit' is the production figure an operator watches: "
                 "metrics/dt=D audit_freshness with its Wilson interval, update_state's score of "
                 "that day's lane-audit (measurement-only) fetches (the last day, which has no "
                 "metrics row, from update_state's run record).")
    frames = {k: pd.concat([d for d in v if not d.empty], ignore_index=True)
              if any(not d.empty for d in v) else pd.DataFrame() for k, v in collected.items()}
    sweep = pd.concat(sweep_rows, ignore_index=True) if sweep_rows else pd.DataFrame()
    spec0 = spec_dict(specs[args.seeds[0]][0])
    spec0["seeds"] = args.seeds
    spec0["policies"] = args.policies
    notes.append(f"Wall time {time.monotonic() - t0:.0f} s.")
    path = write_report(out, spec0, command, metrics, frames["daily"], frames["alloc"],
                        frames["hosts"], frames["audit"], sweep, notes)
    print(f"[backtest] report: {path}")
    cols = ["policy", "seed", "status", "freshness_weighted", "freshness", "age_days_weighted",
            "politeness_gap_violations", "politeness_cap_violations", "budget_overrun", "seconds"]
    print(metrics[[c for c in cols if c in metrics]].to_string(index=False))
    au = frames["audit"]
    if not au.empty and "planner_covered" in au:
        for pol, g in au[au["day"] >= 0].groupby("policy", sort=False):
            pc = g["planner_covered"].dropna()
            print(f"[backtest] audit coverage {pol}: production {int(pc.sum())}/{len(pc)} days, "
                  f"shadow {int(g['covered'].sum())}/{len(g)} days")
    print("[backtest] freshness per page kind (mean ± sd over seeds; ÷ oracle per seed):")
    print(kind_text(frames["alloc"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
