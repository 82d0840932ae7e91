"""Canonical URLs in Spark (jobs/canonical.py): the twin against the pure function, the
input boundary, and the one-time migration of a state partition."""
from __future__ import annotations

import datetime as dt
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq

from jobs import ingest, partitions, schemas
from jobs.canonical import canonical_url_col, canonicalize_state
from jobs.core.urls import canonical_url
from jobs.fleet.fetch_log import FetchLogWriter
from tests.conftest import make_config
from tests.core.test_urls import _spellings

UTC = dt.timezone.utc


def test_the_spark_twin_equals_the_pure_function_on_generated_urls(spark):
    pairs = _spellings(random.Random(11), 3000)
    urls = [s for s, _ in pairs] + [p for _, p in pairs] + [
        None, "ftp://h.example/", "http://u:p@h.example/", "http://bücher.example/ä#x",
        "http://h.example:8080/a/../%7e?b=%2f"]
    df = spark.createDataFrame([(i, u) for i, u in enumerate(urls)], "i long, url string")
    got = {r["i"]: r["c"] for r in df.select("i", canonical_url_col("url").alias("c")).collect()}
    assert [got[i] for i in range(len(urls))] == [canonical_url(u) for u in urls]


def test_fetch_logs_of_two_spellings_become_one_page_and_importance_follows(spark, tmp_path):
    cfg = make_config(tmp_path / "data")
    day = "2026-11-20"
    with FetchLogWriter(cfg.paths.table("fetch_logs", day), date=day) as log:
        for hour, url in ((1, "https://H0001.EXAMPLE.COM./a"), (2, "https://h0001.example.com/a"),
                          (3, "https://h0001.example.com:443/a#frag")):
            log.write({"url": url, "fetched_at": dt.datetime(2026, 11, 20, hour, tzinfo=UTC),
                       "status": 200, "conditional": False, "etag": None,
                       "last_modified": None, "content_hash": "h", "bytes": 1})
    clean, bad = ingest.read_fetch_logs(spark, cfg, day)
    assert {r["url"] for r in clean.collect()} == {"https://h0001.example.com/a"}
    assert clean.count() == 3 and bad.count() == 0
    os.makedirs(cfg.paths.table("importance"))
    pq.write_table(pa.table({"url": ["HTTPS://h0001.example.com./a", "http://h2.example"],
                             "importance": [2.0, 1.0]}),
                   f"{cfg.paths.table('importance')}/part-0.parquet")
    imp, _ = ingest.read_importance(spark, cfg, day)  # the flat layout: one snapshot for every day
    assert sorted((r["url"], r["importance"]) for r in imp.collect()) == [
        ("http://h2.example/", 1.0), ("https://h0001.example.com/a", 2.0)]


def _state_row(url, **values):
    t = dt.datetime(2026, 11, 1, tzinfo=UTC)
    default = {"string": "x", "int": 0, "int32": 0, "bool": False, "float": 0.0,
               "timestamp": t, "date": dt.date(2026, 11, 20)}
    row = {c.name: (None if c.nullable else default[c.kind]) for c in schemas.STATE.columns}
    row.update(url=url, host="h.example", **values)
    return row


def test_canonicalize_state_merges_the_rows_of_one_page_by_the_documented_rule(spark, tmp_path):
    cfg = make_config(tmp_path / "data")
    path = cfg.paths.table("state", "2026-11-20")
    t = lambda d: dt.datetime(2026, 11, d, tzinfo=UTC)  # noqa: E731
    rows = [_state_row("https://H.EXAMPLE./a", first_seen=t(2), last_success_at=t(19),
                       last_fetch_at=t(19), etag='"new"', n_fetches=5, n_errors=1,
                       lambda_hat=0.5, importance=1.0),
            _state_row("https://h.example/a", first_seen=t(1), last_success_at=t(10),
                       last_fetch_at=t(10), etag='"old"', n_fetches=3, n_errors=0,
                       lambda_hat=0.1, importance=3.0),
            _state_row("https://h.example:443", first_seen=t(4), n_fetches=2),
            _state_row("https://h.example/b", first_seen=t(5), n_fetches=1)]
    file = f"{path}/part-00000-legacy.parquet"
    os.makedirs(path)
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas.STATE.arrow_schema()), file)
    partitions.commit_files(path, "state", [file])
    record = canonicalize_state(spark, cfg, "2026-11-20")
    assert record == {"date": "2026-11-20", "rows_before": 4, "rows_after": 3,
                      "urls_rewritten": 2, "rows_merged": 2, "pages_merged": 1}
    state = {r["url"]: r for f in partitions.committed_files(path, "state")
             for r in pq.read_table(f).to_pylist()}
    assert set(state) == {"https://h.example/a", "https://h.example/", "https://h.example/b"}
    a = state["https://h.example/a"]
    utc = lambda v: v.replace(tzinfo=UTC)  # noqa: E731 (Spark writes UTC without a zone)
    assert (a["etag"], a["lambda_hat"], utc(a["last_success_at"])) == ('"new"', 0.5, t(19))
    assert (utc(a["first_seen"]), a["n_fetches"], a["n_errors"], a["importance"]) == (
        t(1), 8, 1, 3.0)
    assert state["https://h.example/"]["n_fetches"] == 2
    schemas.check_schema(schemas.STATE, pq.read_schema(
        partitions.committed_files(path, "state")[0]), path)
    again = canonicalize_state(spark, cfg, "2026-11-20")  # idempotent
    assert (again["rows_after"], again["urls_rewritten"], again["pages_merged"]) == (3, 0, 0)
