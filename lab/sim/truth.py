"""Exact truth accounting: the crawler's copies versus the true change history.

A copy is *fresh* while it holds the page's current version and its *age* is
the time since the first change it missed (Cho & Garcia-Molina 2003). Both
are integrated exactly, day by day, from the true change times and the fetch
events of the day, so a window's figures are sums of daily sums.

A page counts from its birth until its death; a page never fetched holds no
copy and counts as stale since birth. Time a dead page stays in the index
(copy held, death not yet seen by a 404/410) is reported separately.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# Fetch outcomes as seen by the copy.
NO_EFFECT, FULL, NOT_MODIFIED, GONE = 0, 1, 2, 3


@dataclass
class CopyState:
    """The crawler's copy of every page (index = page id)."""

    version: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    stale_since: np.ndarray = field(default_factory=lambda: np.empty(0))
    known_dead: np.ndarray = field(default_factory=lambda: np.empty(0, bool))
    visits: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    last_fetch: np.ndarray = field(default_factory=lambda: np.empty(0))

    def grow(self, born: np.ndarray) -> None:
        """Extend to ``len(born)`` pages; new pages hold no copy (stale since birth)."""
        k = len(born) - len(self.version)
        if k <= 0:
            return
        self.version = np.concatenate([self.version, np.full(k, -1, np.int64)])
        self.stale_since = np.concatenate([self.stale_since, born[-k:]])
        self.known_dead = np.concatenate([self.known_dead, np.zeros(k, bool)])
        self.visits = np.concatenate([self.visits, np.zeros(k, np.int64)])
        self.last_fetch = np.concatenate([self.last_fetch, np.full(k, np.nan)])


def account_day(web, copies: CopyState, day: int, page: np.ndarray, t: np.ndarray,
                outcome: np.ndarray, version: np.ndarray) -> dict:
    """Integrate freshness and age over ``[day, day+1)`` and apply the day's fetches.

    Parameters
    ----------
    web : SyntheticWeb
    copies : CopyState
        Updated in place to the state at the end of the day.
    day : int
    page, t, outcome, version : ndarray
        One entry per fetch attempt of the day on a known page id: time,
        outcome code (``NO_EFFECT``, ``FULL``, ``NOT_MODIFIED``, ``GONE``) and,
        for ``FULL``, the version received.

    Returns
    -------
    dict
        Day sums: ``obs_days``, ``fresh_days``, ``age_days2`` (∫ age dt) and
        their importance-weighted ``w_`` twins, ``dead_in_index_days``,
        ``pages_observed``, ``fetches_found_change``, plus per-page arrays
        ``page_fresh`` and ``page_obs``.
    """
    pg = web.pages
    n = web.n_pages
    win = web.window(day)
    copies.grow(pg.born)
    page = np.asarray(page, np.int64)
    if len(page) and (page.min() < 0 or page.max() >= n):
        raise IndexError("fetch events must reference known page ids")
    # Segments: one starting at day start per page, one after each fetch.
    seg_page = np.concatenate([np.arange(n), page])
    seg_t = np.concatenate([np.full(n, float(day)), np.asarray(t, float)])
    is_event = np.concatenate([np.zeros(n, bool), np.ones(len(page), bool)])
    kind = np.concatenate([np.full(n, FULL), np.asarray(outcome)])
    ver = np.concatenate([copies.version, np.asarray(version, np.int64)])
    order = np.lexsort((is_event, seg_t, seg_page))
    seg_page, seg_t, is_event, kind, ver = (a[order] for a in (seg_page, seg_t, is_event, kind, ver))
    idx = np.arange(len(seg_page))
    group_start = np.maximum.accumulate(np.where(~is_event, idx, 0))
    defined = ~is_event | (kind == FULL)
    src = np.maximum.accumulate(np.where(defined, idx, 0))
    prev_ver = np.where(idx > group_start, ver[src[np.maximum(idx - 1, 0)]], -1)
    ver = ver[src]  # carry the held version forward across 304s and errors
    dead0 = np.concatenate([copies.known_dead, np.zeros(len(page), bool)])[order]
    dead_flag = np.maximum.accumulate(np.where(dead0 | (is_event & (kind == GONE)), idx, -1))
    known_dead = dead_flag >= group_start

    cum = win.cum_before[seg_page]
    j = ver + 1 - cum
    carried = copies.stale_since[seg_page]
    tau = np.where(j >= 1, win.nth_change(seg_page, np.maximum(j, 1)), carried)

    last_in_group = np.append(seg_page[1:] != seg_page[:-1], True)
    seg_end = np.where(last_in_group, day + 1.0, np.append(seg_t[1:], day + 1.0))
    born, dies = pg.born[seg_page], pg.dies[seg_page]
    o_s = np.maximum(seg_t, born)
    o_e = np.minimum(seg_end, dies)
    obs = np.clip(o_e - o_s, 0.0, None)
    fresh = np.where(o_e > o_s, np.clip(np.minimum(tau, o_e) - o_s, 0.0, None), 0.0)
    a = np.maximum(o_s, tau)
    with np.errstate(invalid="ignore"):  # inf - inf where never stale; masked out
        age = np.where(o_e > a, (o_e - a) * ((o_e + a) / 2.0 - tau), 0.0)
    held = (ver >= 0) & ~known_dead
    dead_idx = np.where(held, np.clip(seg_end - np.maximum(seg_t, dies), 0.0, None), 0.0)
    found = is_event & (kind == FULL) & (ver != prev_ver)

    w = pg.importance[seg_page]
    page_fresh = np.bincount(seg_page, fresh, minlength=n)
    page_obs = np.bincount(seg_page, obs, minlength=n)
    out = {
        "obs_days": float(obs.sum()), "fresh_days": float(fresh.sum()),
        "age_days2": float(age.sum()), "w_obs_days": float((w * obs).sum()),
        "w_fresh_days": float((w * fresh).sum()), "w_age_days2": float((w * age).sum()),
        "dead_in_index_days": float(dead_idx.sum()),
        "pages_observed": int((page_obs > 0).sum()),
        "fetches_found_change": int(found.sum()) + int((is_event & (kind == GONE)
                                                        & ~np.append(False, known_dead[:-1])).sum()),
        "page_fresh": page_fresh, "page_obs": page_obs,
    }
    last = np.flatnonzero(last_in_group)
    copies.version = ver[last]
    copies.stale_since = tau[last]
    copies.known_dead = known_dead[last]
    copies.visits += np.bincount(page, minlength=n)
    latest = _last_time(page, t, n)
    # Today's fetches are later than any earlier one, so they simply overwrite.
    copies.last_fetch = np.where(np.isnan(latest), copies.last_fetch, latest)
    return out


def _last_time(page, t, n):
    res = np.full(n, np.nan)
    order = np.argsort(t, kind="stable")
    res[page[order]] = np.asarray(t, float)[order]
    return res


def summarize(days: pd.DataFrame, budget: float | None = None,
              copies: CopyState | None = None, alive_mask: np.ndarray | None = None) -> dict:
    """Window metrics from daily records (rows of :meth:`Simulation.step` results).

    Parameters
    ----------
    days : DataFrame
        One row per simulated day with the day sums and fetch counters.
    budget : float, optional
        Fetch budget per day; overruns are fetches above it, summed.
    copies, alive_mask : optional
        Current copies and the pages to consider for "never visited".
    """
    if days.empty:
        raise ValueError("no simulated days in the window")
    s = days.sum(numeric_only=True)
    fetches = float(s["fetches"])
    out = {
        "days": int(len(days)),
        "freshness": s["fresh_days"] / s["obs_days"] if s["obs_days"] else float("nan"),
        "freshness_weighted": s["w_fresh_days"] / s["w_obs_days"] if s["w_obs_days"] else float("nan"),
        "age_days": s["age_days2"] / s["obs_days"] if s["obs_days"] else float("nan"),
        "age_days_weighted": s["w_age_days2"] / s["w_obs_days"] if s["w_obs_days"] else float("nan"),
        "fetches": int(fetches),
        "found_change_share": s["fetches_found_change"] / fetches if fetches else float("nan"),
        "bytes": int(s["bytes"]),
        "not_modified_rate": s["status_304"] / fetches if fetches else float("nan"),
        "status_503": int(s["status_503"]), "status_429": int(s["status_429"]),
        "politeness_gap_violations": int(s["gap_violations"]),
        "politeness_cap_violations": int(s["cap_violations"]),
        "dead_in_index_days": float(s["dead_in_index_days"]),
    }
    if budget is not None:
        out["budget_overrun"] = int(np.clip(days["fetches"] - budget, 0, None).sum())
    if copies is not None:
        mask = np.ones(len(copies.visits), bool) if alive_mask is None else alive_mask
        out["never_visited_share"] = float((copies.visits[mask] == 0).mean()) if mask.any() else 0.0
    return out


def politeness_violations(fetch_logs: pd.DataFrame, host_policy: pd.DataFrame) -> pd.DataFrame:
    """Per-host politeness violations found in fetch logs.

    A gap violation is a request less than ``crawl_delay_s`` after the
    previous request to the same host; a cap violation is each request beyond
    ``max_fetches_per_day`` on one UTC day.

    Returns
    -------
    DataFrame
        ``host``, ``requests``, ``gap_violations``, ``cap_violations``; only
        hosts with at least one violation.
    """
    need = {"host", "fetched_at"}
    if not need <= set(fetch_logs.columns):
        raise ValueError(f"fetch_logs needs columns {sorted(need)}")
    log = fetch_logs[["host", "fetched_at"]].merge(host_policy, on="host", how="left")
    log = log.sort_values(["host", "fetched_at"], kind="stable")
    gap = log.groupby("host")["fetched_at"].diff().dt.total_seconds()
    log["gap_v"] = (gap < log["crawl_delay_s"] - 1e-3).fillna(False)
    day = log["fetched_at"].dt.floor("D")
    rank = log.groupby(["host", day]).cumcount()
    cap = log["max_fetches_per_day"].astype("float64")
    log["cap_v"] = (rank >= cap).fillna(False)
    res = log.groupby("host").agg(requests=("gap_v", "size"), gap_violations=("gap_v", "sum"),
                                  cap_violations=("cap_v", "sum")).reset_index()
    return res[(res.gap_violations > 0) | (res.cap_violations > 0)].reset_index(drop=True)
