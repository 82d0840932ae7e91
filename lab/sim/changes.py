"""True change times, generated lazily one day window at a time.

A :class:`DayChanges` holds every change in day ``[d, d+1)`` for all pages
known at generation time, as a CSR layout (``starts`` per page into
``times``). ``keys = page + (time - d)`` is globally sorted, so "how many
changes of page p up to time t" is a single ``searchsorted`` for a whole
batch of queries.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.sim.params import WebParams
from lab.sim.population import BURSTY, DAILY, POISSON, WEEKLY, Pages

_FRAC_MAX = 1.0 - 1e-7  # keeps page + fraction strictly below page + 1 up to ~1e8 pages


@dataclass
class DayChanges:
    """All true changes of day ``day``; page ids ≥ ``n_pages`` had none (not yet born)."""

    day: int
    n_pages: int
    starts: np.ndarray       # int64, n_pages + 1
    times: np.ndarray        # float64, absolute day time, sorted within page
    keys: np.ndarray         # float64, page + fraction of day, globally sorted
    cum_before: np.ndarray   # int64, changes of each page before this day
    last_before: np.ndarray  # float64, last change before this day (birth if none)

    @property
    def counts(self) -> np.ndarray:
        """Changes per page in this day."""
        return np.diff(self.starts)

    def _pos(self, pages: np.ndarray, t: np.ndarray) -> np.ndarray:
        frac = np.clip(np.asarray(t, dtype=float) - self.day, 0.0, _FRAC_MAX)
        return np.searchsorted(self.keys, pages + frac, side="right")

    def _split(self, pages: np.ndarray):
        # Pages created after this window (born later) had no changes in it.
        pages = np.asarray(pages, np.int64)
        later = pages >= self.n_pages
        return np.where(later, 0, pages), later

    def version(self, pages: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Changes since birth up to and including ``t`` (t inside this day)."""
        pages, later = self._split(pages)
        v = self.cum_before[pages] + (self._pos(pages, t) - self.starts[pages])
        return np.where(later, 0, v)

    def last_change(self, pages: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Time of the last change ≤ ``t`` (the birth time if none; NaN if born later)."""
        pages, later = self._split(pages)
        idx = self._pos(pages, t) - 1
        in_day = idx >= self.starts[pages]
        last = np.where(in_day, self.times[np.maximum(idx, 0)] if len(self.times) else 0.0,
                        self.last_before[pages])
        return np.where(later, np.nan, last)

    def nth_change(self, pages: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Time of this day's ``j``-th change (1-based) of each page; inf if none."""
        pages, later = self._split(pages)
        cnt = self.starts[pages + 1] - self.starts[pages]
        ok = (j >= 1) & (j <= cnt) & ~later
        idx = np.where(ok, self.starts[pages] + j - 1, 0)
        return np.where(ok, self.times[idx] if len(self.times) else np.inf, np.inf)


def build_day(day: int, n_pages: int, page_ids: np.ndarray, times: np.ndarray,
              cum_before: np.ndarray, last_before: np.ndarray) -> DayChanges:
    """Assemble a :class:`DayChanges` from unordered (page, time) pairs."""
    order = np.lexsort((times, page_ids))
    page_ids, times = page_ids[order], times[order]
    counts = np.bincount(page_ids, minlength=n_pages)
    starts = np.zeros(n_pages + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    keys = page_ids + np.clip(times - day, 0.0, _FRAC_MAX)
    return DayChanges(day, n_pages, starts, times, keys, cum_before, last_before)


def shard_day_changes(p: WebParams, pages: Pages, ids: np.ndarray, day: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw the changes of pages ``ids`` (one shard) in day ``day``.

    Updates ``pages.burst_on`` for bursty pages. Returns (page ids, times).
    """
    a = np.maximum(pages.born[ids], day)
    b = np.minimum(pages.dies[ids], day + 1.0)
    live = b > a
    kind = pages.kind[ids]
    lam = pages.lam[ids]
    out_ids, out_t = [], []

    sel = live & (kind == POISSON) & (lam > 0)
    cnt = rng.poisson(lam[sel] * (b[sel] - a[sel]))
    rep = np.repeat(np.arange(len(cnt)), cnt)
    out_ids.append(ids[sel][rep])
    out_t.append(a[sel][rep] + rng.random(len(rep)) * (b[sel] - a[sel])[rep])

    weekend = p.weekday_of(day) >= 5
    _publish_at_hour(kind == DAILY, pages, ids, lam, live, a, b, day, rng, out_ids, out_t,
                     p.publish_jitter_min, 0, weekend)

    sel_idx = np.flatnonzero(kind == BURSTY)
    if len(sel_idx):
        bi, bt = _bursty(p, pages, ids[sel_idx], a[sel_idx], b[sel_idx], day, rng)
        out_ids.append(bi)
        out_t.append(bt)

    # Weekly pages last: no draw at all without them, so the draws above stay as they were.
    sel = (kind == WEEKLY) & (pages.weekday[ids] == p.weekday_of(day))
    _publish_at_hour(sel, pages, ids, lam, live, a, b, day, rng, out_ids, out_t,
                     p.publish_jitter_min)

    # Second and third editions of daily publishers, after everything else (no draw without).
    if pages.editions is not None:
        for j in (1, 2):
            sel = (kind == DAILY) & (pages.editions[ids] > j)
            if sel.any():
                _publish_at_hour(sel, pages, ids, lam, live, a, b, day, rng, out_ids, out_t,
                                 p.publish_jitter_min, j, weekend)
    return np.concatenate(out_ids).astype(np.int64), np.concatenate(out_t)


def _publish_at_hour(sel, pages: Pages, ids, lam, live, a, b, day, rng, out_ids, out_t,
                     jitter_min: float = 5.0, edition: int = 0, weekend: bool = False):
    """Pages ``sel`` publish today with probability ``lam`` at their hour ± ``jitter_min``
    (the sd, minutes; daily pages every day, weekly pages on their weekday); ``edition`` j > 0
    is the j-th further edition, j edition gaps after the hour. A moving page uses its new
    hour from its move day on; a weekday-only page skips Saturday and Sunday. Appends to
    ``out_ids``/``out_t``."""
    publish = rng.random(sel.sum()) < lam[sel]
    jitter = rng.normal(0.0, jitter_min / 1440.0, sel.sum())
    page = ids[sel]
    hour = pages.hour[page]
    if pages.move_day is not None and np.isfinite(pages.move_day[page]).any():
        hour = np.where(day >= pages.move_day[page], pages.hour2[page], hour)
    if edition:
        hour = np.mod(hour + edition * pages.edition_gap[page], 1.0)
    t = day + np.clip(hour + jitter, 0.0, 1.0 - 1e-6)
    keep = publish & live[sel] & (t >= a[sel]) & (t < b[sel])
    if weekend and pages.weekdays_only is not None:
        keep &= ~pages.weekdays_only[page]
    out_ids.append(ids[sel][keep])
    out_t.append(t[keep])


def _bursty(p: WebParams, pages: Pages, ids, a, b, day, rng):
    """Markov-modulated Poisson: walk on/off sojourns through the day, vectorised."""
    state = pages.burst_on[ids].copy()
    t = np.full(len(ids), float(day))
    end = day + 1.0
    res_ids, res_t = [], []
    active = np.arange(len(ids))
    while len(active):
        rate_out = np.where(state[active], p.burst_to_off, p.burst_to_on)
        with np.errstate(divide="ignore"):
            dwell = rng.exponential(1.0, len(active)) / rate_out
        seg_end = np.minimum(t[active] + dwell, end)
        # Changes only while "on" and inside the page's lifetime that day.
        lo = np.maximum(t[active], a[active])
        hi = np.minimum(seg_end, b[active])
        on = state[active] & (hi > lo)
        cnt = rng.poisson(pages.lam[ids[active[on]]] * (hi[on] - lo[on]))
        rep = np.repeat(np.arange(len(cnt)), cnt)
        res_ids.append(ids[active[on]][rep])
        res_t.append(lo[on][rep] + rng.random(len(rep)) * (hi[on] - lo[on])[rep])
        flips = seg_end < end
        state[active[flips]] = ~state[active[flips]]
        t[active] = seg_end
        active = active[flips]
    pages.burst_on[ids] = state
    return np.concatenate(res_ids) if res_ids else np.empty(0, np.int64), \
        np.concatenate(res_t) if res_t else np.empty(0)
