"""From per-URL visit rates to the next day's per-host plan (pure pandas, no Spark).

Date semantics: the run for logical date D plans the window [D+1 00:00, D+2 00:00) UTC.

Steps, per host (each a vectorised operation over the pages of many hosts at once):

1. ``due_visits``: each URL's next visit is due at its last fetch + 1/f; visits due in
   the window are listed (several for f > 1/day), spaced 1/f apart so a URL's visits stay
   evenly spaced (even spacing beats random visits at the same rate, ~24% in freshness).
   An *overdue* URL (last fetch + 1/f before the window) resumes its rhythm at the next
   point of its grid last fetch + k/f, k >= 1, instead of all missed visits piling up at
   the window start: then the visits due per day equal the planned rates in expectation
   (Σ f = the budget for a budget-aware policy), so the day's priority cut trims
   fluctuations instead of replacing the policy's allocation by its own ranking.
   Never-fetched URLs and push signals are due at the window start.
2. ``apply_host_cap``: at most ``cap`` visits per host per day (politeness); fast lane,
   audit visits and trusted push signals first, then by priority = importance x
   P(changed since the last confirmed copy). A mass interval shrink on one host therefore only
   reorders its visits: the cap still holds.
3. after the global per-lane budget cut (done in Spark), ``place_in_slots`` puts the
   host's visits at least ``crawl_delay`` apart, each as near its due time as allowed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from jobs.core import timing
from jobs.core.allocation_kkt import stale_visit_value
from jobs.core.freshness import p_changed
from jobs.core.host_groups import HostGroups
from jobs.core.times import DAY_S

LANE_ORDER = {"fast": 0, "audit": 0, "refresh": 1, "discovery": 1}


def host_cap(crawl_delay_s, max_fetches_per_day=None) -> np.ndarray:
    """Visits a host allows per day: 86400 / crawl delay, or its explicit cap if lower."""
    # Same microsecond arithmetic as place_in_slots, so a full host always fits; at least
    # 1 us, so a delay below the schedule's resolution (1e-12 s) cannot divide by zero
    # and wrap the int64 cap negative (the host would silently get no rows).
    delay_us = np.maximum(np.ceil(np.asarray(crawl_delay_s, dtype=float) * 1e6 - 1e-6), 1.0)
    cap = np.floor(DAY_S * 1e6 / delay_us)
    if max_fetches_per_day is not None:
        explicit = np.asarray(pd.to_numeric(pd.Series(np.atleast_1d(max_fetches_per_day))),
                              dtype=float)
        cap = np.where(np.isnan(explicit), cap, np.minimum(cap, explicit))
    return cap.astype(np.int64)


def due_visits(pages: pd.DataFrame, window_start: float, window_end: float,
               max_visits_per_url: int = 24, resume_rhythm: bool = True,
               lag_s: float = 0.0) -> pd.DataFrame:
    """Expand pages into the visits due inside ``[window_start, window_end)``.

    Parameters
    ----------
    pages : DataFrame
        Columns ``url``, ``rate`` (visits/day, > 0), ``rhythm_from_s`` (epoch seconds the
        visit rhythm runs from, NaN if never fetched: the last fetch, or the last success
        when that fetch failed, :func:`jobs.core.host_plan.rhythm_anchor`), ``last_success_s``
        (the instant P(changed) counts from: the last confirmed copy, or the last success on a
        host whose 304s are trusted, :func:`jobs.core.plan_work.stale_since`), ``lambda_hat``,
        ``importance``, ``lane``.
    window_start, window_end : float
        Epoch seconds.
    resume_rhythm : bool
        Overdue URLs wait for the next point of their grid (default) rather than all
        being due at the window start.
    lag_s : float
        With columns ``period_s``, ``phase_s``, ``spread_s`` (a learnt rhythm, NaN: none),
        a timed page's first visit moves to the first ``phase + lag_s + 2 spread`` of its
        period after its last visit plus k - 1 periods when it is visited once every k >= 1
        periods (:func:`jobs.core.timing.next_phase_after`), else to the nearest one
        (:func:`jobs.core.timing.snap_to_phase`), and the rest follow 1/f apart. A page
        with a true ``signal`` column (a push signal: due at the window start) keeps the
        window start only when that instant falls after the window. With columns
        ``recheck_s`` and ``recheck_p`` (a burst in progress, :mod:`jobs.core.bursts`; NaN:
        none), an untimed page's first visit is at ``recheck_s`` (or the window start) when
        that is sooner, with P(changed) at least ``recheck_p``.

    Returns
    -------
    DataFrame
        One row per visit: the page's columns plus ``due_s``, ``p_changed``, ``priority``.
    """
    rate = pages["rate"].to_numpy(dtype=float)
    if np.any(~(rate > 0)):
        raise ValueError("every page needs a positive visit rate")
    period = DAY_S / rate
    last = pages["rhythm_from_s"].to_numpy(dtype=float)
    if resume_rhythm:
        # Next grid point last + k * period (k >= 1) at or after the window start.
        k_next = np.maximum(1.0, np.ceil((window_start - last) / period - 1e-9))
        first_due = np.where(np.isnan(last), window_start, last + k_next * period)
    else:  # catch up: every overdue URL is due at the window start
        first_due = np.where(np.isnan(last), window_start, last + period)
    first_due = np.maximum(first_due, window_start)
    if "period_s" in pages.columns:
        r = timing.Rhythm(*(pages[c].to_numpy(dtype=float)
                            for c in ("period_s", "phase_s", "spread_s")))
        # A timed page's next visit is the phase instant nearest one visit period after its
        # last; once that has passed, the next phase instant from the window on. (Snapping the
        # next grid point of each day's window instead skipped a whole period whenever the
        # nearest phase fell in the next window: weekly pages planned at one visit a week got
        # one in four weeks.)
        after_last = np.where(np.isnan(last), window_start, last + period)
        snapped = timing.snap_to_phase(after_last, period, r, lag_s, -np.inf)
        # Visited once every k >= 1 periods: the first phase instant after k - 1 periods from
        # the last visit (jobs.core.timing, "Placement"), not the one nearest k periods on.
        periods = period / np.where(r.timed, r.period_s, DAY_S)
        slow = r.timed & np.isfinite(last) & (periods >= 1.0 - 1e-9)
        first_after = timing.next_phase_after(last + (periods - 1.0) * r.period_s, r, lag_s)
        snapped = np.where(slow, first_after, snapped)
        snapped = np.where(snapped < window_start, timing.snap_to_phase(
            np.full(len(pages), window_start), period, r, lag_s, window_start), snapped)
        # A push signal says a timed page changed at its last phase: a visit just after its
        # next phase keeps it fresh until the change after that, one at the window start only
        # until that phase. So it waits for the phase when it comes inside the window.
        signal = pages["signal"].to_numpy(dtype=bool) if "signal" in pages.columns \
            else np.zeros(len(pages), bool)
        first_due = np.where(r.timed & ~(signal & (snapped >= window_end)), snapped, first_due)
    recheck = np.zeros(len(pages), bool)
    if "recheck_s" in pages.columns:
        at = np.maximum(pages["recheck_s"].to_numpy(dtype=float), window_start)
        untimed = ~np.isfinite(pages["period_s"].to_numpy(dtype=float)) \
            if "period_s" in pages.columns else np.ones(len(pages), bool)
        recheck = untimed & np.isfinite(at) & (at < first_due)
        first_due = np.where(recheck, at, first_due)
    n = np.where(first_due < window_end,
                 np.ceil((window_end - first_due) / period).astype(np.int64), 0)
    n = np.minimum(n, max_visits_per_url)
    rows = np.repeat(np.arange(len(pages)), n)
    k = np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)
    visits = pages.iloc[rows].reset_index(drop=True)
    visits["due_s"] = first_due[rows] + k * period[rows]
    since = pages["last_success_s"].to_numpy(dtype=float)[rows]
    elapsed_days = np.where(k == 0, np.where(np.isnan(since), np.inf,
                                             visits["due_s"].to_numpy() - since) / DAY_S,
                            period[rows] / DAY_S)
    pc = p_changed(visits["lambda_hat"].to_numpy(dtype=float), elapsed_days)
    pc = np.where(np.isinf(elapsed_days), 1.0, pc)
    if recheck.any():
        first = recheck[rows] & (k == 0)
        pc = np.where(first, np.fmax(pc, pages["recheck_p"].to_numpy(dtype=float)[rows]), pc)
    visits["p_changed"] = pc
    visits["priority"] = visits["importance"].to_numpy(dtype=float) * visits["p_changed"]
    return visits


def backfill_visits(pages: pd.DataFrame, window_start: float, window_end: float,
                    horizon_s: float) -> pd.DataFrame:
    r"""Each page's next visit due in ``[window_end, window_end + horizon_s)``, pulled forward
    to the window's end, as candidates for budget the due visits leave unused.

    At the end of the window a pulled visit moves as little as possible off its page's
    rhythm. P(changed) is recomputed at that earlier instant, from the later of the last
    success and the page's last visit inside the window (optional column ``after_s``, NaN:
    none). The priority is the freshness the pull buys, in importance x days: if the page
    changed (P(changed)), its copy is fresh from the pull until its next change or until
    the visit would have come anyway, :math:`\Delta` days later,
    :math:`P\,w\,(1 - e^{-\lambda\Delta})/\lambda`
    (:func:`jobs.core.allocation_kkt.stale_visit_value`). Importance x P(changed) would pull
    the fast pages first, which are stale again within the hour, and visits due an hour
    after the window as readily as those due a day after. Never-fetched pages are due in
    the window already and are not repeated here.
    """
    if horizon_s <= 0 or len(pages) == 0:
        return due_visits(pages.iloc[0:0], window_start, window_end)
    nxt = due_visits(pages, window_end, window_end + horizon_s, max_visits_per_url=1)
    nxt = nxt[~np.isnan(nxt["rhythm_from_s"].to_numpy(dtype=float))].reset_index(drop=True)
    due = window_end - 1.0
    since = nxt["last_success_s"].to_numpy(dtype=float)
    if "after_s" in nxt.columns:
        since = np.fmax(since, nxt["after_s"].to_numpy(dtype=float))
    elapsed = np.where(np.isnan(since), np.inf, (due - since) / DAY_S)
    lam = nxt["lambda_hat"].to_numpy(dtype=float)
    pc = p_changed(lam, np.maximum(elapsed, 0.0))
    gained_days = (nxt["due_s"].to_numpy(dtype=float) - due) / DAY_S
    nxt["due_s"] = due
    nxt["p_changed"] = np.where(np.isinf(elapsed), 1.0, pc)
    nxt["priority"] = nxt["p_changed"].to_numpy() * stale_visit_value(
        np.nan_to_num(lam), nxt["importance"].to_numpy(dtype=float), gained_days)
    return nxt


def rhythm_check_visits(pages: pd.DataFrame, anchor_s, phase_s, half_width_s,
                        window_start: float, window_end: float) -> pd.DataFrame:
    r"""One visit per page that checks its day rhythm, halfway from ``anchor`` (its last
    visit, after its phase) to its next phase window (:func:`jobs.core.timing.rhythm_check_at`),
    where that instant falls in ``[window_start, window_end)``; candidates for the budget the
    day leaves unused (module notes of :mod:`jobs.core.timing`, "Rhythm checks").

    A once-a-day publisher does not change before the check, so at λ̂ the visit is priced as
    a Poisson page's pull would be (:func:`backfill_visits`): P(changed) since the anchor
    times what it buys until the window opens, :math:`P\,w\,(1 - e^{-\lambda\Delta})/\lambda`
    with Δ the same half interval. ``pages`` has ``lambda_hat`` and ``importance``.
    """
    anchor = np.asarray(anchor_s, dtype=float)
    at = timing.rhythm_check_at(anchor, phase_s, half_width_s)
    ok = np.isfinite(at) & (at >= window_start) & (at < window_end)
    visits = pages[ok].reset_index(drop=True)
    half_days = (at[ok] - anchor[ok]) / DAY_S
    lam = np.nan_to_num(visits["lambda_hat"].to_numpy(dtype=float))
    pc = p_changed(lam, half_days)
    visits["due_s"] = at[ok]
    visits["p_changed"] = pc
    visits["priority"] = pc * stale_visit_value(lam, visits["importance"].to_numpy(dtype=float),
                                                half_days)
    return visits


def claim_order(visits: pd.DataFrame) -> np.ndarray:
    """Which visits claim a host's capacity first: 0 for the fast lane, audits and push
    signals (they jump the queue), 1 for the rest; ties go by priority."""
    order = visits["lane"].map(LANE_ORDER).fillna(1).to_numpy()
    if "signal" in visits.columns:
        order = np.where(visits["signal"].fillna(False).to_numpy(bool), 0, order)
    return order


def apply_host_caps(visits: pd.DataFrame, hosts: HostGroups, caps):
    """Split the visits of many hosts into (kept, carried_over) under each host's daily cap.

    ``hosts`` gives each visit's host; ``caps`` the cap per host. One sort ranks every
    host's visits by (host, :func:`claim_order`, priority descending, due time, URL), ties
    keeping the visits' order; a visit is kept when its rank within its host is below the
    host's cap. Both frames come in that order.
    """
    order, rank = hosts.rank({"_o": claim_order(visits), "priority": visits["priority"],
                              "due_s": visits["due_s"], "url": visits["url"]},
                             ascending=[True, False, True, True])
    ranked = visits.iloc[order]
    within = rank < np.maximum(np.asarray(caps, dtype=np.int64), 0)[hosts.codes[order]]
    return ranked[within], ranked[~within]


def apply_host_cap(visits: pd.DataFrame, cap: int):
    """Split one host's visits into (kept, carried_over) under its daily cap."""
    return apply_host_caps(visits, HostGroups.single(len(visits)), [int(cap)])


def place_in_slots(due_s, crawl_delay_s: float, window_start: float, window_end: float,
                   priority=None) -> np.ndarray:
    """Times for one host's visits, >= ``crawl_delay_s`` apart, each near its due time.

    Visits are taken in due order (higher priority first on ties). A forward pass
    ``t_i = max(due_i, t_{i-1} + d)`` is solved in closed form as
    ``t_i = i*d + cummax(due_i - i*d)``; a backward pass pulls the tail back so the last
    visit is at most ``window_end - d``. That is what keeps politeness across midnight by
    construction: the next window's first visit is at or after ``window_end``, so the
    last visit of one day and the first of the next are a full crawl delay apart without
    either day's plan knowing the other (provided the host's delay did not grow
    overnight). Capacity is unchanged: slots ``w0, w0 + d, ..., w0 + (n-1)d <= w1 - d``
    hold ``n = floor((w1 - w0) / d)`` visits, exactly ``host_cap(d)`` for a one-day
    window. The arithmetic is in integer microseconds (the schedule's resolution), so the
    written times keep the gap exactly. Needs ``len(due_s) <= host_cap(d)`` for a one-day
    window.

    Returns the times (float epoch seconds, whole microseconds) in the input order.
    """
    due = np.asarray(due_s, dtype=float)
    n = len(due)
    if n == 0:
        return due
    d = _delay_us(crawl_delay_s)
    w0, w1 = int(round(window_start * 1e6)), int(round(window_end * 1e6))
    if n * d > w1 - w0:
        raise ValueError(f"{n} visits at {crawl_delay_s}s apart do not fit in the window")
    prio = np.zeros(n) if priority is None else -np.asarray(priority, dtype=float)
    order = np.lexsort((prio, due))
    # One crawl delay before the next window opens (and always inside [w0, w1)); the
    # n * d check above guarantees last_slot - (n-1)*d >= w0.
    last_slot = w1 - d
    due_us = np.clip(np.ceil(due[order] * 1e6), w0, last_slot).astype(np.int64)
    i = np.arange(n, dtype=np.int64) * d
    t = i + np.maximum.accumulate(due_us - i)
    # Backward pass: t_i = min(t_i, t_{i+1} - d) with the last visit at most last_slot;
    # in w_i = t_i - i*d it is a reversed running minimum.
    rev = (t - i)[::-1]
    rev[0] = min(rev[0], last_slot - i[-1])
    t = np.minimum.accumulate(rev)[::-1] + i
    out = np.empty(n, dtype=np.int64)
    out[order] = t
    return out / 1e6


def place_host_visits(due_s, crawl_delay_s: float, window_start: float, window_end: float,
                      priority=None, *, not_before: float = float("nan"),
                      spread: bool = False) -> np.ndarray:
    """:func:`place_in_slots` for one host under its health.

    ``not_before`` (epoch seconds, NaN: none) is the host's Retry-After wait: no visit
    before it (the allocator gave the host only the share of the window after it, so the
    visits fit). ``spread`` (a host under a served-rate limit) spaces the visits evenly over
    what is left of the window, ``max(crawl delay, window / n)`` apart, instead of near their
    due times: a struggling host must not get its day's visits in its first hours.
    """
    start = window_start
    if np.isfinite(not_before) and not_before > window_start:
        start = min(np.ceil(not_before * 1e6) / 1e6, window_end)
    n = len(np.asarray(due_s))
    delay = float(crawl_delay_s)
    if spread and n:
        # whole microseconds, one under the even share, so the rounding up in _delay_us
        # can never make n slots overflow the window
        even_us = (int(round(window_end * 1e6)) - int(round(start * 1e6))) // n - 1
        delay = max(delay, even_us / 1e6)
    return place_in_slots(due_s, delay, start, window_end, priority)


def _delay_us(crawl_delay_s) -> int:
    """The crawl delay in whole microseconds, rounded up, at least 1 (as ``host_cap``)."""
    return max(int(np.ceil(float(crawl_delay_s) * 1e6 - 1e-6)), 1)
