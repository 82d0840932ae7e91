"""What a push signal says besides "changed": "not changed since our copy" (pure numpy).

A sitemap ``<lastmod>`` (or a feed's newest entry, a WebSub or IndexNow ping) names the
page's last change. Newer than our last confirmed copy (``state.last_known_at``) it is a
claim of a change (:func:`jobs.core.state_update.fold_day` arms it, and a later fetch scores
it: :func:`jobs.core.observations.score_claims`). Not newer, it says the copy was still
current when the signal was read: evidence of *no* change, which this module turns into a
later start of the page's visit rhythm.

Rules (docs/allocation.md, "Signals that defer"):

* Only the latest signal of the day per URL counts (a newer one of the same day is a change
  claim) and only from a host whose signals are trusted (``hosts.signal_trusted``: its
  change claims were scored accurate, :func:`jobs.core.trust.signal_trust`); a host that
  sends stale lastmods is never trusted, since its claims score wrong.
* The evidence is dated at the start of the signal's day D (00:00 UTC): the signal was read
  some time during D, so that is the latest instant it vouches for without knowing when.
  Evidence not later than the confirmed copy adds nothing and is not kept.
* The planner moves a page's rhythm anchor (its last fetch) to the evidence, at most
  ``signals.max_defer_days`` later (:func:`deferred_anchor`): a trusted host can push a
  visit back by that much and no more, so every page is still visited at least every
  1/f + max_defer, and the audit sample (fetched on its own cadence, whatever the plan)
  measures the freshness this costs if a trusted host's "not changed" is wrong.
"""
from __future__ import annotations

import numpy as np


def no_change_evidence(rows, signaled_s, trusted, last_known_s, day_start_s: float):
    """The rows whose signals of the day say "not changed since the confirmed copy".

    Parameters
    ----------
    rows : array of int
        The state row of each signal.
    signaled_s : array of float
        Each signal's claimed change time (epoch seconds).
    trusted : array of bool
        Whether each signal's host is signal-trusted.
    last_known_s : array of float
        Per state row, when the stored copy was last confirmed current (NaN: no copy).
    day_start_s : float
        The signals' day D at 00:00 UTC (epoch seconds).

    Returns
    -------
    (rows, evidence_s) : arrays
        One entry per state row with evidence: the row and the instant the copy is known
        current at (``day_start_s``). A row whose latest signal of the day is newer than its
        copy, or untrusted, or whose copy was confirmed at or after the day's start, has none.
    """
    rows = np.asarray(rows, dtype=np.int64)
    at = np.asarray(signaled_s, dtype=float)
    trusted = np.asarray(trusted, dtype=bool)
    known = np.asarray(last_known_s, dtype=float)
    if rows.size == 0:
        return rows, np.empty(0)
    order = np.lexsort((at, rows))
    latest = np.append(rows[order][1:] != rows[order][:-1], True)
    r, a, tr = rows[order][latest], at[order][latest], trusted[order][latest]
    copy_at = known[r]
    ok = tr & np.isfinite(copy_at) & (a <= copy_at) & (copy_at < day_start_s)
    return r[ok], np.full(int(ok.sum()), float(day_start_s))


def deferred_anchor(anchor_s, unchanged_s, max_defer_s: float):
    """Each page's rhythm anchor moved to its trusted "not changed" evidence, at most
    ``max_defer_s`` past the anchor.

    Parameters
    ----------
    anchor_s : array of float
        The instant each page's visit rhythm runs from
        (:func:`jobs.core.host_plan.rhythm_anchor`; NaN: never fetched, due now).
    unchanged_s : array of float
        ``state.signal_unchanged_at`` (NaN: none).
    max_defer_s : float
        ``signals.max_defer_days`` in seconds; 0 turns deferral off.

    Returns
    -------
    (anchor_s, deferred) : arrays
        The anchor to plan from, and whether the evidence moved it.
    """
    anchor = np.asarray(anchor_s, dtype=float)
    ev = np.asarray(unchanged_s, dtype=float)
    if max_defer_s <= 0:
        return anchor.copy(), np.zeros(anchor.shape, dtype=bool)
    moved = np.fmin(ev, anchor + max_defer_s)
    deferred = np.isfinite(anchor) & np.isfinite(ev) & (moved > anchor)
    return np.where(deferred, moved, anchor), deferred
