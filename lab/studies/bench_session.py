"""The DAG's per-day fixed cost: three spark-submits against one (issue 12).

``airflow.spark_session = stage`` runs update_state, allocate and build_schedule as three
spark-submits (three JVM starts, three imports of the jobs, three Spark sessions);
``run`` runs them as one, ``jobs.plan_day``. This script submits both ways, alternating, on
the same generated root (every stage is idempotent: each repeat rewrites the same
partitions) and prints the wall seconds of each repeat and the medians.

Run: ``python -m lab.studies.bench_session --root /tmp/bs --urls 20000 --repeats 3``
(``source infra/env.sh`` first: spark-submit is the venv's; ``--keep`` reuses the root).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from jobs.dag_tasks import SPARK_STAGES

REPO = Path(__file__).resolve().parents[2]
DAYS = ("2024-01-12", "2024-01-13", "2024-01-14")  # generated; state rebuilt to the second


def prepare(root: Path, urls: int, hosts: int, keep: bool, overrides: list[str]) -> None:
    stamp = root / "_bench" / "session.json"
    wanted = {"urls": urls, "hosts": hosts}
    if keep and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return
    if root.exists() and any(root.iterdir()) and not stamp.exists():
        raise SystemExit(f"{root} is not empty and not a bench_session root; refusing to delete it")
    shutil.rmtree(root, ignore_errors=True)
    from lab.tools.generate_sample import generate_sample

    generate_sample(str(root / "data"), urls=urls, hosts=hosts, days=len(DAYS),
                    end_date=DAYS[-1], seed=0)
    for day in DAYS:
        _submit("validate_logs", day, root, overrides, spark=False)
    _submit("rebuild_state", None, root, overrides, extra=["--from", DAYS[0], "--to", DAYS[1]])
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(wanted))


def _submit(stage: str, day, root: Path, overrides: list[str], spark: bool = True,
            extra: list[str] | None = None) -> float:
    script = str(REPO / "jobs" / f"{stage}.py")
    cmd = (["spark-submit", "--master", "local[2]", script] if spark
           else [sys.executable, "-m", f"jobs.{stage}"])
    cmd += (["--date", day] if day else []) + (extra or [])
    cmd += ["--set", f"paths.root={root / 'data'}", *sum((["--set", o] for o in overrides), [])]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--urls", type=int, default=20_000)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = ap.parse_args(argv)
    if shutil.which("spark-submit") is None:
        raise SystemExit("spark-submit is not on PATH: source infra/env.sh first")
    root = Path(args.root).resolve()
    overrides = ["spark.master=local[2]", *args.set]
    prepare(root, args.urls, args.hosts, args.keep, overrides)
    day = DAYS[-1]
    per_stage, per_run = [], []
    for i in range(args.repeats):
        stages = {s: round(_submit(s, day, root, overrides), 1) for s in SPARK_STAGES}
        per_stage.append(sum(stages.values()))
        per_run.append(_submit("plan_day", day, root, overrides))
        print(json.dumps({"repeat": i, "stage_submits_s": stages,
                          "three_submits_s": round(per_stage[-1], 1),
                          "one_submit_s": round(per_run[-1], 1),
                          "load": os.getloadavg()[0]}), flush=True)
    a, b = statistics.median(per_stage), statistics.median(per_run)
    print(json.dumps({"urls": args.urls, "median_three_submits_s": round(a, 1),
                      "median_one_submit_s": round(b, 1), "saved_s": round(a - b, 1),
                      "ratio": round(b / a, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
