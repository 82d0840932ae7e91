"""A plausible historical crawler, used to produce the sample fetch history.

Every known page is re-fetched every few days (a fixed per-page interval with
±20 % jitter, front pages and feeds daily); conditional GETs wherever a
validator was received; requests to a host are spaced 10 % wider than its
crawl delay and never exceed its daily cap, so history has no politeness
violations. Newly discovered pages are first fetched the day after discovery.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from lab.sim.fetcher import Requests
from lab.sim.rand import uniform


class LegacyCrawler:
    """Per-page state of the historical crawler over a :class:`SyntheticWeb`."""

    def __init__(self, web):
        self.web = web
        self.n = 0
        self.next_due = np.empty(0)
        self.etag = np.empty(0, np.uint64)
        self.etag_ok = np.empty(0, bool)
        self.lm = np.empty(0, np.int64)
        self.lm_ok = np.empty(0, bool)
        self.dead = np.empty(0, bool)
        self.fetches = np.empty(0, np.int64)
        self._grow()

    def _grow(self) -> None:
        pg = self.web.pages
        k = len(pg) - self.n
        if k <= 0:
            return
        ids = np.arange(self.n, len(pg))
        u = uniform(pg.url_key[ids], 0x1E)
        first = np.where(pg.discovered[ids] < 0, u * self._interval(ids),
                         np.floor(pg.discovered[ids]) + 1.0 + 0.5 * u)
        self.next_due = np.concatenate([self.next_due, first])
        self.etag = np.concatenate([self.etag, np.zeros(k, np.uint64)])
        self.etag_ok = np.concatenate([self.etag_ok, np.zeros(k, bool)])
        self.lm = np.concatenate([self.lm, np.zeros(k, np.int64)])
        self.lm_ok = np.concatenate([self.lm_ok, np.zeros(k, bool)])
        self.dead = np.concatenate([self.dead, np.zeros(k, bool)])
        self.fetches = np.concatenate([self.fetches, np.zeros(k, np.int64)])
        self.n = len(pg)

    def _interval(self, ids: np.ndarray) -> np.ndarray:
        pg = self.web.pages
        days = 1.5 + 4.5 * uniform(pg.url_key[ids], 0x1F)
        return np.where(pg.section[ids] < 0, 1.0, days)

    def requests_for_day(self, day: int) -> Requests:
        """The day's requests, sorted by time."""
        self.web.advance_to(day)
        self._grow()
        pg, hs = self.web.pages, self.web.hosts
        due = np.flatnonzero(~self.dead & (self.next_due < day + 1) & (pg.discovered < day))
        host = pg.host[due]
        order = np.lexsort((self.next_due[due], host))
        due, host = due[order], host[order]
        idx = np.arange(len(due))
        first = np.append(True, host[1:] != host[:-1]) if len(host) else np.empty(0, bool)
        rank = idx - np.maximum.accumulate(np.where(first, idx, 0)) if len(idx) else idx
        spacing = (hs.crawl_delay_s[host] * 1.1 + 0.5) / 86400.0
        room = np.floor(0.95 / spacing)
        cap = hs.max_fetches[host]
        limit = np.where(cap >= 0, np.minimum(cap, room), room)
        take = rank < limit
        due, host, rank, spacing = due[take], host[take], rank[take], spacing[take]
        k = np.bincount(host, minlength=len(hs.name))[host]
        slack = np.clip(1.0 - (k + 1) * spacing, 0.0, None)
        # Start one spacing after midnight so yesterday's last request is far enough.
        t = day + spacing * (1 + rank) + uniform(host, day, 0x0FF) * slack
        by_time = np.argsort(t, kind="stable")
        due, host, t = due[by_time], host[by_time], t[by_time]
        n = len(due)
        return Requests(page=due.astype(np.int64), host=host.astype(np.int32), url=pg.url[due], t=t,
                        inm=self.etag[due], inm_present=self.etag_ok[due], ims=self.lm[due],
                        ims_present=self.lm_ok[due], lane=pa.nulls(n, pa.string()))

    def observe(self, req: Requests, resp: dict, day: int) -> None:
        """Update validators and due times from the responses."""
        page, status = req.page, resp["status"]
        self.fetches[page] += 1
        ok = (status == 200) | (status == 304)
        got = ok & resp["etag_ok"]
        self.etag[page[got]] = resp["etag"][got]
        self.etag_ok[page[got]] = True
        got = ok & resp["lm_ok"]
        self.lm[page[got]] = resp["lm"][got]
        self.lm_ok[page[got]] = True
        self.dead[page[(status == 404) | (status == 410)]] = True
        jitter = 0.8 + 0.4 * uniform(self.web.pages.url_key[page], self.fetches[page], 0x20)
        self.next_due[page] = np.where(ok, req.t + self._interval(page) * jitter,
                                       day + 1.0 + 0.2 * jitter)


def run_history(sim, days: int, on_day=None) -> LegacyCrawler:
    """Crawl ``sim`` with the legacy policy for days ``0 .. days-1``.

    Parameters
    ----------
    sim : Simulation
        Must not have simulated any day yet.
    days : int
    on_day : callable, optional
        Called as ``on_day(day, fetch_log_table, record)`` after each day.
    """
    if days < 1:
        raise ValueError("days must be >= 1")
    if sim.next_day != 0:
        raise ValueError("run_history needs a fresh Simulation")
    crawler = LegacyCrawler(sim.web)
    for day in range(days):
        req = crawler.requests_for_day(day)
        out: list = []
        table, record = sim.run_requests(req, day, out)
        crawler.observe(req, out[0], day)
        if on_day is not None:
            on_day(day, table, record)
    return crawler
