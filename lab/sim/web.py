"""The synthetic web: hosts, pages and their true change history, with queries.

Time is a float number of days since ``params.start`` (midnight UTC). The web
is advanced one day at a time (:meth:`SyntheticWeb.advance_to`); each day
first creates that day's new pages, then draws the day's change times, then
the push signals they trigger. Only ``params.keep_days`` day windows are kept,
so memory stays bounded however long a simulation runs.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from lab.sim import signals as sig
from lab.sim.changes import DayChanges, build_day, shard_day_changes
from lab.sim.params import (PROCESS_KINDS, SECTIONS, SIGNAL_CLASSES, VALIDATOR_CLASSES,
                             WebParams)
from lab.sim.population import Pages, initial_pages, make_hosts, make_pages
from lab.sim.rand import BIRTHS, CHANGES, PAGES, mix64, stream, uniform


class SyntheticWeb:
    """A seeded synthetic web holding its own ground truth.

    Parameters
    ----------
    params : WebParams
        The web's parameters; same parameters, same web.
    shards : iterable of int, optional
        Build only these host shards (default all). A shard's pages, changes
        and signals are identical whichever other shards are built with it.
    """

    def __init__(self, params: WebParams, shards: Iterable[int] | None = None):
        self.params = params
        self.hosts = make_hosts(params)
        all_shards = range(params.n_shards)
        self.shards = sorted(set(all_shards if shards is None else shards))
        if not self.shards or min(self.shards) < 0 or max(self.shards) >= params.n_shards:
            raise ValueError(f"shards must be a non-empty subset of 0..{params.n_shards - 1}")
        parts = [initial_pages(params, self.hosts, s, stream(params.seed, PAGES, s))
                 for s in self.shards]
        self.pages: Pages = Pages.concat(parts)
        self._shard_pages = {s: np.flatnonzero(self.pages.shard == s) for s in self.shards}
        self._initial_per_shard = {s: len(v) for s, v in self._shard_pages.items()}
        self._next_page_no = self.hosts.size.copy()
        self._windows: dict[int, DayChanges] = {}
        self._cum = np.zeros(len(self.pages), dtype=np.int64)
        self._last = self.pages.last0.copy()
        self.signals = sig.SignalBuffer()
        self.current_day = -1
        self._url_index: pd.Index | None = None

    # ------------------------------------------------------------------ time
    @property
    def n_pages(self) -> int:
        """Pages created so far (alive, dead or born today)."""
        return len(self.pages)

    def advance_to(self, day: int) -> None:
        """Generate births, changes and signals of every day up to ``day``."""
        day = int(day)
        while self.current_day < day:
            self._generate_day(self.current_day + 1)

    def _generate_day(self, day: int) -> None:
        p = self.params
        self._add_births(day)
        ids, times = [], []
        for s in self.shards:
            i, t = shard_day_changes(p, self.pages, self._shard_pages[s], day,
                                     stream(p.seed, CHANGES, s, day))
            ids.append(i)
            times.append(t)
        all_ids, all_t = np.concatenate(ids), np.concatenate(times)
        window = build_day(day, self.n_pages, all_ids, all_t, self._cum, self._last)
        self._windows[day] = window
        counts = window.counts
        last_idx = window.starts[1:] - 1
        self._cum = self._cum + counts
        self._last = np.where(counts > 0, window.times[np.maximum(last_idx, 0)]
                              if len(window.times) else 0.0, self._last)
        for s in self.shards:
            in_shard = self.pages.shard[all_ids] == s
            self.signals.add(sig.shard_day_signals(p, self.hosts, self.pages, self._shard_pages[s],
                                                   all_ids[in_shard], all_t[in_shard], day))
        self.current_day = day
        for old in [d for d in self._windows if d <= day - p.keep_days]:
            del self._windows[old]
        self.signals.prune(day - p.keep_days)

    def _add_births(self, day: int) -> None:
        p = self.params
        new_parts = []
        for s in self.shards:
            rng = stream(p.seed, BIRTHS, s, day)
            host_ids = np.flatnonzero(self.hosts.shard == s)
            n_new = rng.poisson(p.birth_rate * self._initial_per_shard[s])
            if n_new == 0:
                continue
            w = self.hosts.size[host_ids] / self.hosts.size[host_ids].sum()
            hosts = np.sort(rng.choice(host_ids, n_new, p=w))
            # Page numbers continue each host's counter in host order.
            uniq, first, cnt = np.unique(hosts, return_index=True, return_counts=True)
            page_no = self._next_page_no[hosts] + (np.arange(n_new) - np.repeat(first, cnt))
            self._next_page_no[uniq] += cnt
            born = day + rng.random(n_new)
            new_parts.append(make_pages(p, self.hosts, hosts, page_no, born, rng))
        if not new_parts:
            return
        start = self.n_pages
        self.pages = Pages.concat([self.pages, *new_parts])
        new_ids = np.arange(start, self.n_pages)
        for s in self.shards:
            self._shard_pages[s] = np.concatenate(
                [self._shard_pages[s], new_ids[self.pages.shard[new_ids] == s]])
        self._cum = np.concatenate([self._cum, np.zeros(len(new_ids), np.int64)])
        self._last = np.concatenate([self._last, self.pages.last0[new_ids]])
        self._url_index = None

    # --------------------------------------------------------------- queries
    def window(self, day: int) -> DayChanges:
        """The change window of ``day`` (generating up to it if needed)."""
        day = int(day)
        self.advance_to(day)
        if day not in self._windows:
            raise KeyError(f"day {day} is no longer kept (keep_days={self.params.keep_days})")
        return self._windows[day]

    def _by_day(self, pages, t, fn):
        pages = np.asarray(pages, dtype=np.int64)
        t = np.broadcast_to(np.asarray(t, dtype=float), pages.shape)
        days = np.floor(t).astype(np.int64)
        out = None
        for d in np.unique(days):
            m = days == d
            res = fn(self.window(int(d)), pages[m], t[m])
            if out is None:
                out = np.empty(len(pages), dtype=res.dtype)
            out[m] = res
        return out if out is not None else np.empty(0)

    def version_at(self, pages, t) -> np.ndarray:
        """Content version (number of changes since birth) of each page at time ``t``."""
        return self._by_day(pages, t, lambda w, p, tt: w.version(p, tt))

    def n_changes(self, pages, t0, t1) -> np.ndarray:
        """Number of changes in ``(t0, t1]``."""
        return self.version_at(pages, t1) - self.version_at(pages, t0)

    def last_change(self, pages, t) -> np.ndarray:
        """Time of the last change at or before ``t`` (birth time if none, NaN before birth)."""
        last = self._by_day(pages, t, lambda w, p, tt: w.last_change(p, tt))
        return np.where(np.asarray(t) < self.pages.born[np.asarray(pages)], np.nan, last)

    def is_alive(self, pages, t) -> np.ndarray:
        """True where the page is born and not dead at ``t``."""
        pages = np.asarray(pages, dtype=np.int64)
        return (self.pages.born[pages] <= t) & (t < self.pages.dies[pages])

    def content_hash_u64(self, pages, versions) -> np.ndarray:
        """Fingerprint of (url, version) as uint64; same version → same value."""
        return mix64(self.pages.url_key[np.asarray(pages)], versions, 0xC0417E47)

    def page_ids(self, urls) -> np.ndarray:
        """Page ids of ``urls`` (-1 for URLs this web has never had)."""
        if self._url_index is None:
            self._url_index = pd.Index(self.pages.url)
        return self._url_index.get_indexer(pd.Index(urls, dtype=object)).astype(np.int64)

    # ---------------------------------------------------------------- tables
    def host_policy(self) -> pd.DataFrame:
        """``host_policy`` rows of the built shards' hosts (upstream's: ``source`` null)."""
        hid = np.flatnonzero(np.isin(self.hosts.shard, self.shards))
        cap = self.hosts.max_fetches[hid]
        return pd.DataFrame({
            "host": self.hosts.name[hid],
            "crawl_delay_s": self.hosts.crawl_delay_s[hid],
            "max_fetches_per_day": pd.Series(cap, dtype="Int64").mask(cap < 0),
            "source": pd.Series([None] * len(hid), dtype=object)})  # upstream's rows

    def truth_pages(self, ids: np.ndarray | None = None) -> pd.DataFrame:
        """Ground truth per page: process kind, λ, importance, lifetime."""
        pg = self.pages
        ids = np.arange(self.n_pages) if ids is None else np.asarray(ids)
        section = pg.section[ids]
        return pd.DataFrame({
            "url": pg.url[ids], "host": self.hosts.name[pg.host[ids]],
            "section": np.where(section == -1, "/", np.where(
                section == -2, "/feed", np.array(SECTIONS, dtype=object)[np.maximum(section, 0)])),
            "kind": np.array(PROCESS_KINDS, dtype=object)[pg.kind[ids]],
            "lam": pg.lam[ids], "lam_eff": pg.lam_eff[ids], "importance": pg.importance[ids],
            "born_day": pg.born[ids], "dies_day": pg.dies[ids], "discovered_day": pg.discovered[ids],
            "gone_status": np.where(pg.gone[ids], 410, 404).astype(np.int32)})

    def truth_hosts(self) -> pd.DataFrame:
        """Ground truth per host: validator and signal behaviour, size, politeness, and the
        hidden health (``quota``: -1 none; ``quota_until``: web day it is lifted, inf never;
        ``throttle_s``: 0 none)."""
        hid = np.flatnonzero(np.isin(self.hosts.shard, self.shards))
        h = self.hosts
        return pd.DataFrame({
            "host": h.name[hid], "validator": np.array(VALIDATOR_CLASSES, dtype=object)[h.validator[hid]],
            "signal_class": np.array(SIGNAL_CLASSES, dtype=object)[h.signal_class[hid]],
            "signal_source": np.array(sig.SIGNAL_SOURCES, dtype=object)[h.signal_source[hid]],
            "size_day0": h.size[hid], "crawl_delay_s": h.crawl_delay_s[hid],
            "max_fetches_per_day": h.max_fetches[hid], "frozen_lm_day": h.frozen_lm_day[hid],
            "quota": h.quota[hid], "quota_until": h.quota_until[hid],
            "throttle_s": h.throttle_s[hid]})

    def frontier_for_day(self, day: int) -> pd.DataFrame:
        """Pages first discovered during ``day``, with a noisy importance estimate or null."""
        pg = self.pages
        ids = np.flatnonzero((pg.discovered >= day) & (pg.discovered < day + 1))
        noise = np.exp(0.5 * (uniform(pg.url_key[ids], 0xF1) - 0.5) * 2.0)
        known = uniform(pg.url_key[ids], 0xF2) < 0.5
        return pd.DataFrame({"page": ids, "url": pg.url[ids], "discovered_at": pg.discovered[ids],
                             "importance": np.where(known, pg.importance[ids] * noise, np.nan)})
