"""`recrawl intake` with a real Spark session: documents written with the fleet's
DocumentWriter (hostile ones included: a 50 MB sitemap, a gzip bomb, billion laughs, a
cross-host sitemap, a robots.txt asking for 1e9 s), read back by the planner's own readers
(ingest.read_signals, ingest.read_host_policy) as update_state reads them."""
from __future__ import annotations

import gzip
import json
import os
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import intake, partitions, schemas, storage
from jobs.fleet.documents import DocumentWriter
from tests.conftest import REPO, make_config

FIXTURES = os.path.join(REPO, "tests", "fixtures", "intake")
D, D0 = "2026-11-29", "2026-11-28"
AT = datetime(2026, 11, 29, 12, tzinfo=timezone.utc)


def fixture(name):
    with open(os.path.join(FIXTURES, name), "rb") as fh:
        return fh.read()


def big_sitemap(n: int) -> bytes:
    head = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    return head + b"".join(b"<url><loc>https://big.example/p/%09d</loc><lastmod>2026-11-28"
                           b"</lastmod></url>\n" % i for i in range(n)) + b"</urlset>"


def write_docs(root, day=D, extra=()):
    big = big_sitemap(650_000)  # 54.6 MB: over max_body_bytes (50 MiB, sitemaps.org's limit)
    assert len(big) > 52_428_800
    rows = [
        ("https://a.example/robots.txt", "robots", 200, fixture("robots_1e9.txt")),
        ("https://b.example/robots.txt", "robots", 200, fixture("robots_agent.txt")),
        ("https://c.example/robots.txt", "robots", 404, None),
        ("https://d.example/robots.txt", "robots", 503, None),
        ("https://a.example/sitemap.xml", "sitemap", 200, fixture("sitemap.xml")),
        ("https://a.example/sitemap_index.xml", "sitemap", 200, fixture("sitemap_index.xml")),
        ("https://a.example/feed.atom", "feed", 200, fixture("atom.xml")),
        ("https://a.example/rss.xml", "feed", 200, gzip.compress(fixture("rss.xml"))),
        ("https://a.example/lol.xml", "sitemap", 200, fixture("billion_laughs.xml")),
        ("https://a.example/garbage.xml", "sitemap", 200, fixture("garbage.bin")),
        ("https://big.example/sitemap.xml", "sitemap", 200, big),
        ("https://big.example/bomb.xml.gz", "sitemap", 200,  # 60 KB expanding to 60 MB
         gzip.compress(b"<urlset>" + b" " * 60_000_000 + b"</urlset>")),
        ("https://big.example/many.xml", "sitemap", 200, big_sitemap(60_000)),
        *extra,
    ]
    with DocumentWriter(f"{root}/documents/dt={day}", date=day, rows_per_part=4) as w:
        for url, kind, status, body in rows:
            w.write({"url": url, "kind": kind, "fetched_at": AT, "status": status,
                     "content_type": "application/xml", "body": body})
    return len(rows)


def read_table(path):
    return pa.concat_tables([pq.read_table(f) for f in partitions.committed_files(path, "t")]
                            ).to_pylist()


@pytest.fixture(scope="module")
def day(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("intake")
    # upstream's earlier host policy snapshot: an operator row and an old robots row of b
    pq.write_table(pa.Table.from_pylist([
        {"host": "OPS.example.", "crawl_delay_s": 20.0, "max_fetches_per_day": 100,
         "source": None},
        {"host": "b.example", "crawl_delay_s": 99.0, "max_fetches_per_day": None,
         "source": "robots"},
        {"host": "c.example", "crawl_delay_s": 50.0, "max_fetches_per_day": None,
         "source": "robots"},
        {"host": "d.example", "crawl_delay_s": 60.0, "max_fetches_per_day": None,
         "source": "robots"},
    ], schema=schemas.HOST_POLICY.arrow_schema()), _mkdir(root / "host_policy" / f"dt={D0}"))
    (root / "host_policy" / f"dt={D0}" / "_SUCCESS").touch()  # committed, as upstream's must be
    # upstream's own signals of D (IndexNow): kept beside intake's
    pq.write_table(pa.Table.from_pylist([
        {"url": "https://z.example/pushed", "signaled_at": AT, "source": "indexnow"}],
        schema=schemas.SIGNALS.arrow_schema()), _mkdir(root / "signals" / f"dt={D}"))
    write_docs(root)
    cfg = make_config(root, "intake.enabled=true",
                      "spark.settings.spark.sql.shuffle.partitions=2")
    record = intake.run(cfg, D, spark)
    return root, cfg, record


def _mkdir(path):
    path.mkdir(parents=True)
    return str(path / "part-upstream.parquet")


def test_signals_are_the_documents_claims_and_upstreams(day, spark):
    from jobs import ingest

    root, cfg, record = day
    clean, bad = ingest.read_signals(spark, cfg, D)
    assert bad.count() == 0  # intake's signals pass the planner's own signal rules
    got = {(r["url"], r["source"]): r["signaled_at"].replace(tzinfo=timezone.utc)
           if r["signaled_at"].tzinfo is None else r["signaled_at"] for r in clean.collect()}
    utc = timezone.utc
    assert got[("https://a.example/news/1", "sitemap")] == datetime(2026, 11, 28, 8, 30, tzinfo=utc)
    assert got[("https://a.example/posts/1", "feed")] == datetime(2026, 11, 29, 7, tzinfo=utc)
    assert got[("https://a.example/r/1", "feed")] == datetime(2026, 11, 28, 10, tzinfo=utc)
    assert ("https://z.example/pushed", "indexnow") in got
    assert len(got) == 5 + 2 + 1 + 1  # sitemap, atom, rss (gzip), upstream
    assert record["signals"] == 8  # intake's own rows


def test_hostile_documents_and_entries_are_quarantined_by_name(day, spark):
    root, cfg, record = day
    q = spark.read.parquet(f"{root}/quarantine/dt={D}/source=documents")
    by = {}
    for r in q.collect():
        by.setdefault(r["reason"], []).append(r["url"])
    # > 50 MiB stored: refused in Spark, never parsed; the bomb: stopped while streaming
    assert sorted(by["body_too_large"]) == ["https://big.example/bomb.xml.gz",
                                            "https://big.example/sitemap.xml"]
    assert sorted(by["too_many_urls"]) == ["https://big.example/many.xml"]
    assert by["xml_forbidden"] == ["https://a.example/lol.xml"]
    assert by["not_xml"] == ["https://a.example/garbage.xml"]
    assert sorted(by["cross_host_url"]) == ["https://b.example/posts/3",
                                            "https://evil.example/sitemap.xml",
                                            "https://other.example/spam"]
    assert set(by["future_lastmod"]) == {"https://a.example/future", "https://a.example/r/3"}
    assert "https://a.example/garbled" in by["bad_lastmod"]
    big = json.loads(next(r["row_json"] for r in q.collect() if r["reason"] == "body_too_large"))
    assert "body" not in big and big["body_bytes"] > 52_428_800
    assert record["quarantine_reasons"]["body_too_large"] == 2
    assert record["quarantined_rows"] == q.count() == sum(record["quarantine_reasons"].values())
    assert record["entries_skipped_no_date"] == 2


def test_host_policy_snapshot_carries_upstream_and_replaces_robots_rows(day, spark):
    from jobs import ingest

    root, cfg, record = day
    rows = {r["host"]: r for r in read_table(f"{root}/host_policy/dt={D}")}
    assert rows["a.example"]["crawl_delay_s"] == cfg.politeness.max_crawl_delay_s  # 1e9 clamped
    assert rows["b.example"]["crawl_delay_s"] == 7.5  # the fleet's own group; old 99 replaced
    assert "c.example" not in rows  # robots.txt 404: no rules, the robots delay ends
    assert rows["d.example"]["crawl_delay_s"] == 60.0  # 503: unreachable, the old row stays
    assert rows["OPS.example."]["max_fetches_per_day"] == 100  # upstream's row, as written
    assert {h for h, r in rows.items() if r["source"] == "robots"} == {"a.example", "b.example",
                                                                       "d.example"}
    assert record["robots"] == {"clamped_high": 1, "set": 1, "no_robots": 1, "keep": 1}
    clean, bad = ingest.read_host_policy(spark, cfg, D)  # the snapshot intake wrote for D
    assert bad.count() == 0


def test_document_refs_name_the_sitemaps_to_fetch(day):
    root, cfg, record = day
    refs = read_table(f"{root}/document_refs/dt={D}")
    assert sorted(r["url"] for r in refs) == ["https://a.example/sitemap-news.xml.gz",
                                              "https://a.example/sitemap.xml",
                                              "https://a.example/sitemap_index.xml"]
    assert all(r["kind"] == "sitemap" and r["host"] == "a.example" for r in refs)


def test_a_rerun_commits_the_same_rows_and_keeps_upstreams_files(day, spark):
    root, cfg, record = day
    again = intake.run(cfg, D, spark)
    assert again == record
    files = partitions.committed_files(f"{root}/signals/dt={D}", "signals")
    assert sum(f.endswith("part-upstream.parquet") for f in files) == 1
    assert storage.list_parquet_files(f"{root}/signals/dt={D}") == files  # no stray files


def test_the_next_day_carries_the_snapshot_forward(day, spark, tmp_path):
    root, cfg, record = day
    nxt = "2026-11-30"
    at = datetime(2026, 11, 30, 6, tzinfo=timezone.utc)
    with DocumentWriter(f"{root}/documents/dt={nxt}", date=nxt) as w:
        w.write({"url": "https://b.example/robots.txt", "kind": "robots", "fetched_at": at,
                 "status": 200, "body": b"User-agent: *\n"})
    out = intake.run(cfg, nxt, spark)
    rows = {r["host"]: r for r in read_table(f"{root}/host_policy/dt={nxt}")}
    assert "b.example" not in rows  # no Crawl-delay any more: the host's default applies
    assert rows["a.example"]["crawl_delay_s"] == cfg.politeness.max_crawl_delay_s
    assert rows["OPS.example."]["crawl_delay_s"] == 20.0
    assert out["signals"] == 0 and out["quarantined_rows"] == 0


def test_a_missing_documents_partition_is_refused(day, spark):
    from jobs.errors import SchemaError

    root, cfg, record = day
    with pytest.raises(SchemaError, match="documents"):
        intake.run(cfg, "2026-12-05", spark)


def test_a_declared_outage_day_needs_no_documents(tmp_path):
    from jobs import outage
    from jobs.runlog import read_stage_record

    cfg = make_config(tmp_path, "intake.enabled=true")
    outage.declare(cfg, "2026-12-01", "fleet down")
    assert intake.run(cfg, "2026-12-01") == {"no_fetches": True}  # no Spark session started
    assert read_stage_record(cfg, "2026-12-01", "intake") == {"no_fetches": True}


def test_validate_logs_checks_the_documents_footers_when_intake_is_on(tmp_path):
    from jobs import validate_logs
    from jobs.errors import SchemaError

    write = lambda table: (tmp_path / "fetch_logs" / f"dt={D}").mkdir(parents=True) or \
        pq.write_table(table, str(tmp_path / "fetch_logs" / f"dt={D}" / "part-0.parquet"))
    write(pa.Table.from_pylist([{"url": "https://a.example/", "fetched_at": AT, "status": 200,
                                 "conditional": False, "bytes": 1}],
                               schema=schemas.FETCH_LOG.arrow_schema(all_nullable=True)))
    off = validate_logs.run(make_config(tmp_path), D)
    assert "documents_files" not in off
    with pytest.raises(SchemaError, match="documents"):
        validate_logs.run(make_config(tmp_path, "intake.enabled=true"), D)
    write_docs_small(tmp_path)
    assert validate_logs.run(make_config(tmp_path, "intake.enabled=true"), D)[
        "documents_files"] == 1


def write_docs_small(root):
    with DocumentWriter(f"{root}/documents/dt={D}", date=D) as w:
        w.write({"url": "https://a.example/robots.txt", "kind": "robots", "fetched_at": AT,
                 "status": 200, "body": b"User-agent: *\n"})


def test_a_flat_host_policy_is_refused_up_front_when_intake_writes_dated_snapshots(tmp_path):
    """Intake writes host_policy/dt=D; beside undated files that would be both layouts at
    once, which every later run refuses. So intake and validate_logs (the DAG's first gate
    with intake.enabled) refuse the flat layout by name before anything is written."""
    from jobs import validate_logs
    from jobs.errors import SchemaError

    (tmp_path / "host_policy").mkdir()
    pq.write_table(pa.Table.from_pylist([{"host": "a.example", "crawl_delay_s": 5.0,
                                          "max_fetches_per_day": None, "source": None}],
                                        schema=schemas.HOST_POLICY.arrow_schema()),
                   str(tmp_path / "host_policy" / "policy.parquet"))
    write_docs_small(tmp_path)
    cfg = make_config(tmp_path, "intake.enabled=true")
    for stage in (lambda: intake.run(cfg, D), lambda: validate_logs.run(cfg, D)):
        with pytest.raises(SchemaError, match="undated snapshot files .*policy.parquet.* while "
                                              "intake writes host_policy/dt=D"):
            stage()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents", "host_policy"]
