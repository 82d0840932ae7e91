"""Small hand-made inputs in the contract format, for Spark job tests."""
from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jobs import schemas


def write(root, table: str, rows: list[dict], dt: str | None = None, name="part-0.parquet",
          contract=None):
    contract = contract or {c.name: c for c in schemas.CONTRACTS.values()}[table]
    path = os.path.join(root, table, f"dt={dt}") if dt else os.path.join(root, table)
    os.makedirs(path, exist_ok=True)
    df = pd.DataFrame(rows)
    for col in contract.columns:
        if col.name not in df.columns and col.required:
            df[col.name] = None
    table_ = pa.Table.from_pandas(df[[c.name for c in contract.columns if c.name in df.columns]],
                                  schema=pa.schema([f.with_nullable(True) for f in contract.arrow_schema()
                                                    if f.name in df.columns]),
                                  preserve_index=False)
    pq.write_table(table_, os.path.join(path, name))
    return os.path.join(path, name)


def write_committed(root, table: str, rows: list[dict], dt: str) -> str:
    """Write a table recrawl itself produces (state, hosts) as a committed partition."""
    from jobs import partitions

    path = write(root, table, rows, dt=dt)
    partitions.commit_files(os.path.dirname(path), table, [path])
    return path


def fetch(url, at, status=200, etag=None, lm=None, h=None, nbytes=1000, conditional=False):
    return {"url": url, "fetched_at": pd.Timestamp(at, tz="UTC"), "status": status,
            "conditional": conditional, "etag": etag, "last_modified": lm, "content_hash": h,
            "bytes": nbytes}


LM = "Sun, 01 Nov 2026 00:00:00 GMT"


def build(root):
    """Two days of logs on three hosts, plus importance, host policy and a frontier."""
    day1 = [fetch(f"https://news.example/p{i}", f"2026-11-01T0{i}:00", etag=f'"n{i}"',
                  h=f"n{i}-v1") for i in range(6)]
    day1 += [fetch(f"https://docs.example/d{i}", "2026-11-01T10:00", lm=LM, h=f"d{i}")
             for i in range(4)]
    day1 += [fetch("https://evil.example/x", "2026-11-01T11:00", etag='"bad\r\nX-Injected: 1"',
                   h="e1")]
    write(root, "fetch_logs", day1, dt="2026-11-01")
    day2 = [fetch(f"https://news.example/p{i}", f"2026-11-02T0{i}:30",
                  status=200 if i % 2 else 304, etag=f'"n{i}b"' if i % 2 else None,
                  h=f"n{i}-v2" if i % 2 else None, conditional=True) for i in range(6)]
    day2 += [fetch(f"https://docs.example/d{i}", "2026-11-02T10:00", status=304, lm=LM,
                   conditional=True) for i in range(4)]
    day2 += [fetch("https://evil.example/x", "2026-11-02T11:00", etag='"bad\r\nX-Injected: 1"',
                   h="e1")]
    # Bad rows, one per rule.
    day2 += [fetch(None, "2026-11-02T01:00"),
             fetch("not a url", "2026-11-02T01:00"),
             fetch("https://news.example/p0", "2026-11-02T02:00", status=999),
             fetch("https://news.example/p0", "2026-11-02T03:00", nbytes=-5),
             fetch("https://news.example/p0", "2026-11-03T00:00")]
    write(root, "fetch_logs", day2, dt="2026-11-02")
    write(root, "importance", [{"url": f"https://news.example/p{i}", "importance": 10.0 - i}
                               for i in range(6)] + [{"url": "https://docs.example/d0",
                                                      "importance": -1.0}])
    write(root, "host_policy", [{"host": "news.example", "crawl_delay_s": 600.0,
                                 "max_fetches_per_day": None},
                                {"host": "docs.example", "crawl_delay_s": 5.0,
                                 "max_fetches_per_day": 2},
                                {"host": "bad.example", "crawl_delay_s": 0.0,
                                 "max_fetches_per_day": None}])
    write(root, "frontier", [{"url": "https://news.example/new1",
                              "discovered_at": pd.Timestamp("2026-11-02T05:00", tz="UTC"),
                              "importance": 5.0},
                             {"url": "https://news.example/p0",  # already known: deduplicated
                              "discovered_at": pd.Timestamp("2026-11-02T05:00", tz="UTC"),
                              "importance": 5.0}], dt="2026-11-02")
