"""Push signals (sitemap lastmod, feed entries, WebSub, IndexNow) and their buffer.

Accurate hosts announce a share of their real changes after a source-specific
delay. Stale hosts announce some real changes with an old lastmod and also
announce changes that never happened.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lab.sim.params import SIGNAL_SOURCES, WebParams
from lab.sim.population import SIG_ACCURATE, SIG_STALE, Hosts, Pages
from lab.sim.rand import SIGNALS, stream

# Mean delay (days) from change to announcement, per source.
_DELAY = np.array([0.5, 1.0 / 24, 1.0 / 1440, 5.0 / 1440])


def shard_day_signals(p: WebParams, hosts: Hosts, pages: Pages, shard_ids: np.ndarray,
                      change_ids: np.ndarray, change_t: np.ndarray, day: int) -> dict:
    """Signals caused on ``day`` by one shard's changes; columns as arrays.

    Returns a dict with ``page``, ``signaled_at`` (claimed change time),
    ``source`` (index into ``SIGNAL_SOURCES``) and ``emit_at`` (when the
    crawler can see it; may fall on a later day).
    """
    rng = stream(p.seed, SIGNALS, int(pages.shard[shard_ids[0]]) if len(shard_ids) else 0, day)
    # Order by (page, time) so draws do not depend on how changes were concatenated.
    order = np.lexsort((change_t, change_ids))
    change_ids, change_t = change_ids[order], change_t[order]
    # One announcement per page per day (its latest change), as a sitemap
    # lastmod or a feed's newest entry would show.
    latest = np.append(change_ids[1:] != change_ids[:-1], True) if len(change_ids) else \
        np.empty(0, bool)
    change_ids, change_t = change_ids[latest], change_t[latest]
    cls = hosts.signal_class[pages.host[change_ids]]
    src = hosts.signal_source[pages.host[change_ids]]
    u = rng.random(len(change_ids))
    delay = rng.exponential(1.0, len(change_ids)) * _DELAY[src]
    back = rng.uniform(1.0, 30.0, len(change_ids))
    accurate = (cls == SIG_ACCURATE) & (u < p.signal_coverage)
    stale_real = (cls == SIG_STALE) & (u < 0.5)
    keep = accurate | stale_real
    claimed = np.where(stale_real, change_t - back, change_t)
    # Fabricated announcements on stale hosts: a "change now" that did not happen.
    cand = shard_ids[(hosts.signal_class[pages.host[shard_ids]] == SIG_STALE)
                     & (pages.born[shard_ids] <= day) & (pages.dies[shard_ids] > day)]
    fake = cand[rng.random(len(cand)) < p.stale_signal_rate]
    fake_t = day + rng.random(len(fake))
    return {
        "page": np.concatenate([change_ids[keep], fake]),
        "signaled_at": np.concatenate([claimed[keep], fake_t]),
        "source": np.concatenate([src[keep], hosts.signal_source[pages.host[fake]]]).astype(np.int8),
        "emit_at": np.concatenate([change_t[keep] + delay[keep], fake_t]),
    }


class SignalBuffer:
    """Signals generated so far, retrievable by the day they become visible."""

    def __init__(self):
        self._parts: list[dict] = []

    def add(self, part: dict) -> None:
        """Append a batch from :func:`shard_day_signals`."""
        if len(part["page"]):
            self._parts.append(part)

    def _all(self) -> dict:
        if not self._parts:
            return {"page": np.empty(0, np.int64), "signaled_at": np.empty(0),
                    "source": np.empty(0, np.int8), "emit_at": np.empty(0)}
        merged = {k: np.concatenate([q[k] for q in self._parts]) for k in self._parts[0]}
        self._parts = [merged]
        return merged

    def prune(self, before_day: int) -> None:
        """Forget signals visible before ``before_day``."""
        a = self._all()
        keep = a["emit_at"] >= before_day
        self._parts = [{k: v[keep] for k, v in a.items()}]

    def for_day(self, day: int, pages: Pages) -> pd.DataFrame:
        """Signals visible during ``day`` as (page, url, signaled_at, source, emit_at)."""
        a = self._all()
        m = (a["emit_at"] >= day) & (a["emit_at"] < day + 1)
        order = np.lexsort((a["page"][m], a["emit_at"][m]))
        page = a["page"][m][order]
        return pd.DataFrame({
            "page": page, "url": pages.url[page], "signaled_at": a["signaled_at"][m][order],
            "source": np.array(SIGNAL_SOURCES, dtype=object)[a["source"][m][order]],
            "emit_at": a["emit_at"][m][order]})
