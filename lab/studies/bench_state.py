"""Synthetic state (and frontier) tables for allocation benchmarks at 10M+ URLs.

Building state the honest way (generate_sample + update_state for two days) takes
about an hour per 10M URLs on 2 cores, and allocate's cost depends only on the rows it
reads, not on how they were estimated. This writes ``state/dt=D`` directly, in the
STATE contract, chunk by chunk (memory bounded by ``chunk_rows``):

* host sizes log-normal (sigma 1.5), so a few large hosts hit their cap;
* λ log-normal, median 0.2 changes/day, sigma 1.5 (as the simulator's web);
* importance log-normal (sigma 1); 1% of pages in the fast lane;
* last fetch uniform over the page's current interval, half the pages with an ETag;
* the change statistics zero (allocate reads lambda_hat, not the statistics).

``frontier/dt=D`` gets ``frontier_share × urls`` new URLs on the same hosts. Seeded and
deterministic for the same arguments.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from jobs import partitions, schemas, storage
from jobs.paths import DAY_S, day_bounds, partition


def host_sizes(urls: int, hosts: int, rng) -> np.ndarray:
    """Log-normal host sizes summing exactly to ``urls`` (every host >= 1 page)."""
    raw = rng.lognormal(0.0, 1.5, hosts)
    sizes = np.maximum(1, np.floor(raw / raw.sum() * (urls - hosts)).astype(np.int64) + 1)
    sizes[np.argmax(sizes)] += urls - sizes.sum()
    return sizes


def _state_chunk(host_ids, page_ids, run_date, run_end, rng, schema):
    n = host_ids.size
    lam = rng.lognormal(np.log(0.2), 1.5, n)
    interval = np.clip(DAY_S / np.maximum(lam, 1e-3), 3600.0, 90 * DAY_S)
    last_fetch = run_end - rng.uniform(0.0, 1.0, n) * interval
    ts = (last_fetch * 1e6).astype("int64")
    first = ts - np.int64(30 * DAY_S * 1e6)
    host = np.char.add("h", host_ids.astype(str))
    url = np.char.add(np.char.add("https://", host), np.char.add(".example/p", page_ids.astype(str)))
    etag = np.where(rng.uniform(size=n) < 0.5, np.char.add('"', page_ids.astype(str)), None)
    cols = {
        "url": url, "host": host, "first_seen": first, "last_fetch_at": ts,
        "last_status": np.full(n, 200, np.int32), "last_success_at": ts, "last_change_at": ts,
        "last_known_at": ts, "etag": etag, "last_modified": None, "content_hash": None,
        "interval_s": interval, "lambda_hat": lam, "lambda_lo": lam / 3, "lambda_hi": lam * 3,
        "lambda_prior": None, "n_fetches": np.full(n, 10), "n_observations": np.full(n, 9),
        "n_changes": np.zeros(n, np.int64), "exposure_days": np.full(n, 30.0),
        "n_errors": np.zeros(n, np.int64), "consecutive_gone": np.zeros(n, np.int32),
        "gone": np.zeros(n, bool), "signal_claim_at": None, "pending_signal_at": None,
        "signal_unchanged_at": None, "fingerprint_version": None,
        "importance": rng.lognormal(0.0, 1.0, n),
        "lane": np.where(rng.uniform(size=n) < 0.01, "fast", "refresh"),
        "updated_dt": np.full(n, np.datetime64(run_date), "datetime64[D]"),
    }
    arrays = []
    for field in schema:
        value = cols.get(field.name, np.zeros(n))  # the change statistics
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        else:
            arrays.append(pa.array(value, type=field.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_hosts(root: str, run_date: str, hosts: int) -> None:
    """hosts/dt=D, which allocate requires: every host trusts both validators, full cap."""
    names = np.char.add("h", np.arange(hosts).astype(str))
    given = {"host": names, "validator_class": np.full(hosts, "honest_etag"),
             "trust_etag": np.ones(hosts, bool), "trust_lm": np.ones(hosts, bool),
             "audit_wanted": np.zeros(hosts, bool), "cap_factor": np.ones(hosts),
             "signal_accuracy": np.full(hosts, 0.5), "signal_trusted": np.zeros(hosts, bool),
             "updated_dt": np.full(hosts, np.datetime64(run_date), "datetime64[D]")}
    schema = schemas.HOSTS.arrow_schema()
    table = pa.Table.from_arrays(
        [pa.array(given[f.name], type=f.type) if f.name in given
         else pa.nulls(hosts, f.type) if f.nullable else pa.array(np.zeros(hosts), type=f.type)
         for f in schema], schema=schema)
    hosts_dir = partition(root, "hosts", run_date)
    storage.delete_dir(hosts_dir)
    storage.write_parquet(f"{hosts_dir}/part-00000.parquet", table)
    partitions.commit_files(hosts_dir, "hosts", storage.list_parquet_files(hosts_dir))


def write_synthetic(root: str, run_date: str, urls: int, hosts: int, seed: int = 0,
                    frontier_share: float = 0.05, chunk_rows: int = 1_000_000) -> dict:
    """Write state/dt=run_date and frontier/dt=run_date under ``root``; returns row counts."""
    rng = np.random.default_rng(seed)
    sizes = host_sizes(urls, hosts, rng)
    host_of = np.repeat(np.arange(hosts), sizes)
    run_end = day_bounds(run_date)[1].timestamp()
    schema = schemas.STATE.arrow_schema()
    state_dir = partition(root, "state", run_date)
    storage.delete_dir(state_dir)
    for part, start in enumerate(range(0, urls, chunk_rows)):
        ids = np.arange(start, min(urls, start + chunk_rows))
        table = _state_chunk(host_of[ids], ids, run_date, run_end, rng, schema)
        storage.write_parquet(f"{state_dir}/part-{part:05d}.parquet", table)
    partitions.commit_files(state_dir, "state", storage.list_parquet_files(state_dir))
    _write_hosts(root, run_date, hosts)
    n_frontier = int(frontier_share * urls)
    frontier_dir = partition(root, "frontier", run_date)
    storage.delete_dir(frontier_dir)
    if n_frontier:
        ids = np.arange(urls, urls + n_frontier)
        hosts_new = rng.integers(0, hosts, n_frontier).astype(str)
        url = np.char.add(np.char.add("https://h", hosts_new),
                          np.char.add(".example/p", ids.astype(str)))
        imp = np.where(rng.uniform(size=n_frontier) < 0.3, np.nan, rng.lognormal(0, 1, n_frontier))
        table = pa.Table.from_arrays(
            [pa.array(url), pa.array(np.full(n_frontier, int((run_end - DAY_S) * 1e6)),
                                     pa.timestamp("us", tz="UTC")),
             pa.array(imp, from_pandas=True)],
            schema=schemas.FRONTIER.arrow_schema())
        storage.write_parquet(f"{frontier_dir}/part-00000.parquet", table)
    return {"state_rows": urls, "frontier_rows": n_frontier, "hosts": hosts}
