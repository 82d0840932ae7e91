"""Benchmark the allocation stage (and optionally build_schedule) on generated data.

Usage::

    python -m lab.studies.bench_allocation --root /tmp/bench1m --urls 1000000 --hosts 2000 \
        --generate --set spark.master=local[2] --set policy.name=optimal

``--generate`` writes 2 days of history with :mod:`lab.tools.generate_sample` and runs
validate_logs + update_state for both days (timed separately, not part of the figure).
``--synthetic`` instead writes the state and frontier tables directly
(:mod:`lab.studies.bench_state`), which is what makes 10M URLs affordable on 2 cores.
Then ``allocate`` (3 passes over the page table) and, unless ``--allocate-only``,
``build_schedule`` are timed. ``--no-curve`` runs the same code with the what-if curve's
levels empty, so a pair with and without it measures the budget advisor's own cost. Peak memory is the largest sum of RSS over this process
and all its children (the JVM driver/executor and the Python workers), sampled every
0.2 s with psutil (:mod:`lab.studies.bench_common`). Prints one JSON line per stage with
seconds, state rows/s and peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from jobs import allocate, build_schedule, update_state, validate_logs
from jobs.config import config_from_args, add_config_args
from jobs.paths import previous_day
from lab.studies.bench_common import timed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--end-date", default="2024-01-02")
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--generate", action="store_true")
    source.add_argument("--synthetic", action="store_true")
    ap.add_argument("--allocate-only", action="store_true")
    ap.add_argument("--no-curve", action="store_true",
                    help="leave the what-if curve's levels empty (no curve work in pass 3): "
                         "the same code without the budget advisor's cost, for a side-by-side")
    add_config_args(ap)
    args = ap.parse_args(argv)
    if args.no_curve:
        from jobs.core import budget_curve

        budget_curve.curve_levels = lambda *a, **k: (None,) * len(budget_curve.FACTORS)
    args.set = [f"paths.root={args.root}", *args.set]
    cfg = config_from_args(args)
    days = [previous_day(args.end_date), args.end_date]
    from jobs.spark_session import get_spark

    spark = get_spark(cfg, "bench")
    if args.generate:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "lab.tools.generate_sample", "--root", args.root,
                        "--urls", str(args.urls), "--hosts", str(args.hosts), "--days", "2",
                        "--end-date", args.end_date], check=True, stdout=subprocess.DEVNULL)
        print(json.dumps({"stage": "generate", "seconds": round(time.perf_counter() - t0, 1)}),
              flush=True)
        for d in days:
            validate_logs.run(cfg, d)
            timed(f"update_state {d}", lambda d=d: update_state.run(
                cfg, d, spark, bootstrap=(d == days[0])), None)
    if args.synthetic:
        from lab.studies.bench_state import write_synthetic

        t0 = time.perf_counter()
        made = write_synthetic(args.root, days[-1], args.urls, args.hosts)
        print(json.dumps({"stage": "synthetic state", **made,
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    rows = spark.read.parquet(cfg.paths.table("state", days[-1])).count()
    rec, _ = timed("allocate", lambda: allocate.run(cfg, days[-1], spark), rows)
    print(json.dumps({k: rec.get(k) for k in ("policy", "spark_passes", "due_total",
                                              "policy_level", "floors_affordable",
                                              "expected_freshness")}, default=str))
    if not args.allocate_only:
        built, _ = timed("build_schedule", lambda: build_schedule.run(cfg, days[-1], spark), rows)
        print(json.dumps({"planned_total": built["planned_total"]}))
    print(json.dumps({"nproc": os.cpu_count(), "master": cfg.spark.master}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
