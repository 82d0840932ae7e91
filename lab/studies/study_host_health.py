"""Issue 15: does the planner stop hammering struggling hosts? A closed-loop backtest study.

The synthetic web gets hidden host health (``lab.sim.params.WebParams``): quota hosts (503
beyond a hidden daily quota, some recovering from a given day), throttle hosts (429 with
Retry-After below a hidden interval) and healthy hosts. ``optimal`` plans ``--days`` days twice
from the same history, once with the served-rate limit (the default config) and once with
host health switched off (every day judged good, Retry-After ignored), and the study prints,
per seed and variant:

* 503 + 429 answers per planned day (the target: >= 90 % fewer than on the first planned
  day by day 3, and staying there);
* per host class (quota, recovering, throttle, healthy): requests, 503/429 answers and the
  share of them, and the mean limit L / N of the last day;
* recovering quota hosts: days from their recovery until L >= 0.8 N, and until the cap stops
  binding the plan (``plan/dt=D``'s ``cap_binds`` false on all its pages: the host gets the
  rates it wants, so a higher limit would change nothing);
* freshness (truth, plain and importance-weighted) and visits/day per host class and of the
  whole web, both variants.

Run: ``python -m lab.studies.study_host_health --seeds 0 1 2 --days 14`` (about 10 s per
planned day and variant on 2 cores).
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from lab.backtest.loop import BacktestSpec, day_str, prepare_history, run_policy

# Host health switched off: no day is bad, no wait is honoured.
NO_HEALTH = ("health.max_error_rate=1.0", "health.max_throttle_rate=1.0",
             "health.max_latency_ms=1e12", "health.latency_rise=1e12",
             "health.max_retry_after_s=0")


def host_classes(truth: pd.DataFrame, recover_day: int) -> pd.Series:
    """quota / recovering / throttle / healthy, by host name."""
    cls = np.select([truth["quota"].to_numpy() >= 0, truth["throttle_s"].to_numpy() > 0],
                    ["quota", "throttle"], "healthy").astype(object)
    recovering = (cls == "quota") & np.isfinite(truth["quota_until"].to_numpy(float))
    cls[recovering] = "recovering"
    return pd.Series(cls, index=truth["host"].to_numpy(), name="class")


def _read(root: Path, table: str, day: str) -> pd.DataFrame:
    files = sorted(glob.glob(str(root / table / f"dt={day}" / "*.parquet")))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True) if files else \
        pd.DataFrame()


def class_freshness(allocation: pd.DataFrame, classes: pd.Series) -> dict:
    """Per host class: true freshness (plain, importance-weighted) over the planned days."""
    pages = allocation.assign(cls=allocation["host"].map(classes).fillna("healthy"))
    out = {}
    for cls, g in pages.groupby("cls"):
        w = g["importance"]
        out[cls] = {"freshness": float(g["fresh_days"].sum() / g["obs_days"].sum()),
                    "weighted": float((w * g["fresh_days"]).sum() / (w * g["obs_days"]).sum()),
                    "visits_per_day": float(g["visits_per_day"].sum())}
    return out


def summarise(root: Path, run, classes: pd.Series, params, first: int, days: int,
              recover_day: int) -> dict:
    daily = run.daily
    errors = (daily["status_503"] + daily["status_429"]).to_numpy()
    per_class, limits, recovered = [], {}, {}
    logs = []
    for k in range(days):
        d = day_str(params, first + k)
        log = _read(root, "fetch_logs", d)
        if len(log):
            logs.append(log.assign(day=k + 1))
    log = pd.concat(logs, ignore_index=True)
    log["class"] = log["host"].map(classes).fillna("healthy")
    log["refused"] = log["status"].isin([429, 503])
    for cls, g in log.groupby("class"):
        per_class.append({"class": cls, "hosts": int((classes == cls).sum()),
                          "requests": int(len(g)), "refused": int(g["refused"].sum()),
                          "refused_share": float(g["refused"].mean()),
                          "refused_last3": int(g.loc[g["day"] > days - 3, "refused"].sum())})
    last_hosts = _read(root, "hosts", day_str(params, first + days - 1))
    if len(last_hosts) and "rate_limit" in last_hosts:
        h = last_hosts.assign(cls=last_hosts["host"].map(classes).fillna("healthy"))
        share = h["rate_limit"] / h["nominal_cap"]
        limits = {c: float(v) for c, v in share.groupby(h["cls"]).mean().items()}
    if recover_day >= 0:
        # Per recovering host, days from its recovery until L >= 0.8 N, and until its cap no
        # longer binds the plan (plan/dt=D's cap_binds: it gets the rates it wants).
        hosts = set(classes.index[classes == "recovering"])
        span = range(max(recover_day - first, 0), days)
        tables = [(_read(root, "hosts", day_str(params, first + k)),
                   _read(root, "plan", day_str(params, first + k))) for k in span]
        for host in sorted(hosts):
            full = unbound = None
            for k, (t, plan) in enumerate(tables):
                row = t[t["host"] == host]
                if full is None and len(row) and \
                        row["rate_limit"].iloc[0] >= 0.8 * row["nominal_cap"].iloc[0]:
                    full = k + 1
                rows = plan[plan["host"] == host] if len(plan) else plan
                if unbound is None and len(rows) and not rows["cap_binds"].any():
                    unbound = k + 1
            recovered[host] = {"to_80pct": full, "unbound": unbound}
    return {"errors_per_day": [int(e) for e in errors],
            "errors_day1": int(errors[0]), "errors_day3_on_max": int(errors[2:].max()),
            "drop_by_day3": (float(1 - errors[2:].max() / errors[0]) if errors[0] else None),
            "per_class": per_class, "mean_limit_share_last_day": limits,
            "days_after_recovery": recovered,
            "freshness_by_class": class_freshness(run.allocation, classes),
            "freshness": run.metrics.get("freshness"),
            "freshness_weighted": run.metrics.get("freshness_weighted")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--history-days", type=int, default=7)
    ap.add_argument("--urls", type=int, default=3000)
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--quota-share", type=float, default=0.2)
    ap.add_argument("--throttle-share", type=float, default=0.1)
    ap.add_argument("--recover-share", type=float, default=0.5)
    ap.add_argument("--recover-after", type=int, default=5,
                    help="planned days before the recovering hosts lift their quota")
    ap.add_argument("--workdir", default="var/study_host_health")
    ap.add_argument("--variants", nargs="+", default=["served_rate", "no_health"],
                    choices=["served_rate", "no_health"])
    args = ap.parse_args(argv)
    from jobs.config import load_config
    from jobs.spark_session import get_spark
    from lab.sim.s3server import MotoS3Server, dummy_aws_env

    recover_day = args.history_days + args.recover_after
    web = (f"quota_host_share={args.quota_share}", f"throttle_host_share={args.throttle_share}",
           f"quota_recover_share={args.recover_share}", f"quota_recover_day={recover_day}",
           "health_min_pages=30")
    out = []
    with dummy_aws_env(), MotoS3Server() as s3:
        spark = get_spark(load_config(None, ["spark.master=local[2]",
                                             "spark.settings.spark.sql.shuffle.partitions=4"]),
                          "study_host_health")
        for seed in args.seeds:
            for variant in args.variants:
                spec = BacktestSpec(urls=args.urls, hosts=args.hosts, seed=seed,
                                    history_days=args.history_days, days=args.days, web=web,
                                    overrides=NO_HEALTH if variant == "no_health" else ())
                work = Path(args.workdir) / f"seed{seed}" / variant
                history = prepare_history(spec, work, spark)
                run = run_policy(spec, "optimal", history, work, spark, s3.endpoint_url,
                                 log=lambda *a: None)
                if run.status != "ok":
                    raise RuntimeError(f"seed {seed} {variant}: {run.error}")
                classes = host_classes(history[0].web.truth_hosts(), recover_day)
                fig = summarise(work / "optimal" / "data", run, classes, spec.params(),
                                args.history_days, args.days, recover_day)
                fig.update(seed=seed, variant=variant)
                print(json.dumps(fig), flush=True)
                out.append(fig)
    print(json.dumps({"summary": [{k: f[k] for k in ("seed", "variant", "errors_day1",
                                                     "errors_day3_on_max", "drop_by_day3",
                                                     "freshness", "freshness_weighted")}
                                  for f in out]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
