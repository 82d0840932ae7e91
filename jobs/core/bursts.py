r"""A burst in progress: a change far more recent than the page's rate explains, and the early
visit that catches the burst's end (pure numpy).

**Model.** Live pages, catalogues and threads change in bursts: many changes an hour for a
few hours, then nothing for days -- a Markov-modulated Poisson process (Fischer &
Meier-Hellstern, "The Markov-modulated Poisson process (MMPP) cookbook", Performance
Evaluation 18(2), 1993; bursts in document streams: Kleinberg, "Bursty and hierarchical
structure in streams", KDD 2002). Seen from fetches days apart such a page is Poisson at the
rate of its bursts, which is what λ̂ estimates. What Poisson spacing misses is *where* a visit
lands: a copy fetched mid-burst is stale within the hour and stays stale until the next
visit, days later; a copy fetched just after the burst stays fresh until the next burst.

**Detection.** A trusted Last-Modified gives the page's age :math:`a` at its last fetch.
Under the page's Poisson rate, :math:`P(\text{age} \le a) = 1 - e^{-\hat\lambda a}`; where
that is at most ``burst_max_poisson_prob`` the last change is far more recent than λ̂
explains, and the page is taken to be mid-burst. A Poisson page passes with exactly that
probability (a false alarm costs it one early visit); a Last-Modified within
:data:`jobs.core.state_update.LAST_MODIFIED_NOW_S` of the response is the server's clock, not
a change, and never passes. Timed pages (:mod:`jobs.core.timing`) are excluded: they are
visited just after their change by design.

**Action.** The page's next visit moves to ``burst_recheck_s`` after that fetch when that is
sooner than its rhythm (the rest of its visits follow 1/f after it), with
:math:`P(\text{changed}) = 1 - e^{-r/a}`: the burst's own rate, read as :math:`1/a`, not the
page's long-run λ̂, so the day's cut ranks it as a page that keeps changing. A recheck that
finds the burst still going (a new change, another short age) is followed by another; the
first that finds it over (no new change: the planner rechecks only a page whose last fetch
found a change, :func:`jobs.core.host_plan._early_visits`) returns the page to its rhythm.
So the rate rises while a burst lasts and falls after it, with no state beyond the last
fetch, its Last-Modified and whether it found a change. The recheck is worth its visit
when it lands after the burst: the copy is then fresh until the next burst (mean
:math:`1/\hat\lambda`) instead of stale until the next visit.
"""
from __future__ import annotations

import numpy as np

from jobs.core.state_update import LAST_MODIFIED_NOW_S
from jobs.core.times import DAY_S


def burst_recheck(last_fetch_s, last_modified_s, lam, eligible, max_poisson_prob: float,
                  recheck_s: float):
    """The instant each page mid-burst is rechecked, and P(changed) then (NaN, NaN: not mid-burst).

    Parameters
    ----------
    last_fetch_s, last_modified_s : array_like
        Epoch seconds of the last fetch and of its trusted Last-Modified (NaN: none).
    lam : array_like
        λ̂, changes per day.
    eligible : array_like of bool
        Pages that may be rechecked: trusted Last-Modified, refresh lane, not timed.
    max_poisson_prob, recheck_s : float
        The detection threshold (0 disables) and the delay after the last fetch.
    """
    if not 0.0 <= max_poisson_prob < 1.0:
        raise ValueError(f"max_poisson_prob must be in [0, 1), got {max_poisson_prob!r}")
    if not recheck_s > 0:
        raise ValueError(f"recheck_s must be > 0, got {recheck_s!r}")
    fetched = np.asarray(last_fetch_s, dtype=float)
    age = fetched - np.asarray(last_modified_s, dtype=float)
    lam = np.asarray(lam, dtype=float)
    ok = (np.asarray(eligible, dtype=bool) & np.isfinite(age) & (age > LAST_MODIFIED_NOW_S)
          & np.isfinite(lam) & (lam > 0))
    safe_age = np.where(ok, age, 1.0)
    poisson_p = -np.expm1(-np.where(ok, lam, 0.0) * safe_age / DAY_S)
    mid_burst = ok & (poisson_p <= max_poisson_prob) & (max_poisson_prob > 0)
    at = np.where(mid_burst, fetched + recheck_s, np.nan)
    p_changed = np.where(mid_burst, -np.expm1(-recheck_s / safe_age), np.nan)
    return at, p_changed
