"""Per-host health: the served-rate limit in visits/day that bounds a host's daily cap, and
the Retry-After waits its 429/503 responses ask for.

:func:`health_frame` turns a day's per-host log counts into the hosts table's health columns;
the allocator multiplies a host's politeness cap N by ``cap_factor`` = L / N × the share of the
next window the host is not blocked for.

Served-rate limit (:func:`next_rate_limit`)
------------------------------------------
A fraction of the nominal cap cannot follow a host that silently serves a daily quota Q far
below it (0.05 × nominal may still exceed Q). The limit ``L`` is therefore in visits/day and
learned from what the host *served*. Per host, with nominal politeness cap ``N`` (crawl delay
and ``max_fetches_per_day``, :func:`jobs.core.plan.host_cap`), today's fetches ``n``, errors
``e`` (status 0, 5xx, 429), throttles ``t`` (429 and 503), served ``s = n − e`` and mean
``elapsed_ms`` ℓ against the smoothed baseline ``B``:

.. math::

    \\text{bad} \\iff e/n > e_{max} \\lor t/n > t_{max} \\lor ℓ > L_{max}
        \\lor (ℓ > ρ B \\land ℓ - B > Δ_{min}) \\lor (n > S \\land s \\le S \\land e > 0)

    L_{D+1} = \\min\\Big(N,\\ \\max\\big(L_{floor},\\ \\begin{cases}
      β\\, r & \\text{bad day (and } S ← r) \\\\
      \\min(S,\\ L + a N) & \\text{tested good day, } L < S \\\\
      L + p & \\text{tested good day, } L = S \\\\
      \\max(L,\\ s + g (s - S)),\\quad p ← g (s - S) & \\text{tested good day, } L > S
        \\text{ (} s > S,\\ s \\ge u L) \\\\
      L & \\text{otherwise}
    \\end{cases}\\big)\\Big)

* **Multiplicative decrease on the served rate** (β = ``rate_decrease``): a bad day's
  successes are the capacity the host revealed, so the next day asks for a little less than
  that (Jacobson 1988's decrease, applied to the measured rate, not to the nominal cap):
  ``r = max(s, 86400 / I)``, where ``I`` is the spacing its 429s asked for (gap to the
  previous request + Retry-After, :func:`asked_interval`; a throttle host hit faster than
  that fails every request, so ``s`` alone would starve it). ``S`` (``served_ceiling``)
  remembers ``r``; a host whose ``r`` came from its stated spacing is not probed above it
  (``p ← 0``: one visit more than it allows, spread evenly, makes every visit fail). A day
  asked for more than ``S`` that served no more than ``S`` and failed the rest is bad
  whatever its error share (a failed probe: the quota has not moved).
* **Additive increase**, two speeds: back up to ``S`` by ``a N`` a day (``rate_return_step``),
  then above it by a probe ``p`` that starts at max(1, min(``rate_probe_step`` × N,
  ``rate_probe_ceiling_step`` × r)) visits after each bad day (a failed probe costs about p
  errors, so it must be small beside a small quota). A probe day that served ``s > S``
  proved ``s − S`` above the ceiling, and the next limit adds g (``rate_probe_growth``) times
  that to ``s``, so the excess over ``S`` grows by 1 + g a day while probes succeed (the
  convex "max probing" of CUBIC, Ha, Rhee & Xu 2008 / RFC 9438; slow start's doubling is
  g = 1). Grown on what was served, not on the limit: a limit of S + 1.9 asks for S + 1 whole
  visits, and growing the step 4-fold on that one visit (or on a clean day at the ceiling
  that tested nothing above it) costs a quota host believed one visit below its quota many
  errors; this way at most g. Why not one
  constant step α: a quota host's overshoot day costs about α errors and its day 1 ``N − Q``,
  so "errors −90 %" needs α ≲ 0.1 (N − Q), while "back to 80 % of N within a week" from
  0.2 N needs α ≳ 0.09 N — both only by luck. A quota that has not moved fails the first,
  small probe, so g only speeds up hosts whose probes keep succeeding: from a quota Q (first
  probe 0.1 Q) back to 0.8 N takes a day or two back to Q and to Q + 0.1 Q, then about
  log_{1+g}(10 (0.8 N / Q − 1)) probes. With g = 4 the host is asked for 0.8 N within 7 days
  of its recovery for N / Q up to 40 in every phase of the probe cycle
  (``tests/core/test_host_health.py``); a host whose cap is thousands of times its old quota takes
  longer, but its limit stops binding the plan long before.
* **A tested day grows the limit**: the host was asked for at least u × L
  (u = ``rate_min_utilisation``; RFC 7661's rule for a rate-limited sender: an unused window
  says little about the path), or, up to the ceiling, it answered every fetch of the day
  without an error: ``S`` was served before, and the plan's visits to a limited host lag the
  limit, so a host asked 1-4 times a day under a limit of 10 would otherwise never get back
  to its old rate. **Above the ceiling** (L > S) only a day that *served* more than ``S`` and
  at least u × L tests the probe: a day that asked for the ceiling
  alone says nothing of the quota above it, and growing on such days let the limit run
  ahead of what was tried until the day the plan caught up paid the difference. A
  day with fewer than ``min(min_fetches, ⌊L⌋)`` fetches is not judged on its error share.
* **Latency**: ``B`` is an exponentially weighted mean of ℓ over judged days (half-life
  ``latency_half_life_days``); a mean ℓ above ρ × B (``latency_rise``) and at least Δ_min ms
  (``latency_min_rise_ms``) above it is a bad day before any error appears. Google's
  crawl capacity limit does the same: it goes up while a site answers quickly and down when
  it slows down or answers with server errors ("Large site owner's guide to managing your
  crawl budget", developers.google.com/search/docs/crawling-indexing/
  large-site-managing-crawl-budget); 500, 503 and 429 are the documented way for a site to
  make Googlebot slow down (…/crawling-indexing/reduce-crawl-rate).
* Bounds: never above ``N`` (politeness always wins, also over the floor), never below
  ``L_floor`` = ``rate_floor`` visits/day.
* **Testing the probe** (:func:`probe_due`): while ``S < L < N`` and the plan wants more of
  the host than L, the next plan catches up its overdue pages and its capped visits come
  first in the day's budget cut, or the day asks for fewer than ``S`` and the probe is
  never tested.

Retry-After: :func:`blocked_until` gives each host the latest "not before" instant its 429 /
503 rows asked for (:func:`jobs.core.http_fields.parse_retry_after`), each capped at its
receipt + ``max_retry_after_s`` so a hostile header cannot block a host for a year.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobs.core import http_fields
from jobs.core.observations import wilson_lower
from jobs.core.plan import host_cap
from jobs.core.times import DAY_S

#: The hosts table's health columns (jobs.schemas.HOSTS), in order.
HEALTH_COLUMNS = ("fetches_today", "timeouts_today", "errors_5xx_today", "throttled_429_today",
                  "throttled_today", "error_rate_today", "mean_latency_ms_today", "nominal_cap",
                  "rate_limit", "served_ceiling", "probe_step", "latency_baseline_ms",
                  "health_verdict", "probe_due", "blocked_until", "cap_factor")
#: Today's per-host counts :func:`health_frame` reads (missing counts are 0).
COUNT_COLUMNS = ("fetches", "timeouts", "errors_5xx", "throttled_429", "throttled",
                 "latency_sum_ms", "latency_n")


def health_frame(today: pd.DataFrame, prev: pd.DataFrame, params: "RateLimitParams",
                 window_start_s: float, window_s: float = 86400.0) -> pd.DataFrame:
    """Tomorrow's health columns (:data:`HEALTH_COLUMNS`) per host.

    Parameters
    ----------
    today : DataFrame
        Per host: :data:`COUNT_COLUMNS` from today's logs (NaN: none), ``crawl_delay_s`` and
        ``max_fetches_per_day`` (the host's politeness, as the allocator reads it; NaN delay:
        yesterday's nominal cap is kept), from which the politeness cap N (visits/day,
        :func:`jobs.core.plan.host_cap`), ``blocked_until`` (epoch seconds of the latest
        wait a 429/503 asked for today, NaN: none; :func:`blocked_until`) and
        ``asked_interval_s`` (:func:`asked_interval`, NaN: none).
    prev : DataFrame
        Yesterday's hosts rows on the same index (NaN rows for a new host).
    params : RateLimitParams
    window_start_s, window_s : float
        The window the next plan fills (``[D+1 00:00, +1 day)`` for run date D).

    Returns
    -------
    DataFrame
        :data:`HEALTH_COLUMNS` on ``today``'s index. ``cap_factor`` is what the allocator
        multiplies N by: the served-rate limit as a share of N (:func:`next_rate_limit`),
        times the share of the window the host is not blocked for (its Retry-After), so the
        budget a struggling host cannot use goes to the others the same day.
    """
    counts = {c: np.clip(np.nan_to_num(_col(today, c), nan=0.0), 0, None) for c in COUNT_COLUMNS}
    fetches = counts["fetches"]
    errors = np.minimum(counts["timeouts"] + counts["errors_5xx"] + counts["throttled_429"],
                        fetches)
    with np.errstate(divide="ignore", invalid="ignore"):
        lat = np.where(counts["latency_n"] > 0, counts["latency_sum_ms"] / counts["latency_n"],
                       np.nan)
        rate = np.where(fetches > 0, errors / fetches, np.nan)
    delay = _col(today, "crawl_delay_s")
    nominal = np.full(len(today), np.nan)
    has_policy = np.isfinite(delay) & (delay > 0)
    if has_policy.any():  # the allocator's own cap arithmetic (one rule)
        nominal[has_policy] = host_cap(delay[has_policy],
                                       _col(today, "max_fetches_per_day")[has_policy])
    nominal = np.where(np.isfinite(nominal), nominal, _col(prev, "nominal_cap"))
    seen = np.isfinite(nominal)
    limits = next_rate_limit(prev.loc[seen], pd.DataFrame(
        {"fetches": fetches[seen], "errors": errors[seen],
         "throttled": np.minimum(counts["throttled"], fetches)[seen],
         "mean_latency_ms": lat[seen],
         "asked_interval_s": _col(today, "asked_interval_s")[seen]},
        index=today.index[seen]), nominal[seen], params)
    out = pd.DataFrame({
        "fetches_today": fetches.astype(np.int64),
        "timeouts_today": counts["timeouts"].astype(np.int64),
        "errors_5xx_today": counts["errors_5xx"].astype(np.int64),
        "throttled_429_today": counts["throttled_429"].astype(np.int64),
        "throttled_today": counts["throttled"].astype(np.int64),
        "error_rate_today": rate, "mean_latency_ms_today": lat, "nominal_cap": nominal,
    }, index=today.index)
    out = out.join(limits)  # a host with no nominal cap yet has no limit (NaN)
    out["health_verdict"] = out["health_verdict"].fillna("unjudged")
    out["probe_due"] = probe_due(out["rate_limit"], out["served_ceiling"], nominal)
    # The latest wait asked, yesterday's or today's, while it reaches into the window.
    until = np.fmax(_col(prev, "blocked_until"), _col(today, "blocked_until"))
    out["blocked_until"] = np.where(until > window_start_s, until, np.nan)
    limit = out["rate_limit"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(nominal > 0, np.clip(limit / nominal, 0.0, 1.0), 1.0)
    share = np.where(np.isfinite(share), share, 1.0)
    blocked = np.nan_to_num((out["blocked_until"].to_numpy(float) - window_start_s) / window_s,
                            nan=0.0)
    out["cap_factor"] = share * (1.0 - np.clip(blocked, 0.0, 1.0))
    return out[list(HEALTH_COLUMNS)]


# -- served-rate limit ------------------------------------------------------------------------

#: What :func:`next_rate_limit` carries per host from one day to the next.
RATE_STATE_COLUMNS = ("rate_limit", "served_ceiling", "probe_step", "latency_baseline_ms")
#: Today's per-host counts it reads.
RATE_DAY_COLUMNS = ("fetches", "errors", "throttled", "mean_latency_ms", "asked_interval_s")
VERDICTS = ("bad", "grown", "untested", "unjudged")


@dataclass(frozen=True)
class RateLimitParams:
    """The served-rate rule's parameters (``[health]``; built by
    :func:`jobs.params.rate_limit_params`, defaults only in ``jobs.config``)."""

    max_error_rate: float         # e_max, share of fetches with status 0/5xx/429
    max_throttle_rate: float      # t_max, share of fetches with 429/503
    max_latency_ms: float         # L_max, absolute
    latency_rise: float           # ρ, today's mean over the baseline
    latency_min_rise_ms: float    # Δ_min
    latency_half_life_days: float
    decrease: float               # β, on the served count
    return_step: float            # a, fraction of N per day back up to the ceiling
    probe_step: float             # p₀, fraction of N, first probe above the ceiling
    floor: float                  # L_floor, visits/day
    min_utilisation: float        # a day tests the limit when fetches >= this x L
    min_fetches: int
    max_retry_after_s: float      # longest wait one Retry-After may impose
    error_confidence: float       # Wilson level of the error-share test (0: the plain share)
    probe_ceiling_step: float     # first probe after a bad day: at most this x what it served
    probe_growth: float           # g, the probe's factor on each good day above the ceiling


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name]).to_numpy(dtype=float)


def next_rate_limit(prev: pd.DataFrame, today: pd.DataFrame, nominal_cap,
                    params: RateLimitParams) -> pd.DataFrame:
    """One day of the served-rate limit per host (the rule in the module docstring).

    Parameters
    ----------
    prev : DataFrame
        Yesterday's :data:`RATE_STATE_COLUMNS` (NaN, or a missing column, for a host never
        seen: its limit starts at the nominal cap, with no ceiling and no latency baseline).
    today : DataFrame
        Today's :data:`RATE_DAY_COLUMNS`, row for row with ``prev``: fetch attempts, those
        with status 0/5xx/429, those with 429 or 503, the mean ``elapsed_ms`` (NaN when
        unknown: not judged on latency) and the spacing its 429s asked for
        (:func:`asked_interval`, seconds; NaN: none). Missing counts are 0 (no fetches: no
        verdict).
    nominal_cap : array_like
        Tomorrow's politeness cap N in visits/day (crawl delay and ``max_fetches_per_day``),
        finite and >= 0.
    params : RateLimitParams

    Returns
    -------
    DataFrame
        On ``today``'s index: :data:`RATE_STATE_COLUMNS` for tomorrow and ``health_verdict``
        (one of :data:`VERDICTS`: ``grown`` is a good day that tested the limit, ``untested``
        a good day that asked for less than ``min_utilisation`` of it, ``unjudged`` too few
        fetches).
    """
    nominal = np.asarray(nominal_cap, dtype=float).reshape(-1)
    if len(nominal) != len(today) or len(prev) != len(today):
        raise ValueError("prev, today and nominal_cap must have one row per host each")
    if not np.all(np.isfinite(nominal) & (nominal >= 0)):
        raise ValueError("nominal_cap must be finite and >= 0 (visits/day)")
    p = params
    limit = np.minimum(np.nan_to_num(_col(prev, "rate_limit"), nan=np.inf), nominal)
    ceiling = _col(prev, "served_ceiling")
    first_probe = p.probe_step * nominal
    step = _col(prev, "probe_step")
    step = np.where(np.isfinite(step) & (step >= 0), step, first_probe)
    baseline = _col(prev, "latency_baseline_ms")
    n, err, thr = (np.clip(np.nan_to_num(_col(today, c), nan=0.0), 0, None)
                   for c in ("fetches", "errors", "throttled"))
    err, thr = np.minimum(err, n), np.minimum(thr, n)
    lat = _col(today, "mean_latency_ms")

    # What the host could be asked for (whole visits); a limit below min_fetches is judged
    # on a day that used all of it.
    whole = np.floor(limit + 1e-9)
    judged = (n > 0) & (n >= np.minimum(p.min_fetches, whole))
    with np.errstate(divide="ignore", invalid="ignore"):
        err_share, thr_share = np.where(n > 0, err / n, 0.0), np.where(n > 0, thr / n, 0.0)
    known = np.isfinite(lat)
    rising = known & np.isfinite(baseline) & (lat > p.latency_rise * baseline) \
        & (lat - baseline > p.latency_min_rise_ms)
    slow = known & (lat > p.max_latency_ms)
    served = n - err
    # What a bad day revealed: the successes, or the rate its 429s asked for when higher
    # (spread closer than a throttle host's interval, every request fails and serves ~0).
    asked = _col(today, "asked_interval_s")
    with np.errstate(divide="ignore", invalid="ignore"):
        asked_rate = np.where(np.isfinite(asked) & (asked > 0), DAY_S / asked, 0.0)
    revealed = np.maximum(served, asked_rate)
    # A probe above the ceiling fails when the host served no more than the ceiling and
    # failed the rest, whatever the share: its quota has not moved (errors under e_max
    # would otherwise let the probe double past it).
    probe_failed = np.isfinite(ceiling) & (n > ceiling) & (served <= ceiling) & (err > 0)
    # A share of errors counts when it is significant, not when one stray timeout in a
    # dozen fetches makes 8 %: its Wilson lower bound must exceed e_max.
    err_high = wilson_lower(err, n, p.error_confidence) > p.max_error_rate
    bad = judged & (err_high | (thr_share > p.max_throttle_rate)
                    | slow | rising | probe_failed)
    # Up to the ceiling (what the host served before) an error-free day grows the limit
    # too, however little was asked: the plan's visits to a limited host lag the limit, so
    # waiting for 90 % of it left recovered hosts at their old quota for good. Above it,
    # only a day that *served* more than the ceiling and most of the limit tested the
    # probe: one that asked for the ceiling alone says nothing of the quota above it, and
    # growing on it let the limit run ahead until the day the plan caught up paid for it.
    clean = ~bad & (n > 0) & (err == 0)
    tested = (judged & ~bad & (n >= p.min_utilisation * whole - 1e-9)) | clean
    probing = above_ceiling(limit, ceiling)
    exercised = (served > ceiling) & (served >= p.min_utilisation * whole - 1e-9)
    tested &= ~probing | exercised

    below = np.isfinite(ceiling) & (limit < ceiling)
    # A probe that served s > S proved s - S above the ceiling: the next one adds g times
    # that to s. Grown on what was served, not on the limit: a limit of S + 1.9 asks for
    # S + 1, and 4 x 1.9 more on that one visit's evidence cost a quota host 8 errors.
    proved = np.where(probing, served - ceiling, 0.0)
    probe_grown = np.maximum(limit, served + p.probe_growth * proved)
    grown = np.where(below, np.minimum(ceiling, limit + p.return_step * nominal),
                     np.where(probing, probe_grown, limit + step))
    new_limit = np.where(bad, p.decrease * revealed, np.where(tested, grown, limit))
    # Politeness wins over the floor: never above N, even when N < floor.
    new_limit = np.minimum(nominal, np.maximum(p.floor, new_limit))
    # After a bad day the first probe is also at most a share of what the host served: a
    # probe of 2 % of a large N is many times a small quota, and each failed one costs it.
    # At least one visit: 2 % of N = 44 is 0.88, and a limit of S + 0.88 asks for S whole
    # visits, so the probe would never be tested.
    reset_step = np.maximum(1.0, np.minimum(first_probe, p.probe_ceiling_step * revealed))
    # A host that stated its rate (its 429s' spacing) is believed: no probe above it. One
    # would cost the whole day, as evenly spread visits closer than its spacing all fail.
    reset_step = np.where((asked_rate > 0) & (asked_rate >= served), 0.0, reset_step)
    # A clean day at the ceiling moves the limit to S + p and keeps p: it tested nothing
    # above S. After a probe day the step is what the next one adds.
    new_step = np.where(bad, reset_step,
                        np.where(tested & probing,
                                 np.minimum(p.probe_growth * proved, np.maximum(nominal, 1.0)),
                                 step))
    weight = 1.0 - np.exp2(-1.0 / p.latency_half_life_days)
    seen = judged & known
    new_baseline = np.where(seen, np.where(np.isfinite(baseline),
                                           baseline + weight * (lat - baseline), lat), baseline)
    verdict = np.select([bad, tested, judged], ["bad", "grown", "untested"], "unjudged")
    return pd.DataFrame({"rate_limit": new_limit,
                         "served_ceiling": np.where(bad, revealed, ceiling),
                         "probe_step": new_step, "latency_baseline_ms": new_baseline,
                         "health_verdict": verdict}, index=today.index)


def above_ceiling(rate_limit, served_ceiling) -> np.ndarray:
    """Whether a host's limit is above what it served on its last bad day: a probe, which
    only a day that served more than the ceiling tests (:func:`next_rate_limit`)."""
    ceiling = np.asarray(served_ceiling, dtype=float)
    return np.isfinite(ceiling) & (np.asarray(rate_limit, dtype=float) > ceiling + 1e-9)


def probe_due(rate_limit, served_ceiling, nominal_cap) -> np.ndarray:
    """Whether the next plan must ask a host for its whole limit (when it wants more of it
    than that): the limit is a probe above its ceiling and still below the politeness cap N.

    Only a day that served more than the ceiling tests the probe, and the plan alone did
    not ask for that: a limited host's overdue pages wait for their next grid point (6-11
    due a day under a limit of 12.1 with a ceiling of 11), and each visit's value
    (importance x P(changed)) need not beat a budget-bound day's cut (7-10 of 12 kept), so
    a recovering host could stay bound for days after its recovery. The plan therefore catches up such a host's overdue pages, and the budget cut
    keeps its capped visits first (:func:`jobs.core.host_plan.plan_bucket`,
    :mod:`jobs.budget_cut`): at most ``floor(L)`` visits a day per such host, the price of
    learning its rate again (RFC 7661 likewise validates a window only by using it).
    """
    limit = np.asarray(rate_limit, dtype=float)
    return above_ceiling(limit, served_ceiling) & (limit < np.asarray(nominal_cap, dtype=float)
                                                   - 1e-9)


def capacity_under_limit(nominal_cap, rate_limit) -> np.ndarray:
    """Visits/day a host gets under its served-rate limit: ``floor(min(N, L))``.

    NaN ``rate_limit`` (a host without health history) leaves the nominal cap ``N``. This is
    what :func:`jobs.core.lanes.host_capacity` computes as ``N x cap_factor`` today.
    """
    nominal = np.asarray(nominal_cap, dtype=float)
    limit = np.nan_to_num(np.asarray(rate_limit, dtype=float), nan=np.inf)
    return np.floor(np.clip(np.minimum(nominal, limit), 0, None) + 1e-9).astype(np.int64)


#: Statuses whose Retry-After is honoured (RFC 9110 §10.2.3: 503; RFC 6585 §4: 429).
RETRY_AFTER_STATUSES = (429, 503)


def blocked_until(hosts, status, retry_after, received_at_s, *, max_block_s: float) -> pd.Series:
    """Per host, the instant before which it gets no fetch, from its 429/503 Retry-After.

    Each 429/503 row's Retry-After (delay-seconds or an HTTP-date,
    :func:`jobs.core.http_fields.parse_retry_after`) is read as of the row's receipt and
    capped at receipt + ``max_block_s``; a host's value is the latest of its rows. Rows of
    other statuses, refused values and instants not after their receipt (no wait asked) do
    not count, so only hosts that asked for a wait appear.

    Parameters
    ----------
    hosts, status, retry_after, received_at_s : array_like
        One entry per fetch-log row: host, HTTP status, the raw Retry-After value (None when
        absent) and the Unix seconds at which the response was received.
    max_block_s : float
        Longest wait one header may impose (``health.max_retry_after_s``).

    Returns
    -------
    Series
        Unix seconds (float) indexed by host (named ``host``), sorted by host.
    """
    if not (max_block_s >= 0 and np.isfinite(max_block_s)):
        raise ValueError("max_block_s must be finite and >= 0")
    status = np.asarray(status)
    received = np.asarray(received_at_s, dtype=float)
    asked = np.isin(status, RETRY_AFTER_STATUSES)
    values = np.asarray(retry_after, dtype=object)
    until = np.full(len(status), np.nan)
    rows = np.flatnonzero(asked)
    until[rows] = http_fields.parse_retry_afters(values[rows], received[rows])
    until = np.minimum(until, received + max_block_s)
    keep = np.isfinite(until) & (until > received)
    frame = pd.DataFrame({"host": np.asarray(hosts, dtype=object)[keep], "until": until[keep]})
    return frame.groupby("host", sort=True)["until"].max().rename("blocked_until")


def asked_interval(hosts, status, retry_after, received_at_s, *, max_block_s: float) -> pd.Series:
    """Per host, the spacing between requests its 429 responses asked for, in seconds.

    A 429 (RFC 6585 §4: too many requests *in a given amount of time*) whose Retry-After is
    a wait ``w`` after the request that came ``g`` seconds after the host's previous one says
    the host wants requests ``g + w`` apart, so its rate is ``86400 / (g + w)`` visits/day
    whatever it served that day. Requests spread closer than that all answer 429, and the
    served count then says nothing of the rate (such hosts would starve). A 503's wait
    is a block, not a rate (a quota may reopen at midnight): :func:`blocked_until` only.

    Parameters
    ----------
    hosts, status, retry_after, received_at_s : array_like
        One entry per fetch-log row of the day, *every* status (the gap is to the host's
        previous request of any kind): as for :func:`blocked_until`.
    max_block_s : float
        Each wait is capped at this (``health.max_retry_after_s``).

    Returns
    -------
    Series
        The median of ``g + w`` over the host's 429 rows with a wait and a previous request
        that day (median: one odd header does not set the rate), indexed by host, sorted;
        hosts without such rows do not appear.
    """
    if not (max_block_s >= 0 and np.isfinite(max_block_s)):
        raise ValueError("max_block_s must be finite and >= 0")
    frame = pd.DataFrame({"host": np.asarray(hosts, dtype=object),
                          "status": np.asarray(status), "at": np.asarray(received_at_s, float),
                          "retry_after": np.asarray(retry_after, dtype=object)})
    frame = frame[np.isfinite(frame["at"])].sort_values(["host", "at"], kind="stable")
    gap = frame.groupby("host", sort=False)["at"].diff().to_numpy(float)
    rows = np.flatnonzero((frame["status"].to_numpy() == 429) & np.isfinite(gap))
    at = frame["at"].to_numpy(float)[rows]
    wait = http_fields.parse_retry_afters(frame["retry_after"].to_numpy(dtype=object)[rows],
                                          at) - at
    wait = np.minimum(wait, max_block_s)
    keep = np.isfinite(wait) & (wait >= 0) & (gap[rows] + wait > 0)
    asked = pd.DataFrame({"host": frame["host"].to_numpy(dtype=object)[rows][keep],
                          "interval": gap[rows][keep] + wait[keep]})
    return asked.groupby("host", sort=True)["interval"].median().rename("asked_interval_s")


def retry_after_columns(hosts, status, retry_after, received_at_s, *,
                        max_block_s: float) -> pd.DataFrame:
    """Per host, what the day's Retry-After headers asked: ``blocked_until``
    (:func:`blocked_until`) and ``asked_interval_s`` (:func:`asked_interval`), outer-joined
    (NaN where one is missing), indexed by host. Takes every log row of the hosts."""
    args = (hosts, status, retry_after, received_at_s)
    return pd.concat([blocked_until(*args, max_block_s=max_block_s),
                      asked_interval(*args, max_block_s=max_block_s)], axis=1).sort_index()
