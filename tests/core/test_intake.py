"""The intake parsers on real files (tests/fixtures/intake and files written here): robots.txt
through protego, sitemaps through defusedxml, feeds through feedparser; every hostile input
ends as a named quarantine row, never an exception or a silent drop."""
from __future__ import annotations

import gzip
import json
import os
import resource
from datetime import datetime, timezone

import pandas as pd
import pytest

from jobs.core import intake
from jobs.core.hosts import url_problem
from tests.conftest import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures", "intake")
FETCHED = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
LIMITS = intake.Limits()


def fixture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as fh:
        return fh.read()


def doc(kind: str, body, url: str | None = None, status: int = 200) -> dict:
    path = {"robots": "/robots.txt", "sitemap": "/sitemap.xml", "feed": "/feed.xml"}[kind]
    return {"url": url or f"https://a.example{path}", "host": "a.example", "kind": kind,
            "fetched_at": FETCHED, "status": status, "body": body}


def by_out(rows, out):
    return [r for r in rows if r["out"] == out]


def reasons(rows):
    return {r["url"]: r["reason"] for r in by_out(rows, "quarantine")}


def test_sitemap_entries_become_signals_or_named_quarantine():
    rows = intake.document_rows(doc("sitemap", fixture("sitemap.xml")), LIMITS)
    signals = {r["url"]: r["signaled_at"] for r in by_out(rows, "signal")}
    assert signals == {
        "https://a.example/news/1": datetime(2026, 11, 28, 8, 30, tzinfo=timezone.utc),
        "https://a.example/news/2": datetime(2026, 11, 1, tzinfo=timezone.utc),
        "https://a.example/news/3": datetime(2026, 11, 27, tzinfo=timezone.utc),  # relative
        "https://A.EXAMPLE./news/4": datetime(2026, 11, 29, 11, 59, tzinfo=timezone.utc),
        "http://a.example:8080/x": datetime(2026, 11, 28, tzinfo=timezone.utc),
    }
    assert all(r["host"] == "a.example" and r["source"] == "sitemap" for r in by_out(rows, "signal"))
    assert reasons(rows) == {
        "https://other.example/spam": "cross_host_url",
        "https://a.example/future": "future_lastmod",
        "https://a.example/garbled": "bad_lastmod",
        "https://a.example/zero": "bad_lastmod",
        "https://user:pw@a.example/secret": "url_userinfo",
        "javascript:alert(1)": "bad_url",
        "https://a.example/has space": "bad_url",
    }
    assert [r["reason"] for r in by_out(rows, "skipped")] == ["no_date"]  # news/5, counted
    # the image extension's <image:loc> is not a page of the sitemap
    assert not any("cdn.example" in (r["url"] or "") for r in rows)
    assert len(rows) == 13  # one row per <url>: nothing dropped
    for r in by_out(rows, "signal"):
        assert url_problem(r["url"], LIMITS.max_url_length) is None
    detail = json.loads(next(r for r in by_out(rows, "quarantine")
                             if r["reason"] == "future_lastmod")["row_json"])
    assert detail == {"document": "https://a.example/sitemap.xml",
                      "loc": "https://a.example/future", "date": "2031-01-01T00:00:00Z"}


def test_a_gzip_sitemap_reads_as_the_plain_one():
    plain = intake.document_rows(doc("sitemap", fixture("sitemap.xml")), LIMITS)
    gz = intake.document_rows(doc("sitemap", gzip.compress(fixture("sitemap.xml")),
                                  url="https://a.example/sitemap.xml.gz"), LIMITS)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("referrer", "row_json")}
                          for r in rows]
    assert strip(plain) == strip(gz)


def test_a_lastmod_just_after_the_fetch_counts_as_the_fetch_time():
    body = (b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url>'
            b'<loc>https://a.example/p</loc><lastmod>2026-11-29T12:10:00Z</lastmod></url></urlset>')
    (row,) = intake.document_rows(doc("sitemap", body), LIMITS)
    assert row["out"] == "signal" and row["signaled_at"] == FETCHED
    strict = intake.Limits(max_clock_skew_s=0)
    (row,) = intake.document_rows(doc("sitemap", body), strict)
    assert row["reason"] == "future_lastmod"


def test_a_sitemap_index_names_sitemaps_on_its_own_host_only():
    rows = intake.document_rows(doc("sitemap", fixture("sitemap_index.xml")), LIMITS)
    assert [(r["url"], r["referrer"]) for r in by_out(rows, "ref")] == [
        ("https://a.example/sitemap-news.xml.gz", "https://a.example/sitemap.xml")]
    assert reasons(rows) == {"https://evil.example/sitemap.xml": "cross_host_url"}


def test_billion_laughs_is_quarantined_without_expanding():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = intake.document_rows(doc("sitemap", fixture("billion_laughs.xml")), LIMITS)
    assert [(r["out"], r["reason"]) for r in rows] == [("quarantine", "xml_forbidden")]
    assert json.loads(rows[0]["row_json"])["detail"] == "DTDForbidden"
    # as a feed too: the defused pass runs before feedparser
    rows = intake.document_rows(doc("feed", fixture("billion_laughs.xml")), LIMITS)
    assert [(r["out"], r["reason"]) for r in rows] == [("quarantine", "xml_forbidden")]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB


def _big_sitemap(path, n_urls: int) -> int:
    """A real sitemap file of n_urls entries, written in chunks; its size in bytes."""
    head = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    with open(path, "wb") as fh:
        fh.write(head)
        for start in range(0, n_urls, 10_000):
            fh.write(b"".join(
                b"<url><loc>https://a.example/page/%09d</loc><lastmod>2026-11-28</lastmod>"
                b"</url>\n" % i for i in range(start, min(start + 10_000, n_urls))))
        fh.write(b"</urlset>")
    return os.path.getsize(path)


def test_a_50_mb_sitemap_is_refused_by_size_and_by_entries(tmp_path):
    path = tmp_path / "sitemap-50mb.xml"
    size = _big_sitemap(path, 610_000)
    assert size > 50_000_000
    body = path.read_bytes()
    # over max_body_bytes: refused before parsing
    small = intake.Limits(max_body_bytes=size - 1)
    (row,) = intake.document_rows(doc("sitemap", body), small)
    assert row["reason"] == "body_too_large"
    assert json.loads(row["row_json"])["body_bytes"] == size
    # within the byte limit but over the entry limit: parsing stops at entry 50,001
    (row,) = intake.document_rows(doc("sitemap", body), LIMITS)
    assert row["reason"] == "too_many_urls"
    # the same as a gzip bomb: a small .gz that expands past the limit, streamed
    gz = gzip.compress(body, compresslevel=9)
    assert len(gz) < size / 10
    bomb = intake.Limits(max_body_bytes=10_000_000, max_urls_per_sitemap=10**7)
    (row,) = intake.document_rows(doc("sitemap", gz), bomb)
    assert row["reason"] == "body_too_large"
    assert "decompressed" in json.loads(row["row_json"])["detail"]


def test_garbage_bodies_are_quarantined_by_kind():
    body = fixture("garbage.bin")
    got = {k: [(r["out"], r["reason"]) for r in intake.document_rows(doc(k, body), LIMITS)]
           for k in ("sitemap", "feed")}
    assert got == {"sitemap": [("quarantine", "not_xml")],
                   "feed": [("quarantine", "not_a_feed")]}
    # a truncated gzip stream
    (row,) = intake.document_rows(doc("sitemap", gzip.compress(b"<urlset>" * 1000)[:40]), LIMITS)
    assert row["reason"] == "bad_gzip"
    # robots.txt is lenient by RFC 9309: garbage is no rules (and no delay), not an error
    rows = intake.document_rows(doc("robots", body), LIMITS)
    assert [(r["out"], r["crawl_delay_s"]) for r in rows] == [("policy", None)]
    # an XML document that is not a sitemap
    (row,) = intake.document_rows(doc("sitemap", b"<html><body>hi</body></html>"), LIMITS)
    assert row["reason"] == "not_a_sitemap"


def test_robots_crawl_delay_1e9_is_clamped_to_the_maximum_and_says_so():
    rows = intake.document_rows(doc("robots", fixture("robots_1e9.txt")), LIMITS)
    (policy,) = by_out(rows, "policy")
    assert policy["crawl_delay_s"] == LIMITS.max_crawl_delay_s
    assert policy["note"] == "clamped_high" and policy["host"] == "a.example"
    assert [r["url"] for r in by_out(rows, "ref")] == [
        "https://a.example/sitemap_index.xml", "https://a.example/sitemap.xml"]
    tiny = intake.document_rows(doc("robots", b"User-agent: *\nCrawl-delay: 0.001\n"), LIMITS)
    assert (tiny[0]["crawl_delay_s"], tiny[0]["note"]) == (LIMITS.min_crawl_delay_s, "clamped_low")


def test_robots_takes_the_fleets_own_group_then_star():
    rows = intake.document_rows(doc("robots", fixture("robots_agent.txt")), LIMITS)
    assert by_out(rows, "policy")[0]["crawl_delay_s"] == 7.5
    other = intake.document_rows(doc("robots", fixture("robots_agent.txt")),
                                 intake.Limits(user_agent="somebot"))
    assert by_out(other, "policy")[0]["crawl_delay_s"] == 30.0


def test_robots_status_rules_and_path():
    gone = intake.document_rows(doc("robots", b"", status=404), LIMITS)
    assert [(r["note"], r["crawl_delay_s"]) for r in gone] == [("no_robots", None)]
    down = intake.document_rows(doc("robots", b"", status=503), LIMITS)
    assert [r["note"] for r in down] == ["keep"]
    wrong = intake.document_rows(doc("robots", b"Crawl-delay: 5",
                                     url="https://a.example/x/robots.txt"), LIMITS)
    assert [r["reason"] for r in wrong] == ["bad_robots_url"]


def test_robots_beyond_max_bytes_is_ignored():
    body = b"User-agent: *\n" + b"# padding\n" * 60_000 + b"Crawl-delay: 5\n"
    rows = intake.document_rows(doc("robots", body), LIMITS)
    assert by_out(rows, "policy")[0]["crawl_delay_s"] is None
    rows = intake.document_rows(doc("robots", body), intake.Limits(max_robots_bytes=10**6))
    assert by_out(rows, "policy")[0]["crawl_delay_s"] == 5.0


def test_atom_entries_take_updated_then_published():
    rows = intake.document_rows(doc("feed", fixture("atom.xml")), LIMITS)
    assert {r["url"]: r["signaled_at"] for r in by_out(rows, "signal")} == {
        "https://a.example/posts/1": datetime(2026, 11, 29, 7, tzinfo=timezone.utc),
        "https://a.example/posts/2": datetime(2026, 11, 28, 5, tzinfo=timezone.utc),
    }
    assert all(r["source"] == "feed" for r in by_out(rows, "signal"))
    assert reasons(rows) == {"https://b.example/posts/3": "cross_host_url"}
    assert [r["url"] for r in by_out(rows, "skipped")] == ["https://a.example/posts/4"]


def test_rss_dates_are_http_dates_and_bad_ones_are_named():
    rows = intake.document_rows(doc("feed", fixture("rss.xml")), LIMITS)
    assert {r["url"]: r["signaled_at"] for r in by_out(rows, "signal")} == {
        "https://a.example/r/1": datetime(2026, 11, 28, 10, tzinfo=timezone.utc)}
    assert reasons(rows) == {"https://a.example/r/2": "bad_lastmod",
                             "https://a.example/r/3": "future_lastmod"}


def test_w3c_datetime_forms():
    p = intake.parse_w3c_datetime
    utc = timezone.utc
    assert p("2026") == datetime(2026, 1, 1, tzinfo=utc)
    assert p("2026-11") == datetime(2026, 11, 1, tzinfo=utc)
    assert p(" 2026-11-28 ") == datetime(2026, 11, 28, tzinfo=utc)
    assert p("2026-11-28T10:00+02:00") == datetime(2026, 11, 28, 8, tzinfo=utc)
    assert p("2026-11-28T10:00:00.5Z") == datetime(2026, 11, 28, 10, 0, 0, 500000, tzinfo=utc)
    for bad in ("2026-13-01", "yesterday", "", "2026-11-28T25:00Z", None):
        assert p(bad) is None, bad


def test_documents_frame_has_the_output_columns_and_types():
    pdf = pd.DataFrame([doc("sitemap", fixture("sitemap.xml")),
                        doc("robots", fixture("robots_1e9.txt"))])
    frame = intake.documents_frame(pdf, LIMITS)
    assert list(frame.columns) == list(intake.OUT_COLUMNS)
    assert str(frame["signaled_at"].dtype) == "datetime64[ns, UTC]"
    assert frame["out"].value_counts().to_dict() == {"quarantine": 7, "signal": 5, "ref": 2,
                                                     "policy": 1, "skipped": 1}


def test_kinds_agree_with_the_fleet_writer():
    from jobs.fleet.documents import KINDS

    assert KINDS == intake.KINDS


@pytest.mark.parametrize("kind", intake.KINDS)
def test_non_2xx_documents_yield_no_entries(kind):
    rows = intake.document_rows(doc(kind, b"", status=500), LIMITS)
    assert all(r["out"] == "policy" for r in rows)
