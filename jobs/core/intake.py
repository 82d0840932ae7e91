"""Intake: robots.txt, sitemaps and feeds the fleet fetched, turned into policy and signals.

Pure functions over one document at a time (no pyspark), reached from ``jobs.intake``
through ``mapInPandas``. The parsers are well-kept libraries, never hand-written ones:
``protego`` for robots.txt (RFC 9309), ``defusedxml`` for sitemaps and sitemap indexes
(streamed with ``iterparse``; DTDs, entities and external references refused, so a
billion-laughs document is quarantined, not expanded), ``feedparser`` for RSS and Atom (after
the same defused pass), ``gzip`` for ``.xml.gz`` bodies (decompressed in bounded chunks).

Every document yields rows of :data:`OUT_COLUMNS`, one ``out`` kind each:

* ``signal``: a URL with its claimed change time (sitemap ``<lastmod>``, a feed entry's
  updated/published date), in the ``signals`` contract;
* ``policy``: a robots.txt's Crawl-delay for its host (``crawl_delay_s`` null: the file has
  none, the host's earlier robots row ends), or ``keep`` (robots.txt unreachable: the earlier
  row stays);
* ``ref``: a sitemap named by robots.txt (``Sitemap:``) or a sitemap index;
* ``quarantine``: a document or entry that breaks a rule, with its ``reason``;
* ``skipped``: an entry that carries no information (no date), with its reason, counted only.

Every URL emitted passes the planner's URL rule (:func:`jobs.core.hosts.url_problem`); a
sitemap or feed entry on another host than its document is quarantined (``cross_host_url``,
the sitemaps.org rule): a host vouches for its own pages only.
"""
from __future__ import annotations

import io
import json
import math
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator, Optional
from urllib.parse import urljoin, urlsplit

from jobs.core.hosts import url_host, url_problem

KINDS = ("robots", "sitemap", "feed")
#: No claimed change time is older (a zero-value date; = jobs.ingest.EARLIEST_TIME).
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16

OUT_COLUMNS = ("out", "url", "host", "signaled_at", "source", "crawl_delay_s", "note",
               "reason", "row_json", "referrer", "at")
OUT_DDL = ("out string, url string, host string, signaled_at timestamp, source string, "
           "crawl_delay_s double, note string, reason string, row_json string, "
           "referrer string, at timestamp")


@dataclass(frozen=True)
class Limits:
    """The bounds intake applies (``[intake]``, ``politeness.*_crawl_delay_s``,
    ``ingest.max_url_length``)."""
    user_agent: str = "recrawl"
    max_body_bytes: int = 52_428_800
    max_robots_bytes: int = 512_000
    max_urls_per_sitemap: int = 50_000
    max_clock_skew_s: float = 3600.0
    min_crawl_delay_s: float = 0.1
    max_crawl_delay_s: float = 86400.0
    max_url_length: int = 2048


class Refused(Exception):
    """A document is quarantined with ``reason``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


# --- bodies ---------------------------------------------------------------------------------

class _BoundedGunzip(io.RawIOBase):
    """A gzip body as a stream, decompressed chunk by chunk, refusing more than ``limit``
    bytes (a small .gz may expand to gigabytes): memory holds one chunk, never the file."""

    def __init__(self, data: bytes, limit: int) -> None:
        self._src = io.BytesIO(data)
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._limit, self._out, self._buf = limit, 0, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            if self._z.eof:
                return 0
            chunk = self._z.unconsumed_tail or self._src.read(_CHUNK)
            if not chunk:
                raise Refused("bad_gzip", "truncated gzip stream")
            try:
                self._buf = self._z.decompress(chunk, _CHUNK)
            except zlib.error as err:
                raise Refused("bad_gzip", str(err)) from None
            self._out += len(self._buf)
            if self._out > self._limit:
                raise Refused("body_too_large", f"more than {self._limit} bytes once "
                                                "decompressed")
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


def body_stream(body: Optional[bytes], limit: int) -> io.BufferedIOBase:
    """The body as a binary stream: gunzipped (bounded) when it starts with gzip's magic."""
    body = body or b""
    if len(body) > limit:
        raise Refused("body_too_large", f"{len(body)} bytes > {limit}")
    if body[:2] == GZIP_MAGIC:
        return io.BufferedReader(_BoundedGunzip(body, limit), _CHUNK)
    return io.BytesIO(body)


def body_bytes(body: Optional[bytes], limit: int) -> bytes:
    """The whole (bounded) decoded body: for parsers that need it in one piece."""
    return body_stream(body, limit).read()


# --- dates ----------------------------------------------------------------------------------

_YEAR_MONTH = re.compile(r"(\d{4})(?:-(\d{2}))?")


def parse_w3c_datetime(text: Optional[str]) -> Optional[datetime]:
    """A sitemap ``<lastmod>`` (W3C Datetime: YYYY, YYYY-MM, YYYY-MM-DD, or a date and time
    with a zone) as an aware UTC datetime; None when it is not one. A time without a zone is
    read as UTC. The library is the standard one (``datetime.fromisoformat``, ISO 8601)."""
    if text is None:
        return None
    text = text.strip()
    m = _YEAR_MONTH.fullmatch(text)
    try:
        if m:
            at = datetime(int(m.group(1)), int(m.group(2) or 1), 1)
        else:
            at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (at.replace(tzinfo=timezone.utc) if at.tzinfo is None
            else at.astimezone(timezone.utc))


def _claim_time(at: Optional[datetime], fetched_at: datetime, limits: Limits) -> tuple:
    """(signaled_at, None) or (None, reason) for a claimed change time: ``bad_lastmod``
    (unparsable, or before 1970), ``future_lastmod`` (after the document's fetch plus the
    allowed clock skew). A time within the skew counts as the fetch time (a claim cannot
    postdate the copy that carries it)."""
    if at is None or at < EARLIEST_TIME:
        return None, "bad_lastmod"
    if at > fetched_at + timedelta(seconds=limits.max_clock_skew_s):
        return None, "future_lastmod"
    return min(at, fetched_at), None


# --- rows -----------------------------------------------------------------------------------

def _row(out: str, **values) -> dict:
    return {c: values.get(c) for c in OUT_COLUMNS} | {"out": out}


def _quarantine(url: Optional[str], reason: str, **detail) -> dict:
    return _row("quarantine", url=url, reason=reason,
                row_json=json.dumps(detail, default=str, sort_keys=True))


def _entry(doc: dict, loc: Optional[str], raw_date: Optional[str], at: Optional[datetime],
           source: str, limits: Limits) -> dict:
    """One sitemap or feed entry: a signal, or a quarantine row, or a skipped one."""
    detail = {"document": doc["url"], "loc": loc, "date": raw_date}
    url = urljoin(doc["url"], loc.strip()) if isinstance(loc, str) and loc.strip() else None
    problem = url_problem(url, limits.max_url_length)
    if problem:
        return _quarantine(loc, problem, **detail)
    host = url_host(url)
    if host != doc["host"]:
        return _quarantine(url, "cross_host_url", **detail)
    if raw_date is None:
        return _row("skipped", url=url, host=host, reason="no_date")
    signaled_at, reason = _claim_time(at, doc["fetched_at"], limits)
    if reason:
        return _quarantine(url, reason, **detail)
    return _row("signal", url=url, host=host, signaled_at=signaled_at, source=source,
                referrer=doc["url"])


def _ref(doc: dict, loc: Optional[str], limits: Limits, same_host: bool) -> dict:
    """A sitemap named by robots.txt or by a sitemap index (on the index's own host)."""
    url = loc.strip() if isinstance(loc, str) else None
    url = urljoin(doc["url"], url) if url else None
    problem = url_problem(url, limits.max_url_length)
    if problem:
        return _quarantine(loc, problem, document=doc["url"], sitemap=loc)
    host = url_host(url)
    if same_host and host != doc["host"]:
        return _quarantine(url, "cross_host_url", document=doc["url"], sitemap=loc)
    return _row("ref", url=url, host=host, referrer=doc["url"], at=doc["fetched_at"])


# --- robots.txt -----------------------------------------------------------------------------

def robots_rows(doc: dict, limits: Limits) -> list[dict]:
    """A robots.txt: its Crawl-delay for the fleet's user agent (else ``*``) as a ``policy``
    row, clamped to ``[min_crawl_delay_s, max_crawl_delay_s]`` (``note`` says which way; a
    1e9 delay is "as slowly as allowed", not an error), and its ``Sitemap:`` lines as refs.

    RFC 9309: a 4xx means no rules (the host's earlier robots delay ends); a 5xx or a
    network error means unreachable (the earlier one is kept). The file is parsed up to
    ``max_robots_bytes`` (the rest ignored, as 2.5 allows).
    """
    from protego import Protego

    path = urlsplit(doc["url"]).path
    if path != "/robots.txt":
        raise Refused("bad_robots_url", f"path {path!r} is not /robots.txt")
    status = doc["status"]
    if 400 <= status < 500:
        return [_row("policy", host=doc["host"], note="no_robots", at=doc["fetched_at"])]
    if not 200 <= status < 300:
        return [_row("policy", host=doc["host"], note="keep", at=doc["fetched_at"])]
    raw = body_bytes(doc["body"], limits.max_body_bytes)[:limits.max_robots_bytes]
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    parsed = Protego.parse(text)
    delay, note = parsed.crawl_delay(limits.user_agent), None
    if delay is not None:
        if not math.isfinite(delay) or delay <= 0:  # protego refuses these; kept as a rule
            raise Refused("bad_crawl_delay", repr(delay))
        if delay > limits.max_crawl_delay_s:
            delay, note = limits.max_crawl_delay_s, "clamped_high"
        elif delay < limits.min_crawl_delay_s:
            delay, note = limits.min_crawl_delay_s, "clamped_low"
    rows = [_row("policy", host=doc["host"], crawl_delay_s=delay, note=note,
                 at=doc["fetched_at"])]
    return rows + [_ref(doc, loc, limits, same_host=False) for loc in parsed.sitemaps]


# --- sitemaps -------------------------------------------------------------------------------

def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml_events(stream, events=("start", "end")) -> Iterator:
    """defusedxml's iterparse with DTDs, entity declarations and external references refused
    (``xml_forbidden``); malformed XML is ``not_xml``."""
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import iterparse

    try:
        yield from iterparse(stream, events=events, forbid_dtd=True, forbid_entities=True,
                             forbid_external=True)
    except DefusedXmlException as err:
        raise Refused("xml_forbidden", type(err).__name__) from None
    except ParseError as err:
        raise Refused("not_xml", str(err)) from None


def sitemap_rows(doc: dict, limits: Limits) -> list[dict]:
    """A sitemap (``<urlset>``: each ``<url>``'s ``<loc>`` and ``<lastmod>``) or a sitemap
    index (``<sitemapindex>``: each ``<sitemap>``'s ``<loc>`` as a ref), streamed: each entry
    is cleared once read, so memory holds one entry and the rows. More than
    ``max_urls_per_sitemap`` entries: the document is quarantined (``too_many_urls``)."""
    if not 200 <= doc["status"] < 300:
        return []
    stream = body_stream(doc["body"], limits.max_body_bytes)
    rows, root, entries = [], None, 0
    for event, elem in _xml_events(stream):
        name = _local(elem.tag)
        if event == "start":
            if root is None:
                root = elem
                if name not in ("urlset", "sitemapindex"):
                    raise Refused("not_a_sitemap", f"root element <{name}>")
            continue
        if elem is root or name not in ("url", "sitemap"):
            continue
        entries += 1
        if entries > limits.max_urls_per_sitemap:
            raise Refused("too_many_urls", f"more than {limits.max_urls_per_sitemap} entries")
        fields = {_local(child.tag): (child.text or "") for child in elem}
        if _local(root.tag) == "sitemapindex":
            rows.append(_ref(doc, fields.get("loc"), limits, same_host=True))
        else:
            raw = fields.get("lastmod")
            rows.append(_entry(doc, fields.get("loc"), raw, parse_w3c_datetime(raw),
                               "sitemap", limits))
        root.clear()
    return rows


# --- feeds ----------------------------------------------------------------------------------

def feed_rows(doc: dict, limits: Limits) -> list[dict]:
    """An RSS or Atom feed: each entry's link with its updated (else published) date, as
    feedparser parses it (RFC 822 and W3C dates). The body first goes through the defused
    XML pass (entities refused), then feedparser (lenient about malformed markup); a body it
    finds no feed in is ``not_a_feed``."""
    import feedparser

    if not 200 <= doc["status"] < 300:
        return []
    data = body_bytes(doc["body"], limits.max_body_bytes)
    try:
        for _ in _xml_events(io.BytesIO(data), events=("end",)):
            pass
    except Refused as err:
        if err.reason != "not_xml":
            raise
    parsed = feedparser.parse(io.BytesIO(data), resolve_relative_uris=False,
                              sanitize_html=False)
    if not parsed.get("version") and not parsed.entries:
        raise Refused("not_a_feed", str(parsed.get("bozo_exception", ""))[:200])
    if len(parsed.entries) > limits.max_urls_per_sitemap:
        raise Refused("too_many_urls", f"more than {limits.max_urls_per_sitemap} entries")
    rows = []
    for entry in parsed.entries:
        # dict.get: FeedParserDict.get("updated") falls back to published with a warning
        raw = dict.get(entry, "updated") or dict.get(entry, "published")
        struct = dict.get(entry, "updated_parsed") or dict.get(entry, "published_parsed")
        at = datetime(*struct[:6], tzinfo=timezone.utc) if struct else None
        rows.append(_entry(doc, entry.get("link"), raw, at, "feed", limits))
    return rows


PARSERS = {"robots": robots_rows, "sitemap": sitemap_rows, "feed": feed_rows}


def document_rows(doc: dict, limits: Limits) -> list[dict]:
    """Every output row of one checked document (``url``, ``host``, ``kind``, ``fetched_at``
    aware UTC, ``status``, ``body``); a refused document is one quarantine row, never an
    exception (a parser's unexpected failure included: the document, not the run, fails).
    ``host`` is the URL's normalised host whatever the row says (the caller checked they
    agree)."""
    doc = {**doc, "host": url_host(doc["url"])}
    try:
        return PARSERS[doc["kind"]](doc, limits)
    except Refused as err:
        return [_quarantine(doc["url"], err.reason, **_doc_detail(doc, err.detail))]
    except (RecursionError, MemoryError, ValueError, TypeError, LookupError,
            UnicodeError) as err:
        return [_quarantine(doc["url"], "unparsable_document",
                            **_doc_detail(doc, f"{type(err).__name__}: {err}"[:300]))]


def _doc_detail(doc: dict, detail: str) -> dict:
    body = doc.get("body")
    return {"document": doc["url"], "kind": doc["kind"], "fetched_at": doc["fetched_at"],
            "status": doc["status"], "body_bytes": len(body) if body is not None else None,
            "detail": detail}


def documents_frame(pdf, limits: Limits):
    """pandas: checked documents -> their output rows (:data:`OUT_COLUMNS`)."""
    import pandas as pd

    rows = []
    for doc in pdf.to_dict("records"):
        at = doc["fetched_at"]
        doc["fetched_at"] = (at.to_pydatetime() if hasattr(at, "to_pydatetime") else at)
        if doc["fetched_at"].tzinfo is None:
            doc["fetched_at"] = doc["fetched_at"].replace(tzinfo=timezone.utc)
        rows.extend(document_rows(doc, limits))
    frame = pd.DataFrame(rows, columns=list(OUT_COLUMNS))
    for col in ("signaled_at", "at"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    frame["crawl_delay_s"] = frame["crawl_delay_s"].astype("float64")
    return frame
