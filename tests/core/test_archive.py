"""Archive records as fetch-log rows (jobs/core/archive.py): the pure mapping and parsers."""
from __future__ import annotations

import base64
import hashlib
from datetime import datetime, timezone

import pytest

from jobs.core.archive import (ArchiveLineError, ArchiveRecord, fetch_row, normalize_digest,
                               parse_cdx_time, parse_cdxj_line, parse_warc_date)

AT = datetime(2026, 11, 20, 10, tzinfo=timezone.utc)
SHA = hashlib.sha1(b"body").digest()
B32 = base64.b32encode(SHA).decode()


def test_one_digest_in_every_spelling_indexes_use():
    assert normalize_digest(f"sha1:{B32}") == f"sha1:{B32}"
    assert normalize_digest(B32) == f"sha1:{B32}"                 # pywb CDXJ: no prefix
    assert normalize_digest(f"SHA1:{B32.lower()}") == f"sha1:{B32}"
    assert normalize_digest(SHA.hex()) == f"sha1:{B32}"           # hex SHA-1
    assert normalize_digest("sha256:abc") == "sha256:abc"
    assert normalize_digest("-") is None and normalize_digest(None) is None


@pytest.mark.parametrize("stamp, expected", [
    ("20261120103000", datetime(2026, 11, 20, 10, 30)),
    ("202611201030", datetime(2026, 11, 20, 10, 30)),
    ("20261120", datetime(2026, 11, 20)), ("202611", datetime(2026, 11, 1)),
    ("2026", datetime(2026, 1, 1)),
])
def test_cdx_timestamps_and_their_prefixes(stamp, expected):
    assert parse_cdx_time(stamp) == expected.replace(tzinfo=timezone.utc)


@pytest.mark.parametrize("stamp", ["2026112", "20261340000000", "2026-11-20", "", "x" * 14])
def test_bad_cdx_timestamps_are_named(stamp):
    with pytest.raises(ArchiveLineError) as err:
        parse_cdx_time(stamp)
    assert err.value.reason == "bad_timestamp"


def test_warc_dates_with_and_without_fractions():
    assert parse_warc_date("2026-11-20T10:00:00Z") == AT
    assert parse_warc_date("2026-11-20T10:00:00.5Z").microsecond == 500_000
    assert parse_warc_date("yesterday") is None and parse_warc_date(None) is None


@pytest.mark.parametrize("line, reason", [
    ("com,example)/ 20261120", "bad_line"),
    ('com,example)/ 20261120 {"url": ', "bad_json"),
    ('com,example)/ 20261120 {"status": "200"}', "no_url"),
    ('com,example)/ 20261120 {"url": "https://example.com/", "status": "abc"}', "bad_status"),
])
def test_bad_cdxj_lines_are_named(line, reason):
    with pytest.raises(ArchiveLineError) as err:
        parse_cdxj_line(line)
    assert err.value.reason == reason


def test_comments_and_blank_cdxj_lines_are_not_records():
    assert parse_cdxj_line("!meta {}") is None and parse_cdxj_line("   \n") is None


def _rec(**kw):
    base = dict(kind="response", url="https://h.example/a", captured_at=AT, status=200,
                headers={}, digest=f"sha1:{B32}", payload_bytes=4)
    return ArchiveRecord(**{**base, **kw})


@pytest.mark.parametrize("record, reason", [
    (_rec(kind="warcinfo", url=None, status=None), "record_warcinfo"),
    (_rec(kind="request"), "record_request"),
    (_rec(url="dns:h.example", status=None), "non_http"),
    (_rec(kind="revisit", status=None), "revisit_without_http"),
    (_rec(captured_at=None), "no_date"),
    (_rec(url="https://u:p@h.example/a"), "url_userinfo"),
    (_rec(url="ftp://h.example/a"), "bad_url"),
    (_rec(url="https://h.example/" + "x" * 100), "url_too_long"),
    (_rec(kind="revisit", digest=None), "revisit_without_digest"),
    (_rec(digest=None), "response_without_digest"),
])
def test_each_skip_has_its_reason(record, reason):
    assert fetch_row(record, 64) == (None, reason)


def test_a_server_not_modified_revisit_is_a_conditional_304_without_hash():
    profile = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    row, _ = fetch_row(_rec(kind="revisit", profile=profile, headers={"etag": '"e"'}), 2048)
    assert (row["status"], row["conditional"], row["content_hash"], row["etag"]) == (
        304, True, None, '"e"')


def test_error_answers_keep_no_hash_and_a_429_keeps_its_retry_after():
    row, _ = fetch_row(_rec(status=429, headers={"retry-after": "120"}), 2048)
    assert (row["status"], row["content_hash"], row["retry_after"]) == (429, None, "120")
    row, _ = fetch_row(_rec(status=404, headers={"retry-after": "120"}), 2048)
    assert row["retry_after"] is None


def test_an_identical_payload_revisit_is_an_unchanged_2xx_with_the_repeated_digest():
    row, _ = fetch_row(_rec(kind="revisit", url="HTTPS://H.example.:443/a#x", payload_bytes=0,
                            headers={"content-length": "1234"}), 2048)
    assert (row["url"], row["status"], row["content_hash"], row["bytes"]) == (
        "https://h.example/a", 200, f"sha1:{B32}", 1234)
