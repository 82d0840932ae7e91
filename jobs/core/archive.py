"""An existing crawl's archive records as fetch-log rows (pure: no WARC library, no I/O).

A WARC response or revisit record, or one CDX(J) index line, is one fetch the crawl made:
the target URI, the capture time, the HTTP status, the recorded ETag and Last-Modified, and
the payload digest. :func:`fetch_row` turns one :class:`ArchiveRecord` into a ``fetch_logs``
row (docs/contract.md) or a skip reason; :func:`parse_cdxj_line` and :func:`parse_cdx_line`
read index lines. The shell that streams the files and writes the partitions is
:mod:`jobs.import_archive`.

The content hash of an imported row is the archive's **payload digest** (``sha1:BASE32`` of
the HTTP body as received), not the fleet's fingerprint of the normalised main content
(docs/fingerprint.md). It changes with every byte of the body: a page whose boilerplate
carries a timestamp, a session token, a rotating advert or a CSRF nonce has a new digest on
every capture although its content did not change, so imported history can overstate
change rates of such pages (never understate them: equal digests mean equal bodies). It is
also computed over the body with its Content-Encoding (gzip bytes differ from plain ones).
Imported rows therefore carry their own ``fingerprint_version``,
:data:`ARCHIVE_DIGEST_VERSION`: a digest is never compared with a fleet fingerprint.

Revisit records (WARC 1.0/1.1 "identical-payload-digest" profile: the crawler fetched the
page and found the body it had already archived) become a 2xx row whose content hash is the
digest the record repeats, so the fold reads them as "fetched, unchanged"; a revisit of the
"server-not-modified" profile, or any record whose HTTP status is 304, becomes a conditional
304 row (unchanged only where the host's validators are trusted, as for the fleet's own).
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping, Optional

from jobs.core.hosts import url_problem
from jobs.core.urls import canonical_url

#: ``fetch_logs.fingerprint_version`` of every imported row: content_hash is a raw payload
#: digest of the archive, not a fingerprint of the fleet's library (whose versions count
#: up from 1), so the two are never compared.
ARCHIVE_DIGEST_VERSION = 1000

#: WARC record types that are a fetch of a page.
FETCH_TYPES = ("response", "revisit")
_BASE32_SHA1 = re.compile(r"[A-Z2-7]{32}\Z")
_HEX_SHA1 = re.compile(r"[0-9a-fA-F]{40}\Z")
_CDX_TIME = re.compile(r"[0-9]{4}(?:[0-9]{2}){0,5}\Z")
_TIME_PAD = "0101000000"  # month, day, hours, minutes, seconds of a shortened 14-digit stamp


class ArchiveLineError(ValueError):
    """A CDX(J) line that cannot be read; ``reason`` is its skip count's name."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}")


@dataclass(frozen=True)
class ArchiveRecord:
    """One capture as the archive recorded it.

    Parameters
    ----------
    kind : str
        WARC-Type (``response``, ``revisit``, ``warcinfo``, ...) or, for an index line,
        ``response`` / ``revisit``.
    url : str or None
        WARC-Target-URI / the index's URL, as recorded.
    captured_at : datetime
        WARC-Date / the index timestamp (timezone-aware, UTC).
    status : int or None
        HTTP status; None when the record has no HTTP message (dns:, warcinfo, ...).
    headers : Mapping[str, str]
        The HTTP response headers that matter here, by lowercase name (``etag``,
        ``last-modified``, ``retry-after``, ``content-length``).
    digest : str or None
        The payload digest (``sha1:BASE32``), normalised by :func:`normalize_digest`.
    payload_bytes : int
        Bytes of the HTTP body as archived (CDX: the record's length in the archive).
    profile : str or None
        WARC-Profile of a revisit record.
    """

    kind: str
    url: Optional[str]
    captured_at: Optional[datetime]
    status: Optional[int]
    headers: Mapping[str, str] = field(default_factory=dict)
    digest: Optional[str] = None
    payload_bytes: int = 0
    profile: Optional[str] = None


def normalize_digest(value: Optional[str]) -> Optional[str]:
    """A payload digest as ``algorithm:value`` (``sha1:BASE32``): CDX indexes often drop the
    ``sha1:`` prefix, and some write the SHA-1 in hex; all forms of one digest compare equal.
    Anything else is kept as written (lowercased algorithm)."""
    if value is None:
        return None
    value = value.strip()
    if not value or value == "-":
        return None
    algo, sep, rest = value.partition(":")
    if not sep:
        algo, rest = "sha1", value
    algo = algo.lower()
    if algo == "sha1" and _HEX_SHA1.match(rest):
        rest = base64.b32encode(bytes.fromhex(rest)).decode("ascii")
    if algo == "sha1":
        rest = rest.upper()
    return f"{algo}:{rest}"


def parse_warc_date(text: Optional[str]) -> Optional[datetime]:
    """WARC-Date (ISO 8601 UTC, ``2026-11-20T10:00:00Z``, fractions allowed) as a UTC
    datetime, or None when it is missing or unreadable."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def parse_cdx_time(text: str) -> datetime:
    """A CDX timestamp (``YYYYMMDDhhmmss``, or a prefix of it of 4-12 digits, the rest
    taken as the start of the period) as a UTC datetime; else ArchiveLineError."""
    if not _CDX_TIME.match(text):
        raise ArchiveLineError("bad_timestamp", repr(text[:40]))
    full = text + _TIME_PAD[len(text) - 4:]
    try:
        return datetime.strptime(full, "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError as err:
        raise ArchiveLineError("bad_timestamp", f"{text!r}: {err}") from None


def _status(value) -> Optional[int]:
    try:
        status = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return status if 100 <= status <= 599 else None


def _index_record(url, stamp: str, status, mime, digest, length) -> ArchiveRecord:
    revisit = str(mime or "").strip().lower() == "warc/revisit"
    code = _status(status)
    if code is None and revisit:
        code = 200  # an identical-payload revisit: the body the digest names was served
    if code is None:
        raise ArchiveLineError("bad_status", repr(status))
    try:
        size = max(int(length), 0) if length not in (None, "", "-") else 0
    except (TypeError, ValueError):
        size = 0
    return ArchiveRecord("revisit" if revisit else "response", url, parse_cdx_time(stamp),
                         code, {}, normalize_digest(digest), size)


def parse_cdxj_line(line: str) -> Optional[ArchiveRecord]:
    """One CDXJ line, ``<SURT key> <timestamp> <JSON>`` (pywb, cdxj-indexer), as a record;
    None for a blank line or a comment (``!``/``#``); ArchiveLineError when it is not one.

    The URL comes from the JSON's ``url`` (the SURT key is a sort key that lost the
    scheme, case and port); ``status``, ``digest``, ``mime`` and ``length`` from the JSON.
    """
    text = line.strip()
    if not text or text.startswith(("!", "#")):
        return None
    parts = text.split(" ", 2)
    if len(parts) < 3:
        raise ArchiveLineError("bad_line", "not '<surt> <timestamp> <json>'")
    try:
        data = json.loads(parts[2])
    except ValueError as err:
        raise ArchiveLineError("bad_json", str(err)) from None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise ArchiveLineError("no_url", "the JSON has no string 'url'")
    return _index_record(data["url"], parts[1], data.get("status"), data.get("mime"),
                         data.get("digest"), data.get("length"))


#: Classic CDX field letters (the ``CDX`` header line) that an import reads.
CDX_FIELDS = {"a": "url", "b": "timestamp", "m": "mime", "s": "status", "k": "digest",
              "S": "length"}


def parse_cdx_header(line: str) -> Optional[list[str]]:
    """The field letters of a classic CDX header (`` CDX N b a m s k r M S V g``), or None
    when the line is not one."""
    parts = line.split()
    if not parts or parts[0] != "CDX":
        return None
    return parts[1:]


def parse_cdx_line(line: str, fields: list[str]) -> Optional[ArchiveRecord]:
    """One classic space-separated CDX line read with the header's ``fields``."""
    text = line.strip()
    if not text:
        return None
    values = text.split(" ")
    if len(values) != len(fields):
        raise ArchiveLineError("bad_line", f"{len(values)} fields, the header has "
                                           f"{len(fields)}")
    got = {CDX_FIELDS[f]: v for f, v in zip(fields, values) if f in CDX_FIELDS}
    if "url" not in got or "timestamp" not in got:
        raise ArchiveLineError("bad_header", "the CDX header has no 'a' (URL) or 'b' (time)")
    return _index_record(got["url"], got["timestamp"], got.get("status"), got.get("mime"),
                         got.get("digest"), got.get("length"))


def fetch_row(record: ArchiveRecord, max_url_length: int) -> tuple[Optional[dict], Optional[str]]:
    """The ``fetch_logs`` row of one archive record, or the reason it is skipped.

    Returns
    -------
    (row, None) or (None, reason)
        Reasons: ``record_<kind>`` (not a response or revisit: warcinfo, request,
        metadata, resource, ...), ``non_http`` (no HTTP message: dns:, whois:, ...),
        ``no_date``, the URL rule's reason (``bad_url``, ``url_userinfo``,
        ``url_too_long``), ``revisit_without_digest`` (a 2xx revisit naming no digest).
    """
    if record.kind not in FETCH_TYPES:
        return None, f"record_{record.kind or 'unknown'}"
    if record.status is None:
        return None, "revisit_without_http" if record.kind == "revisit" else "non_http"
    if record.captured_at is None:
        return None, "no_date"
    problem = url_problem(record.url, max_url_length)
    if problem:
        return None, problem
    url = canonical_url(record.url)
    if url is None:
        return None, "bad_url"
    status, headers = record.status, record.headers
    not_modified = status == 304 or (record.profile or "").endswith("/server-not-modified")
    ok = 200 <= status < 300
    if not_modified:
        status, digest = 304, None
    elif ok:
        digest = record.digest
        if digest is None:
            return None, ("revisit_without_digest" if record.kind == "revisit"
                          else "response_without_digest")
    else:
        digest = None
    size = record.payload_bytes
    if record.kind == "revisit" and ok and not not_modified:
        size = _content_length(headers) or size  # the body was not archived again
    return {"url": url, "fetched_at": record.captured_at, "status": status,
            "conditional": not_modified, "etag": headers.get("etag"),
            "last_modified": headers.get("last-modified"), "content_hash": digest,
            "bytes": int(size), "elapsed_ms": None, "lane": None,
            "retry_after": headers.get("retry-after") if status in (429, 503) else None,
            }, None


def _content_length(headers: Mapping[str, str]) -> int:
    try:
        return max(int(headers.get("content-length", "")), 0)
    except ValueError:
        return 0
