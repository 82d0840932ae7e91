"""Benchmark the whole daily chain for one date in one Spark session, against its I/O limit.

Usage::

    python -m lab.studies.bench_daily --root /tmp/bench_daily --urls 20000 --hosts 200 \
        --days 3 --set spark.master=local[2] --set policy.name=optimal \
        --set budget.daily_fetches=5000

Data: ``--days`` days of fetch logs from :mod:`lab.tools.generate_sample` ending
``--end-date`` (D). Setup, printed but not part of the figure: validate_logs + update_state
for every day before D (the first with ``bootstrap``), so state/ and hosts/ of D-1 are
committed. Then validate_logs, update_state, allocate, build_schedule and publish run for D
in one Spark session, publish to a moto S3 server on loopback (``infra/local_s3.py``, a free
port, stopped at the end). One JSON line per stage: seconds, peak RSS of the process tree
(:mod:`lab.studies.bench_common`), state/dt=D rows, rows/s and the stage's Spark jobs.

The I/O limit: pyarrow alone reads state/dt=D-1 and fetch_logs/dt=D and writes them to a
scratch directory, then reads and writes state/dt=D, file by file and row group by row group.
``ratio`` = chain seconds / I/O seconds says how far the chain is from only moving its bytes
(the files were just read by the chain, so the page cache is warm for both). The last line
is a summary (machine, load, commit, per-stage seconds, ratio, peak RSS); its
``setup_days_in_session`` > 0 means setup ran first in the same session, so the chain found
the JVM warm (JIT, Python workers) where a ``--keep`` rerun starts it cold.

``--keep`` reuses the root's generated data when it was made with the same arguments, and
every setup day already committed, so a 10M rerun neither regenerates nor re-folds history.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from jobs import allocate, build_schedule, dag_tasks, partitions, storage, update_state
from jobs import validate_logs
from jobs.config import add_config_args, config_from_args
from jobs.paths import date_range, previous_day, shift_day
from jobs.publish import ensure_bucket
from lab.studies.bench_common import measure, stage_line

REPO = Path(__file__).resolve().parents[2]
BUCKET = "recrawl-bench"
GEN_ARGS = ("urls", "hosts", "days", "end_date", "seed")


def bench_dir(root: str) -> Path:
    """Where the benchmark keeps its own files under the data root (never a table)."""
    return Path(root) / "_bench"


def prepare_data(args) -> None:
    """Generate the history into ``args.root``, or with ``--keep`` reuse a matching one."""
    wanted = {k: getattr(args, k) for k in GEN_ARGS}
    stamp = bench_dir(args.root) / "generated.json"
    made = json.loads(stamp.read_text()) if stamp.exists() else None
    if args.keep and made == wanted:
        print(json.dumps({"stage": "generate", "reused": True, **wanted}), flush=True)
        return
    if args.keep and made is not None:
        raise SystemExit(f"--keep: {args.root} was generated with {made}, not {wanted}")
    root = Path(args.root)
    # Only a root this benchmark made (or an empty one) is ever deleted.
    if root.exists() and any(root.iterdir()) and made is None:
        raise SystemExit(f"{root} is not empty and not a bench_daily root; refusing to delete it")
    shutil.rmtree(root, ignore_errors=True)
    # A subprocess, so the generator's memory never counts in this process's RSS.
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "lab.tools.generate_sample", "--root", args.root,
                          "--urls", str(args.urls), "--hosts", str(args.hosts),
                          "--days", str(args.days), "--end-date", args.end_date,
                          "--seed", str(args.seed)], check=True, capture_output=True, text=True)
    summary = json.loads(out.stdout)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(wanted))  # last: its presence means the data is whole
    print(json.dumps({"stage": "generate", "seconds": round(time.perf_counter() - t0, 1),
                      "fetch_rows": summary["fetch_rows"], "pages": summary["pages"]}),
          flush=True)


def setup_todo(cfg, days: list[str]) -> list[str]:
    """The setup days whose state or hosts are not committed (with those after them)."""
    for i, d in enumerate(days):
        if not all(partitions.is_committed(cfg.paths.table(t, d)) for t in ("state", "hosts")):
            return days[i:]  # a day folds onto the day before: all later ones are stale too
    return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_s3(command: str, port: int, state_dir: Path) -> str:
    """``infra/local_s3.py start|stop`` for ``port``, its pid file and log in ``state_dir``."""
    out = subprocess.run([sys.executable, str(REPO / "infra" / "local_s3.py"), command,
                          "--port", str(port)], check=True, capture_output=True, text=True,
                         env={**os.environ, "LOCAL_S3_STATE_DIR": str(state_dir)})
    return out.stdout.strip().splitlines()[-1]


def use_dummy_aws() -> None:
    """The loopback server accepts any credentials; never let real ones be picked up."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(key, None)
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                       "NO_PROXY": "127.0.0.1,localhost"})


def copy_files(files: list[str], out_dir: Path) -> dict:
    """Read ``files`` row group by row group with pyarrow and write each to ``out_dir``.

    Returns rows, read seconds and write seconds (opening and closing a writer, i.e. the
    footer, count as writing). Row groups bound the memory, as Spark's batches do.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, read_s, total_s = 0, 0.0, 0.0
    for i, f in enumerate(files):
        t_file = time.perf_counter()
        source = pq.ParquetFile(f)
        with pq.ParquetWriter(out_dir / f"part-{i:05d}.parquet", source.schema_arrow) as writer:
            for g in range(source.num_row_groups):
                t0 = time.perf_counter()
                table = source.read_row_group(g)
                read_s += time.perf_counter() - t0
                writer.write_table(table)
                rows += table.num_rows
        total_s += time.perf_counter() - t_file
    return {"files": len(files), "rows": rows, "read_s": read_s, "write_s": total_s - read_s}


def io_limit(tables: dict[str, list[str]], scratch: Path) -> dict:
    """pyarrow's time to move the chain's bytes: each table's files, in the order given
    (yesterday's state and today's logs, then today's state), copied to ``scratch/<table>``."""
    shutil.rmtree(scratch, ignore_errors=True)
    parts = {name: copy_files(files, scratch / name) for name, files in tables.items()}
    shutil.rmtree(scratch, ignore_errors=True)
    return {"parts": parts, "seconds": sum(p["read_s"] + p["write_s"] for p in parts.values())}


def state_files(cfg, day: str) -> list[str]:
    return partitions.committed_files(cfg.paths.table("state", day), "state")


def chain_files(cfg, day: str) -> dict[str, list[str]]:
    """The files the day's chain reads and writes, in :func:`io_limit`'s order: yesterday's
    state, today's fetch logs (an input with no commit marker: its listing is the one ingest
    reads), today's state."""
    return {"state_prev": state_files(cfg, previous_day(day)),
            "fetch_logs": storage.list_parquet_files(cfg.paths.table("fetch_logs", day)),
            "state": state_files(cfg, day)}


def summary(stage_seconds: dict[str, float], io_seconds: float, peaks_gb: list[float],
            **context) -> dict:
    """The run's last line: per-stage and chain seconds, I/O seconds, their ratio, peak RSS."""
    chain = sum(stage_seconds.values())
    return {**context, "stage_seconds": {k: round(v, 1) for k, v in stage_seconds.items()},
            "chain_s": round(chain, 1), "io_s": round(io_seconds, 2),
            "ratio": round(chain / io_seconds, 1) if io_seconds > 0 else None,
            "peak_rss_gb": max(peaks_gb, default=None)}


def git_commit() -> dict:
    """HEAD and whether tracked files differ from it (others may be editing this checkout)."""
    def git(*cmd):
        out = subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    diff = git("diff", "HEAD", "--no-ext-diff")  # tracked files only
    return {"commit": head, "dirty": bool(diff) if diff is not None else None,
            # A digest, so that a second edit of an already edited file counts as a change.
            "diff": hashlib.sha256(diff.encode()).hexdigest() if diff else diff}


def commit_context(at_start: dict, at_end: dict) -> dict:
    """The commit the run started from (Spark's Python workers import ``jobs`` when they
    start, so a checkout edited during the run may time code of neither commit), and whether
    HEAD or the tracked files changed before it ended: such a run's figures are not the
    start commit's."""
    return {"commit": at_start["commit"], "dirty": at_start["dirty"],
            "code_changed_during_run": at_start != at_end}


def run_chain(cfg, day: str, spark) -> tuple[dict, list[float], int]:
    """Time the day's stages; print a line each (rows = state/dt=D, known after update_state)."""
    stages = [("validate_logs", lambda: validate_logs.run(cfg, day)),
              ("update_state", lambda: update_state.run(cfg, day, spark)),
              ("allocate", lambda: allocate.run(cfg, day, spark)),
              ("build_schedule", lambda: build_schedule.run(cfg, day, spark)),
              ("publish", lambda: dag_tasks.run_publish(cfg, day))]
    sc = spark.sparkContext
    seconds, peaks, pending, rows = {}, [], [], None
    for name, fn in stages:
        sc.setJobGroup(name, name)  # to count each stage's Spark jobs (a fixed cost each)
        _, secs, mem = measure(fn)
        seconds[name] = secs
        pending.append((name, secs, mem, len(sc.statusTracker().getJobIdsForGroup(name))))
        if name == "update_state":
            rows = partitions.read_marker(cfg.paths.table("state", day))["rows"]
        if rows is not None:
            for name_, secs_, mem_, jobs in pending:
                line = {**stage_line(name_, secs_, rows, mem_), "spark_jobs": jobs}
                peaks.append(line["peak_rss_gb"])
                print(json.dumps(line), flush=True)
            pending = []
    return seconds, peaks, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="data root (deleted and regenerated unless "
                                                  "--keep finds matching data)")
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--days", type=int, default=3, help="days of history; the last is timed")
    ap.add_argument("--end-date", default="2024-01-03")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true",
                    help="reuse the root's generated data and committed setup days")
    add_config_args(ap)
    args = ap.parse_args(argv)
    if args.days < 2:
        ap.error("--days must be >= 2: the timed day folds onto a committed yesterday")
    args.root = os.path.abspath(args.root)
    at_start = git_commit()
    days = date_range(shift_day(args.end_date, 1 - args.days), args.end_date)
    day = days[-1]

    prepare_data(args)
    use_dummy_aws()
    s3_dir, port = bench_dir(args.root) / "s3", free_port()
    endpoint = local_s3("start", port, s3_dir)
    try:
        # The loopback target last, so no --set can point the benchmark at a real bucket.
        args.set = [f"paths.root={args.root}", *args.set, f"publish.target=s3://{BUCKET}",
                    f"publish.endpoint_url={endpoint}"]
        cfg = config_from_args(args)
        ensure_bucket(endpoint, BUCKET)
        from jobs.spark_session import get_spark

        spark, start_s, _ = measure(lambda: get_spark(cfg, "bench_daily"))
        print(json.dumps({"stage": "spark_start", "seconds": round(start_s, 1)}), flush=True)
        todo = setup_todo(cfg, days[:-1])
        t0 = time.perf_counter()
        for d in todo:
            validate_logs.run(cfg, d)
            update_state.run(cfg, d, spark, bootstrap=(d == days[0]))
        print(json.dumps({"stage": "setup", "days": todo, "reused": len(days) - 1 - len(todo),
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)

        load_before = os.getloadavg()
        seconds, peaks, rows = run_chain(cfg, day, spark)
        spark.stop()
        io = io_limit(chain_files(cfg, day), bench_dir(args.root) / "io")
        print(json.dumps({"stage": "io_limit", "seconds": round(io["seconds"], 2), "parts": {
            k: {**p, "read_s": round(p["read_s"], 2), "write_s": round(p["write_s"], 2)}
            for k, p in io["parts"].items()}}), flush=True)
        print(json.dumps(summary(
            seconds, io["seconds"], peaks, date=day, state_rows=rows, nproc=os.cpu_count(),
            load_before=[round(x, 2) for x in load_before],
            load_after=[round(x, 2) for x in os.getloadavg()], master=cfg.spark.master,
            spark_start_s=round(start_s, 1), setup_days_in_session=len(todo),
            **commit_context(at_start, git_commit()))), flush=True)
    finally:
        local_s3("stop", port, s3_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
