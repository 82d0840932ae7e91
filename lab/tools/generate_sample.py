"""Seeded sample-data generator: D days of crawl history in the data contract.

Usage::

    python -m lab.tools.generate_sample --root DIR --urls 20000 --hosts 200 --days 14 \
        --end-date 2024-01-14 --seed 0

Hosts are processed in chunks of whole shards, so memory is bounded by the
chunk size, not the number of URLs; each chunk's rows are appended as row
groups to one part file per ``dt`` (a new part every ``rows_per_file`` rows).
The data is independent of the chunk size; files are byte-identical for the
same arguments.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from lab.sim.contract import (FETCH_LOG_SCHEMA, FRONTIER_SCHEMA, HOST_POLICY_SCHEMA,
                               IMPORTANCE_SCHEMA, SIGNALS_SCHEMA, PartWriter, partition_dir,
                               write_table)
from lab.sim.legacy import run_history
from lab.sim.params import WebParams
from lab.sim.population import make_hosts
from lab.sim.simulation import Simulation


def shard_chunks(params: WebParams, chunk_pages: int) -> list[list[int]]:
    """Group consecutive shards so each group has about ``chunk_pages`` day-0 pages."""
    hosts = make_hosts(params)
    sizes = np.bincount(hosts.shard, weights=hosts.size)
    chunks, current, total = [], [], 0.0
    for shard, size in enumerate(sizes):
        current.append(shard)
        total += size
        if total >= chunk_pages:
            chunks.append(current)
            current, total = [], 0.0
    if current:
        chunks.append(current)
    return chunks


def generate_sample(root, urls: int = 20_000, hosts: int = 200, days: int = 14,
                    end_date="2024-01-14", seed: int = 0, signal_days: int = 3,
                    chunk_pages: int = 200_000, rows_per_file: int = 5_000_000,
                    **param_overrides) -> dict:
    """Write ``days`` days of history ending ``end_date`` under ``root``.

    Parameters
    ----------
    root : path
        Output directory (contract layout plus ``_truth/``).
    urls, hosts, days, seed : int
        Web size, history length and seed.
    end_date : str or date
        Last ``dt`` written; day 0 of the web is ``end_date - days + 1``.
    signal_days : int
        Number of final days with ``signals/dt=`` partitions.
    chunk_pages : int
        Approximate pages simulated at once (memory bound).
    rows_per_file : int
        Rows per fetch-log part file before a new one starts.
    **param_overrides
        Any other :class:`WebParams` field.

    Returns
    -------
    dict
        Counts, timings and peak RSS of the run.
    """
    if days < 1 or signal_days < 0 or chunk_pages < 1:
        raise ValueError("days and chunk_pages must be >= 1, signal_days >= 0")
    end = dt.date.fromisoformat(end_date) if isinstance(end_date, str) else end_date
    start = end - dt.timedelta(days=days - 1)
    params = WebParams(n_urls=urls, n_hosts=hosts, seed=seed, start=start.isoformat(),
                       **param_overrides)
    root = Path(root)
    t0 = time.perf_counter()
    dates = [params.date_of(d) for d in range(days)]
    logs = [PartWriter(partition_dir(root, "fetch_logs", x), FETCH_LOG_SCHEMA, rows_per_file)
            for x in dates]
    first_signal_day = max(0, days - signal_days)
    sigs = {d: PartWriter(partition_dir(root, "signals", dates[d]), SIGNALS_SCHEMA)
            for d in range(first_signal_day, days)}
    frontier = PartWriter(partition_dir(root, "frontier", dates[-1]), FRONTIER_SCHEMA)
    importance = PartWriter(root / "importance", IMPORTANCE_SCHEMA, rows_per_file=1 << 62)
    truth_pages = PartWriter(root / "_truth" / "pages", _TRUTH_PAGES, rows_per_file=1 << 62)
    policies, host_truth, daily = [], [], []
    n_pages = 0
    for shards in shard_chunks(params, chunk_pages):
        sim = Simulation(params, shards=shards)

        def on_day(day, table, record):
            logs[day].write(table)
            if day in sigs:
                sigs[day].write(sim.signals_table(day))

        run_history(sim, days, on_day)
        frontier.write(sim.frontier_table(days - 1))
        pg = sim.web.pages
        known = np.flatnonzero(pg.discovered < days - 1)
        importance.write(pa.table({"url": pa.array(pg.url[known], pa.string()),
                                   "importance": pa.array(pg.importance[known], pa.float64())}))
        truth_pages.write(pa.Table.from_pandas(sim.web.truth_pages(), preserve_index=False))
        policies.append(sim.web.host_policy())
        host_truth.append(sim.web.truth_hosts())
        daily.append(sim.daily())
        n_pages += sim.web.n_pages
    for w in [*logs, *sigs.values(), frontier, importance, truth_pages]:
        w.close()
    policy = pd.concat(policies, ignore_index=True)
    write_table(pa.Table.from_pandas(policy, preserve_index=False),
                root / "host_policy" / "part-0.parquet", HOST_POLICY_SCHEMA)
    _rename_single(root / "importance")
    _rename_single(root / "_truth" / "pages")
    hosts_df = pd.concat(host_truth, ignore_index=True)
    hosts_df.to_parquet(root / "_truth" / "hosts.parquet", index=False)
    days_df = pd.concat(daily).groupby("day", as_index=False).sum()
    days_df.insert(1, "dt", [params.date_of(d).isoformat() for d in days_df["day"]])
    days_df.to_parquet(root / "_truth" / "daily.parquet", index=False)
    (root / "_truth" / "params.json").write_text(json.dumps(
        {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(params).items()},
        indent=1, sort_keys=True))
    elapsed = time.perf_counter() - t0
    rows = sum(w.rows for w in logs)
    return {"root": str(root), "start": params.start, "end": end.isoformat(), "days": days,
            "hosts": hosts, "pages": n_pages, "fetch_rows": rows,
            "signal_rows": sum(w.rows for w in sigs.values()), "frontier_rows": frontier.rows,
            "seconds": round(elapsed, 3), "rows_per_s": round(rows / elapsed) if elapsed else None,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


_TRUTH_PAGES = pa.schema([
    ("url", pa.string()), ("host", pa.string()), ("section", pa.string()), ("kind", pa.string()),
    ("lam", pa.float64()), ("lam_eff", pa.float64()), ("importance", pa.float64()),
    ("born_day", pa.float64()), ("dies_day", pa.float64()), ("discovered_day", pa.float64()),
    ("gone_status", pa.int32())])


def _rename_single(directory: Path) -> None:
    # The contract names these single-file datasets part-0.parquet.
    src = directory / "part-00000.parquet"
    if src.exists():
        src.rename(directory / "part-0.parquet")


def main(argv=None) -> dict:
    """CLI entry point; prints the summary as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--urls", type=int, default=20_000)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--end-date", default="2024-01-14")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--signal-days", type=int, default=3)
    ap.add_argument("--chunk-pages", type=int, default=200_000)
    args = ap.parse_args(argv)
    summary = generate_sample(args.root, args.urls, args.hosts, args.days, args.end_date,
                              args.seed, args.signal_days, args.chunk_pages)
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
