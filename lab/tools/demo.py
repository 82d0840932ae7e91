"""The README's demo: sample history -> `airflow dags test recrawl_daily D` -> S3 -> summary.

Everything lives under ``var/demo/``; the S3 server (moto, loopback) is left running so
the published schedule can be inspected; ``bash infra/local_s3.sh stop`` ends it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from jobs.config import load_config, toml_text
from jobs.paths import previous_day, schedule_date, schedule_manifest_key, shift_day

REPO = Path(__file__).resolve().parents[2]
BUCKET = "recrawl-schedules"


def airflow_env(workdir: Path, config_path: Path, spark_master: str) -> dict:
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(workdir / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{workdir / 'airflow' / 'airflow.db'}",
        "AIRFLOW_CONN_RECRAWL_SPARK": json.dumps({"conn_type": "spark", "host": spark_master}),
        "RECRAWL_CONFIG": str(config_path),
    })
    return env


def run_logged(cmd: list[str], env: dict, log: Path) -> None:
    with open(log, "ab") as fh:
        proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise SystemExit(f"{' '.join(cmd[:3])} failed (exit {proc.returncode}); log: {log}\n"
                         + "\n".join(tail))


def start_s3(port: int) -> str:
    out = subprocess.run(["bash", str(REPO / "infra" / "local_s3.sh"), "start", str(port)],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def demo_overrides(root: Path, endpoint: str) -> list[str]:
    """The demo's config: its local S3 endpoint set explicitly, since the default (empty)
    is AWS itself and a demo must never publish there."""
    if not endpoint:
        raise ValueError("the demo publishes to its loopback S3 server only: endpoint required")
    return [f"paths.root={root}", f"publish.target=s3://{BUCKET}",
            f"publish.endpoint_url={endpoint}", "spark.master=local[2]"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", default="2026-11-29", help="logical date D to run")
    parser.add_argument("--urls", type=int, default=20000)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--days", type=int, default=14, help="days of history ending at --date")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, default=int(os.environ.get("LOCAL_S3_PORT", 9000)))
    parser.add_argument("--workdir", default=str(REPO / "var" / "demo"))
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    # The loopback S3 server accepts any credentials; never pick up real ones here.
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ[key] = value

    workdir = Path(args.workdir).resolve()
    root = workdir / "data"
    (workdir / "airflow").mkdir(parents=True, exist_ok=True)
    endpoint = start_s3(args.port)
    cfg = load_config(None, demo_overrides(root, endpoint) + args.set)
    config_path = workdir / "recrawl.toml"
    config_path.write_text(toml_text(cfg))

    from lab.tools.generate_sample import generate_sample
    from jobs.publish import ensure_bucket

    shutil.rmtree(root, ignore_errors=True)
    print(f"[demo] generating {args.urls} URLs on {args.hosts} hosts, {args.days} days "
          f"of fetch logs up to {args.date} (seed {args.seed}) ...", flush=True)
    generate_sample(str(root), urls=args.urls, hosts=args.hosts, days=args.days,
                    end_date=args.date, seed=args.seed)
    # Only the demo creates the bucket; in production it exists and publish may not create it.
    ensure_bucket(endpoint, BUCKET)
    first = shift_day(args.date, -(args.days - 1))
    before = previous_day(args.date)
    log = workdir / f"demo-{args.date}.log"
    log.write_text("")
    if first <= before:
        print(f"[demo] rebuilding state from the history {first} .. {before} "
              f"(python -m jobs.rebuild_state) ...", flush=True)
        run_logged([sys.executable, "-m", "jobs.rebuild_state", "--from", first, "--to", before,
                    "--config", str(config_path)], dict(os.environ), log)

    env = airflow_env(workdir, config_path, cfg.spark.master)
    print(f"[demo] airflow db migrate (SQLite under {workdir / 'airflow'}) ...", flush=True)
    run_logged([sys.executable, "-m", "airflow", "db", "migrate"], env, log)
    print(f"[demo] airflow dags test recrawl_daily {args.date} (local Spark; log {log}) ...",
          flush=True)
    run_logged([sys.executable, "-m", "airflow", "dags", "test", "recrawl_daily", args.date],
               env, log)

    from jobs import metrics, verify
    day = schedule_date(args.date)
    result = verify.verify(cfg.publish.target, day, endpoint_url=endpoint)
    m = pd.Series(metrics.read(cfg, args.date))  # the committed row, never a stray file
    key = schedule_manifest_key(cfg.publish.target, day)
    print()
    print(f"Schedule for {day} (planned by the run for {args.date}) published to:")
    print(f"  {key}  at {endpoint}")
    print(f"  {result.files} files, {result.rows} rows, {result.hosts} hosts; checksums and counts "
          f"verified against the manifest")
    print(f"URLs known:          {int(m.urls_known)} ({int(m.urls_gone)} gone)")
    print(f"Fetches planned:     {int(m.planned_total)} of budget {int(m.budget)} "
          f"(refresh {int(m.planned_refresh)}, fast {int(m.planned_fast)}, "
          f"discovery {int(m.planned_discovery)}, audit {int(m.get('planned_audit') or 0)})")
    print(f"Due but carried over: {int(m.carried_over)}")
    print(f"Hosts scheduled:     {int(m.hosts)}")
    print(f"Expected freshness:  {m.expected_freshness:.3f} (importance-weighted, policy "
          f"{m.policy})")
    if pd.notna(m.get("audit_freshness")):
        print(f"Audited freshness:   {m.audit_freshness:.3f} "
              f"[{m.audit_freshness_lo:.3f}, {m.audit_freshness_hi:.3f}] "
              f"from {int(m.audit_n)} audit fetches of {args.date}")
    print(f"Quarantined rows:    {int(m.quarantined_rows)}")
    print(f"Wall time:           {time.monotonic() - t0:.0f} s")
    print("Stop the local S3 server with: bash infra/local_s3.sh stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
