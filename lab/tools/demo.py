"""The README's demo: a sample web's history, then several days of `airflow dags test
recrawl_daily D` with the simulated fleet executing each published schedule, then a summary
that ends with the next commands to try (each works as printed).

A synthetic web (:mod:`lab.sim`) is crawled by the legacy crawler up to D - ``plan_days``;
state is rebuilt from that history; then for each run date from D - ``plan_days`` to D the
DAG plans and publishes the next day to the loopback S3 server, and (before D) the simulated
fleet reads that day through its manifest and executes it, audit rows included, writing the
fetch logs the next run reads. So the report has audited freshness on ``plan_days`` days
and the forecast each was checked against.

Everything lives under ``var/demo/`` (its config ``var/demo/recrawl.toml``); the S3 server
(moto, loopback) is left running so the published schedules can be inspected;
``bash infra/local_s3.sh stop`` ends it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from jobs.cli import Parser, guarded, iso_date
from jobs.config import load_config, toml_text
from jobs.errors import UsageError
from jobs.paths import schedule_date, schedule_manifest_key, shift_day

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
    """``infra/local_s3.sh start PORT``; its one-line refusal (a port another program holds)
    is the demo's, as a UsageError of --port."""
    out = subprocess.run(["bash", str(REPO / "infra" / "local_s3.sh"), "start", str(port)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        said = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        raise UsageError(f"--port {port}: the local S3 server did not start: "
                         f"{said.removeprefix('local_s3.py: error: ')}")
    return out.stdout.strip().splitlines()[-1]


def demo_overrides(root: Path, endpoint: str) -> list[str]:
    """The demo's config: its local S3 endpoint set explicitly, since the default (empty)
    is AWS itself and a demo must never publish there; the day's three Spark stages in one
    Spark session (``airflow.spark_session = run``: one JVM start a day instead of three;
    ``--set airflow.spark_session=stage`` runs them as three tasks)."""
    if not endpoint:
        raise ValueError("the demo publishes to its loopback S3 server only: endpoint required")
    return [f"paths.root={root}", f"publish.target=s3://{BUCKET}",
            f"publish.endpoint_url={endpoint}", "spark.master=local[2]",
            "airflow.spark_session=run"]


def web_params(urls: int, hosts: int, seed: int, first: str):
    """The demo web's parameters from day ``first``; ValueError names what is out of range."""
    from lab.backtest.loop import PROCESS_SHARES
    from lab.sim import WebParams

    return WebParams(n_urls=urls, n_hosts=hosts, seed=seed, start=first,
                     process_shares=PROCESS_SHARES)


def make_web(root: Path, params, legacy_days: int):
    """The demo's web (``params``, :func:`web_params`), crawled by the legacy crawler for
    ``legacy_days`` from its start: fetch logs, signals, frontier, host policy and importance
    under ``root``; returns the simulation, ready for the fleet to execute the planner's
    schedules."""
    import pyarrow as pa

    from lab.backtest.loop import write_day, write_inputs
    from lab.sim import Simulation, run_history
    from lab.sim.contract import HOST_POLICY_SCHEMA, write_table

    sim = Simulation(params)
    run_history(sim, legacy_days, lambda d, table, rec: write_day(sim, root, d, table))
    write_table(pa.Table.from_pandas(sim.web.host_policy(), preserve_index=False),
                root / "host_policy" / "part-0.parquet", HOST_POLICY_SCHEMA)
    write_inputs(sim, root, legacy_days - 1)
    sim.root = root  # from now on each executed day writes its fetch logs there
    return sim


def fleet_executes(sim, cfg, endpoint: str, day: str) -> int:
    """The simulated fleet reads the published ``schedules/dt=day`` through its manifest
    and executes it (writes ``fetch_logs/dt=day``, signals, frontier); returns its rows."""
    from lab.backtest.loop import write_inputs
    from jobs.verify import read_schedule

    schedule = read_schedule(cfg.publish.target, day, endpoint)
    result = sim.step(day, schedule)
    write_inputs(sim, sim.root, sim.params.day_index(day))
    return len(schedule)


def example_url(cfg, endpoint: str, day: str) -> str:
    """A URL of the published day with a refresh slot (else any slot): explain has
    something to show for it."""
    from jobs.verify import read_schedule

    rows = read_schedule(cfg.publish.target, day, endpoint)
    refresh = rows[rows["lane"] == "refresh"]
    return str(sorted((refresh if len(refresh) else rows)["url"])[0])


def next_commands(workdir: Path, config_path: Path, run_date: str, url: str) -> list[str]:
    """The commands the summary ends with, each runnable as printed from the checkout
    (after the first). Paths are relative to the checkout when the demo's files are in it."""
    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(REPO))
        except ValueError:
            return str(p)

    conf = rel(config_path)
    metrics = rel(workdir / "data" / "metrics")
    query = ("SELECT dt, written_by, planned_total, audit_n, round(audit_freshness, 3) AS audit, "
             "round(expected_freshness, 3) AS expected FROM read_parquet("
             f"'{metrics}/dt=*/*.parquet') ORDER BY dt")
    return [
        f"cd {REPO} && source infra/env.sh",
        f"recrawl explain '{url}' --date {run_date} --config {conf}",
        f"recrawl report --date {run_date} --config {conf} "
        f"--out {rel(workdir / f'report-{run_date}.html')}",
        # one of docs/queries.md's questions, in DuckDB (bash turns each \\" into ")
        'python -c "import duckdb; duckdb.sql(\\"' + query + '\\").show()"',
        f"recrawl status --to {run_date} --config {conf}",
        f"recrawl stats --date {run_date} --config {conf}",
    ]


def main(argv=None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", type=iso_date, default="2026-11-29",
                        help="last logical date D to run")
    parser.add_argument("--urls", type=int, default=20000)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--days", type=int, default=14, help="days of history ending at --date")
    parser.add_argument("--plan-days", type=int, default=3,
                        help="days whose schedule the simulated fleet executes (the DAG runs "
                             "for D-N .. D, N+1 runs); the legacy crawler fetched the days "
                             "before")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, default=int(os.environ.get("LOCAL_S3_PORT", 9000)))
    parser.add_argument("--workdir", default=str(REPO / "var" / "demo"))
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = parser.parse_args(argv)
    if not 0 <= args.plan_days <= args.days - 2:
        parser.error("--plan-days must be between 0 and --days - 2 (a day of history to "
                     "rebuild state from and one the first run updates)")
    if not 0 < args.port < 65536:
        parser.error(f"--port must lie in 1..65535, got {args.port}")
    first = shift_day(args.date, -(args.days - 1))
    try:  # the web's own checks (hosts >= 1, urls >= 2 x hosts, seed >= 0), before the S3 server
        params = web_params(args.urls, args.hosts, args.seed, first)
    except ValueError as err:
        parser.error(f"--urls {args.urls} --hosts {args.hosts} --seed {args.seed}: {err}")
    load_config(None, args.set)  # a bad --set is refused before the S3 server starts
    t0 = time.monotonic()
    # The loopback S3 server accepts any credentials; never pick up real ones here.
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ[key] = value

    workdir = Path(args.workdir).resolve()
    root = workdir / "data"
    shutil.rmtree(workdir / "airflow", ignore_errors=True)  # run records of an earlier demo
    (workdir / "airflow").mkdir(parents=True, exist_ok=True)
    endpoint = start_s3(args.port)
    cfg = load_config(None, demo_overrides(root, endpoint) + args.set)
    config_path = workdir / "recrawl.toml"
    config_path.write_text(toml_text(cfg))

    from jobs.publish import ensure_bucket

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    first_run = shift_day(args.date, -args.plan_days)
    legacy_days = args.days - args.plan_days
    print(f"[demo] generating {args.urls} URLs on {args.hosts} hosts: {legacy_days} days of "
          f"fetch logs {first} .. {first_run} by the legacy crawler (seed {args.seed}) ...",
          flush=True)
    sim = make_web(root, params, legacy_days)
    # Only the demo creates the bucket; in production it exists and publish may not create it.
    ensure_bucket(endpoint, BUCKET)
    log = workdir / f"demo-{args.date}.log"
    log.write_text("")
    before = shift_day(first_run, -1)
    print(f"[demo] rebuilding state from the history {first} .. {before} "
          f"(python -m jobs.rebuild_state) ...", flush=True)
    run_logged([sys.executable, "-m", "jobs.rebuild_state", "--from", first, "--to", before,
                "--config", str(config_path)], dict(os.environ), log)

    env = airflow_env(workdir, config_path, cfg.spark.master)
    print(f"[demo] airflow db migrate (SQLite under {workdir / 'airflow'}) ...", flush=True)
    run_logged([sys.executable, "-m", "airflow", "db", "migrate"], env, log)
    run_date = first_run
    while True:
        t_day = time.monotonic()
        run_logged([sys.executable, "-m", "airflow", "dags", "test", "recrawl_daily", run_date],
                   env, log)
        line = (f"[demo] airflow dags test recrawl_daily {run_date}: published "
                f"schedules/dt={schedule_date(run_date)} ({time.monotonic() - t_day:.0f} s)")
        if run_date >= args.date:
            print(line, flush=True)
            break
        rows = fleet_executes(sim, cfg, endpoint, schedule_date(run_date))
        print(f"{line}; the simulated fleet executed its {rows} rows", flush=True)
        run_date = schedule_date(run_date)

    from jobs import metrics, verify
    day = schedule_date(args.date)
    result = verify.verify(cfg.publish.target, day, endpoint_url=endpoint)
    m = pd.Series(metrics.read(cfg, args.date))  # the committed row, never a stray file
    key = schedule_manifest_key(cfg.publish.target, day)
    audited = [d for d in (shift_day(args.date, -k) for k in range(args.plan_days))
               if pd.notna(metrics.read(cfg, d).get("audit_freshness"))]
    print()
    print(f"Schedule for {day} (planned by the run for {args.date}) published to:")
    print(f"  {key}  at {endpoint}")
    print(f"  {result.files} files, {result.rows} rows, {result.hosts} hosts; checksums and counts "
          f"verified against the manifest")
    print(f"DAG runs:            {first_run} .. {args.date} ({args.plan_days + 1}), the fleet "
          f"executing each schedule before {day}; log {log}")
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
              f"from {int(m.audit_n)} audit fetches of {args.date}; audited days: "
              f"{len(audited)}")
    print(f"Quarantined rows:    {int(m.quarantined_rows)}")
    print(f"Config:              {config_path} (paths, S3 endpoint; the loopback server needs "
          f"no credentials)")
    print(f"Wall time:           {time.monotonic() - t0:.0f} s")
    print()
    print("Next commands (run them as printed; the first once per shell):")
    commands = next_commands(workdir, config_path, args.date,
                             example_url(cfg, endpoint, day))
    for c in commands:
        print(f"  {c}")
    print(f"Stop the local S3 server with: bash infra/local_s3.sh stop {args.port}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
