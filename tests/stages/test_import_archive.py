"""recrawl import-warc / import-cdx (jobs/import_archive.py) on files written by warcio."""
from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from jobs import console, ingest, schemas, storage
from jobs.core.archive import ARCHIVE_DIGEST_VERSION
from jobs.errors import ArchiveReadError, ImportConflict
from jobs.fleet.fetch_log import FetchLogWriter
from jobs.import_archive import import_files
from tests.conftest import make_config
from tests.stages.archive_files import LM, Warc, sample_warc

D1, D2 = "2026-11-20", "2026-11-21"


def _day(cfg, day):
    """The day's rows as ingest's own contract check reads them (footers, versions)."""
    footers = ingest.checked_footers(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", day), True)
    rows = [r for f in footers for r in pq.read_table(f.path).to_pylist()]
    return sorted(rows, key=lambda r: (r["fetched_at"], r["url"]))


@pytest.fixture
def cfg(tmp_path):
    return make_config(tmp_path / "data")


@pytest.mark.parametrize("gzip", [True, False])
def test_warc_records_become_fleet_valid_fetch_logs_one_partition_per_day(cfg, tmp_path, gzip):
    warc = sample_warc(tmp_path / ("crawl.warc.gz" if gzip else "crawl.warc"), gzip)
    record = import_files(cfg, [str(warc)], "warc")
    (f,) = record["files"]
    assert record["days"] == [D1, D2] and f["rows_by_day"] == {D1: 3, D2: 3}
    assert f["records"] == 10 and f["truncated"] is None
    assert f["skipped"] == {"non_http": 1, "record_metadata": 1, "record_request": 1,
                            "record_warcinfo": 1}
    day1, day2 = _day(cfg, D1), _day(cfg, D2)
    assert {r["fingerprint_version"] for r in day1 + day2} == {ARCHIVE_DIGEST_VERSION}
    first, b, gone = day1
    # The URL in its canonical form; validators and status from the recorded response.
    assert first["url"] == "https://h1.example.com/a" and first["host"] == "h1.example.com"
    assert (first["status"], first["etag"], first["last_modified"]) == (200, '"v1"', LM)
    assert first["content_hash"].startswith("sha1:") and first["bytes"] == 28
    assert first["conditional"] is False
    assert b["url"] == "http://h2.example.com/b" and b["fetched_at"].microsecond == 250_000
    assert (gone["status"], gone["content_hash"]) == (404, None)
    revisit, not_modified, changed = day2
    # A revisit repeats the digest of the body it had archived: a fetch that found it
    # unchanged. A 304 is a conditional fetch without a content hash.
    assert (revisit["status"], revisit["content_hash"]) == (200, first["content_hash"])
    assert (revisit["etag"], revisit["last_modified"]) == ('"v1"', LM)
    assert (not_modified["status"], not_modified["conditional"]) == (304, True)
    assert not_modified["content_hash"] is None and not_modified["etag"] == '"b"'
    assert changed["content_hash"] != first["content_hash"] and changed["etag"] == '"v2"'


def test_a_rerun_replaces_the_files_rows_and_keeps_other_files_rows(cfg, tmp_path):
    warc = str(sample_warc(tmp_path / "crawl.warc.gz"))
    other = Warc(tmp_path / "other.warc.gz").response(
        "https://h3.example.com/", "2026-11-20T08:00:00Z", b"x").close()
    import_files(cfg, [warc, str(other)], "warc")
    before = _day(cfg, D1)
    again = import_files(cfg, [warc], "warc")
    assert _day(cfg, D1) == before and len(before) == 4
    base = cfg.paths.table("fetch_logs", D1)
    markers = sorted(n for n in os.listdir(base) if n.startswith("_IMPORT-"))
    assert len(markers) == 2
    mine = storage.read_json(f"{base}/_IMPORT-{again['files'][0]['source_id']}.json")
    parts = [n for n in os.listdir(base) if n.endswith(".parquet")]
    assert {e["name"] for e in mine["files"]} <= set(parts) and len(parts) == 2
    assert mine["rows"] == 3 and mine["fingerprint_version"] == ARCHIVE_DIGEST_VERSION


def test_buffered_rows_are_bounded_and_every_part_is_committed(cfg, tmp_path, monkeypatch):
    from jobs import import_archive

    monkeypatch.setattr(import_archive, "MAX_BUFFERED_ROWS", 2)
    warc = sample_warc(tmp_path / "crawl.warc.gz")
    import_files(cfg, [str(warc)], "warc")
    base = cfg.paths.table("fetch_logs", D1)
    parts = sorted(n for n in os.listdir(base) if n.endswith(".parquet"))
    (marker,) = [n for n in os.listdir(base) if n.startswith("_IMPORT-")]
    listed = storage.read_json(f"{base}/{marker}")["files"]
    assert len(parts) >= 2 and sorted(e["name"] for e in listed) == parts
    assert sum(e["rows"] for e in listed) == len(_day(cfg, D1)) == 3


def test_a_truncated_warc_imports_what_came_before_and_says_where_it_stopped(cfg, tmp_path,
                                                                             capsys):
    whole = sample_warc(tmp_path / "whole.warc.gz")
    data = whole.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(data[:-60])  # inside the last record's gzip member
    rc = console.main(["import-warc", str(cut), "--set", f"paths.root={cfg.paths.root}"])
    assert rc == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    (f,) = record["files"]
    assert f["truncated"]["records_read"] == 9 and f["rows_by_day"] == {D1: 3, D2: 2}
    assert record["truncated_files"] == 1
    assert "stopped reading" in captured.err and "9 records before it imported" in captured.err


def test_a_file_that_is_not_a_warc_is_a_named_refusal_and_writes_nothing(cfg, tmp_path, capsys):
    junk = tmp_path / "junk.warc.gz"
    junk.write_bytes(b"this is not a web archive\n" * 20)
    with pytest.raises(ArchiveReadError):
        import_files(cfg, [str(junk)], "warc")
    rc = console.main(["import-warc", str(junk), "--set", f"paths.root={cfg.paths.root}"])
    assert rc == 2
    assert "ArchiveReadError" in capsys.readouterr().err
    assert not os.path.exists(cfg.paths.table("fetch_logs"))


def test_a_day_with_the_fleets_own_logs_is_refused_and_nothing_of_the_file_stays(cfg, tmp_path):
    from datetime import datetime, timezone

    with FetchLogWriter(cfg.paths.table("fetch_logs", D2), date=D2) as log:
        log.write({"url": "https://h9.example.com/", "status": 200, "conditional": False,
                   "fetched_at": datetime(2026, 11, 21, 5, tzinfo=timezone.utc),
                   "etag": None, "last_modified": None, "content_hash": "f1", "bytes": 1})
    warc = sample_warc(tmp_path / "crawl.warc.gz")
    with pytest.raises(ImportConflict, match="dt=2026-11-21 holds 1 fleet log file"):
        import_files(cfg, [str(warc)], "warc")
    assert storage.list_parquet_files(cfg.paths.table("fetch_logs", D1)) == []
    assert len(storage.list_parquet_files(cfg.paths.table("fetch_logs", D2))) == 1


CDXJ = """\
!meta {"format": "cdxj-test"}
com,example,h1)/a 20261120100000 {"url": "https://H1.example.com/a", "mime": "text/html", "status": "200", "digest": "sha1:TEZH65AUCLZPZY6OESMCPQBPM7BQQ3MX", "length": "412"}
com,example,h1)/a 20261121100000 {"url": "https://h1.example.com/a", "mime": "warc/revisit", "status": "-", "digest": "TEZH65AUCLZPZY6OESMCPQBPM7BQQ3MX", "length": "300"}
com,example,h1)/a 20261121 {"url": "https://h1.example.com/a", "status": "200", "digest": "sha1:NJGLS2QJCIUCPANHBGGEMV3IB7FZHMQZ"}
com,example,h2)/b 20261120113000 {"url": "http://h2.example.com/b", "status": "404"}
com,example,h2)/c 20261120113000 {"url": "http://h2.example.com/c", "status": "200
com,example,h2)/d 2026112 {"url": "http://h2.example.com/d", "status": "200", "digest": "X"}
"""


def test_cdxj_lines_become_rows_and_a_bad_line_is_counted(cfg, tmp_path):
    index = tmp_path / "crawl.cdxj"
    index.write_text(CDXJ)
    record = import_files(cfg, [str(index)], "cdx")
    (f,) = record["files"]
    assert f["rows_by_day"] == {D1: 2, D2: 2}
    assert f["skipped"] == {"bad_json": 1, "bad_timestamp": 1}
    assert f["skipped_examples"][0].endswith("crawl.cdxj:6: bad_json")
    day1, day2 = _day(cfg, D1), _day(cfg, D2)
    assert day1[0]["url"] == "https://h1.example.com/a" and day1[0]["bytes"] == 412
    assert day1[1]["status"] == 404 and day1[1]["content_hash"] is None
    # "20261121" is the day's first instant; the revisit's digest without "sha1:" is the
    # same digest as the first capture's.
    shortened, revisit = day2
    assert shortened["fetched_at"].hour == 0 and shortened["status"] == 200
    assert (revisit["status"], revisit["content_hash"]) == (200, day1[0]["content_hash"])
    assert all(r["etag"] is None and r["last_modified"] is None for r in day1 + day2)


def test_classic_cdx_with_its_header_line(cfg, tmp_path):
    index = tmp_path / "crawl.cdx"
    index.write_text(" CDX N b a m s k r M S V g\n"
                     "com,example,h1)/a 20261120100000 https://h1.example.com/a text/html 200 "
                     "TEZH65AUCLZPZY6OESMCPQBPM7BQQ3MX - - 412 0 crawl.warc.gz\n")
    record = import_files(cfg, [str(index)], "cdx")
    (row,) = _day(cfg, D1)
    assert record["rows"] == 1 and row["bytes"] == 412
    assert row["content_hash"] == "sha1:TEZH65AUCLZPZY6OESMCPQBPM7BQQ3MX"


def test_an_index_of_nothing_but_bad_lines_is_a_named_refusal(cfg, tmp_path):
    index = tmp_path / "notes.cdxj"
    index.write_text("dear diary\nnothing here\n")
    with pytest.raises(ArchiveReadError, match="not a CDX"):
        import_files(cfg, [str(index)], "cdx")


def test_import_warc_then_rebuild_state_folds_the_imported_history(spark, tmp_path):
    """The closing demonstration as a test: a crawl's WARC imported, then rebuild-state."""
    from jobs import partitions, rebuild_state

    cfg = make_config(tmp_path / "data")
    w = Warc(tmp_path / "crawl.warc.gz")
    etag = [("ETag", '"v1"'), ("Last-Modified", LM)]
    w.response("https://H1.EXAMPLE.COM.:443/a#top", "2026-11-19T10:00:00Z", b"<p>a1</p>",
               headers=etag)
    w.response("http://h2.example.com/b", "2026-11-19T11:00:00Z", b"<p>b1</p>")
    w.revisit("https://H1.EXAMPLE.COM.:443/a#top", "2026-11-20T10:00:00Z",
              "2026-11-19T10:00:00Z", headers=etag)
    w.response("http://h2.example.com/b", "2026-11-20T11:00:00Z", b"<p>b2</p>")
    w.response("https://h1.example.com/a", "2026-11-21T10:00:00Z", b"<p>a2</p>",
               headers=[("ETag", '"v2"')])
    w.response("http://h2.example.com/b", "2026-11-21T11:00:00Z", b"gone",
               status="404 Not Found")
    import_files(cfg, [str(w.close())], "warc")
    records = rebuild_state.run(cfg, "2026-11-19", D2, spark=spark)
    assert [r["log_rows"] for r in records] == [2, 2, 2]
    path = cfg.paths.table("state", D2)
    state = {r["url"]: r for f in partitions.committed_files(path, "state")
             for r in pq.read_table(f).to_pylist()}
    # Two spellings of /a are one page; its revisit was an unchanged observation, the
    # capture of 11-21 a change; /b changed on 11-20, then answered 404.
    assert set(state) == {"https://h1.example.com/a", "http://h2.example.com/b"}
    a, b = state["https://h1.example.com/a"], state["http://h2.example.com/b"]
    assert (a["n_fetches"], a["n_observations"], a["n_changes"]) == (3, 2, 1)
    assert (a["last_status"], a["etag"]) == (200, '"v2"')
    assert (b["n_fetches"], b["n_observations"], b["n_changes"]) == (3, 1, 1)
    assert (b["last_status"], b["consecutive_gone"]) == (404, 1)
    assert a["lambda_hat"] > 0 and b["lambda_hat"] > 0
