"""The sim fleet's robots.txt, sitemap and feed fetches, as ``documents`` rows.

Every host serves a robots.txt (its crawl delay as ``Crawl-delay``, its sitemap or feed as a
``Sitemap:`` line) and, by its signal source, a sitemap (``<lastmod>``) or an Atom feed
(``<updated>``): the announcements of :mod:`lab.sim.signals` that became visible since the
previous fetch, each with its claimed change time (stale hosts' old and fabricated claims
included). The fleet fetches all three once a day at the host's own minute of the day, so an
announcement reaches the planner at the next fetch after it appears, not the instant it
appears (the hand-written ``signals`` partition's timing). WebSub and IndexNow hosts push:
their signals stay in ``signals/`` as before (:func:`pushed_signals`).
"""
from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone
from xml.sax.saxutils import escape

import numpy as np
import pyarrow as pa

from jobs import schemas
from lab.sim.params import SIGNAL_SOURCES

DOCUMENTS_SCHEMA = schemas.DOCUMENTS.arrow_schema(all_nullable=True)
PUSH_SOURCES = ("websub", "indexnow")
_SITEMAP, _FEED = SIGNAL_SOURCES.index("sitemap"), SIGNAL_SOURCES.index("feed")


def fetch_phase(host: str) -> float:
    """The host's fetch time, as a fraction of the day (fixed per host)."""
    return (zlib.crc32(host.encode()) % 1440) / 1440.0


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _when(sim, days: float) -> datetime:
    return (datetime.fromtimestamp(sim.params.start_epoch_s, timezone.utc)
            + timedelta(days=float(days)))


def _sitemap(entries) -> bytes:
    body = "".join(f"<url><loc>{escape(u)}</loc><lastmod>{_iso(t)}</lastmod></url>\n"
                   for u, t in entries)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
            f'schemas/sitemap/0.9">\n{body}</urlset>\n').encode()


def _feed(host: str, fetched: datetime, entries) -> bytes:
    body = "".join(f"<entry><id>{escape(u)}#{_iso(t)}</id><title>{escape(u)}</title>"
                   f'<link href="{escape(u)}"/><updated>{_iso(t)}</updated></entry>\n'
                   for u, t in entries)
    return ('<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>{host}</title><id>https://{host}/feed.atom</id>"
            f"<updated>{_iso(fetched)}</updated>\n{body}</feed>\n").encode()


def documents_table(sim, day: int) -> pa.Table:
    """The ``documents`` rows the sim fleet fetched on ``day`` (an int sim day)."""
    web = sim.web
    hosts = web.host_policy()
    names = hosts["host"].to_numpy(object)
    ids = web.hosts.name.tolist()
    source = {h: int(web.hosts.signal_source[ids.index(h)]) for h in names}
    # announcements visible since each host's previous fetch: yesterday's and today's
    parts = [web.signals.for_day(d, web.pages) for d in (day - 1, day) if d >= 0]
    sig = parts[0] if len(parts) == 1 else parts[0]._append(parts[1], ignore_index=True)
    sig_host = web.hosts.name[web.pages.host[sig["page"].to_numpy()]] if len(sig) else \
        np.empty(0, object)
    rows = []
    for host, delay in zip(names, hosts["crawl_delay_s"].to_numpy(float)):
        phase = fetch_phase(host)
        fetched = _when(sim, day + phase)
        src = source[host]
        path = "/sitemap.xml" if src == _SITEMAP else "/feed.atom" if src == _FEED else None
        robots = f"User-agent: *\nCrawl-delay: {delay:g}\n"
        if path:
            robots += f"Sitemap: https://{host}{path}\n"
        rows.append((f"https://{host}/robots.txt", "robots", fetched, "text/plain",
                     robots.encode()))
        if path is None:
            continue
        m = ((sig_host == host) & (sig["emit_at"].to_numpy() >= day - 1 + phase)
             & (sig["emit_at"].to_numpy() < day + phase)) if len(sig) else np.zeros(0, bool)
        entries = sorted({u: _when(sim, t) for u, t in zip(
            sig["url"].to_numpy(object)[m], sig["signaled_at"].to_numpy()[m])}.items())
        if src == _SITEMAP:
            rows.append((f"https://{host}{path}", "sitemap", fetched, "application/xml",
                         _sitemap(entries)))
        else:
            rows.append((f"https://{host}{path}", "feed", fetched, "application/atom+xml",
                         _feed(host, fetched, entries)))
    cols = list(zip(*rows)) if rows else [[]] * 5
    return pa.table({"url": pa.array(cols[0], pa.string()),
                     "host": pa.array([None] * len(rows), pa.string()),
                     "kind": pa.array(cols[1], pa.string()),
                     "fetched_at": pa.array(cols[2], pa.timestamp("us", tz="UTC")),
                     "status": pa.array([200] * len(rows), pa.int32()),
                     "content_type": pa.array(cols[3], pa.string()),
                     "body": pa.array(cols[4], pa.binary())}, schema=DOCUMENTS_SCHEMA)


def pushed_signals(table: pa.Table) -> pa.Table:
    """The rows of a ``signals`` table that are pushed (WebSub, IndexNow): with intake on,
    the sitemap and feed claims reach the planner through the documents instead."""
    import pyarrow.compute as pc

    return table.filter(pc.is_in(table["source"], pa.array(PUSH_SOURCES)))
