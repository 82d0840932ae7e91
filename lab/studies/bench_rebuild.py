"""Benchmark ``rebuild_state`` over N days against one day's ``update_state`` (issue 12).

The data is the backtest's own history (:func:`lab.backtest.loop.write_history`: the
legacy crawler over the synthetic web) for N + 1 days. In one Spark session it times

1. ``rebuild_state`` of days 0 .. N-1 (one job over every day's logs);
2. ``update_state`` of day N on top of it (the daily run at the same size);

and prints one JSON line per stage (seconds, peak RSS of the process tree, Spark jobs) and
a summary with the ratio rebuild / one day (target: at most 3 at 60 days).

Run: ``python -m lab.studies.bench_rebuild --root /tmp/br --urls 6000 --days 60``
(``--keep`` reuses a root this script generated with the same arguments).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from jobs import rebuild_state, update_state, validate_logs
from lab.backtest.loop import BacktestSpec, day_str, planner_config, write_history
from lab.studies.bench_common import gb, measure

GEN_ARGS = ("urls", "hosts", "days", "seed")


def prepare(args, spec: BacktestSpec) -> None:
    """Write N + 1 days of history into ``args.root`` (or reuse it with ``--keep``)."""
    wanted = {k: getattr(args, k) for k in GEN_ARGS}
    root = Path(args.root)
    stamp = root / "_bench" / "generated.json"
    made = json.loads(stamp.read_text()) if stamp.exists() else None
    if args.keep and made == wanted:
        print(json.dumps({"stage": "generate", "reused": True, **wanted}), flush=True)
        return
    # Only a root this benchmark made (or an empty one) is ever deleted.
    if root.exists() and any(root.iterdir()) and made is None:
        raise SystemExit(f"{root} is not empty and not a bench_rebuild root; refusing to delete it")
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    write_history(spec, root / "data", days=args.days + 1)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(wanted))  # last: its presence means the data is whole
    print(json.dumps({"stage": "generate", "seconds": round(time.perf_counter() - t0, 1),
                      **wanted}), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--urls", type=int, default=6000)
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--days", type=int, default=60, help="days rebuilt (one more is generated)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = ap.parse_args(argv)
    if args.days < 1:
        ap.error("--days must be >= 1")
    args.root = os.path.abspath(args.root)
    spec = BacktestSpec(urls=args.urls, hosts=args.hosts, seed=args.seed,
                        history_days=args.days + 1, overrides=tuple(args.set))
    prepare(args, spec)
    root = Path(args.root) / "data"
    cfg = planner_config(spec, root, "adaptive", None)
    params = spec.params()
    days = [day_str(params, d) for d in range(args.days + 1)]
    first, last, today = days[0], days[-2], days[-1]
    for d in days:
        validate_logs.run(cfg, d)

    from jobs.spark_session import get_spark

    spark, start_s, _ = measure(lambda: get_spark(cfg, "bench_rebuild"))
    sc = spark.sparkContext
    seconds = {}
    for name, fn in (("rebuild_state", lambda: rebuild_state.run(cfg, first, last, spark)),
                     ("update_state", lambda: update_state.run(cfg, today, spark))):
        sc.setJobGroup(name, name)
        _, secs, mem = measure(fn)
        seconds[name] = secs
        print(json.dumps({"stage": name, "seconds": round(secs, 1),
                          "days": args.days if name == "rebuild_state" else 1,
                          "peak_rss_gb": gb(mem.peak), "peak_pss_gb": gb(mem.peak_pss),
                          "spark_jobs": len(sc.statusTracker().getJobIdsForGroup(name))}),
              flush=True)
    spark.stop()
    print(json.dumps({"stage": "summary", "days": args.days, "urls": args.urls,
                      "spark_start_s": round(start_s, 1),
                      "rebuild_over_one_day": round(seconds["rebuild_state"]
                                                    / seconds["update_state"], 2),
                      "load": [round(x, 2) for x in os.getloadavg()],
                      "nproc": os.cpu_count()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
