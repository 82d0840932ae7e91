"""Why each page gets its planned rate: the rows of the ``plan/dt=D`` table (pure numpy).

allocate's third pass (:func:`jobs.core.host_plan.plan_bucket`) already holds every page's
final rate, lane, host cap and candidate visits; :func:`page_rows` turns them into one row
per page with the reason for the rate, the page's marginal value (policy ``optimal``) and
``p_stale_now``, the probability that the page changed since its last confirmed copy
(``stale_since``: the last full fetch with a hash, or a 304 of a host whose 304s are trusted),
at the start of the planned window. One reason per page, the first that applies:

=====================  ==================================================================
reason                 meaning
=====================  ==================================================================
gone_recheck           confirmed gone; re-checked every ``policy.gone_recheck_days``
discovery              a frontier URL picked for a first fetch today
discovery_deferred     a frontier URL below today's discovery threshold (fetched later)
push_signal            a trusted push signal newer than the last fetch: due now
signal_not_worth       a trusted push signal newer than the last fetch, not acted on
                       (policy ``optimal``): a visit now buys less than the day's
                       multiplier (:func:`jobs.core.allocation_kkt.stale_visit_value`; the
                       page changes again within hours); the page keeps its rate
fast_lane              the fast lane's rate (a floor when ``lanes.fast_as_floor``)
host_cap               the host's daily cap binds: the page gets less than the policy
                       would give it (its marginal value is above the day's multiplier)
min_rate               the lowest rate allowed (``intervals.cap_s``); with ``optimal``: the
                       marginal value is below the day's multiplier even there
max_rate               the highest rate allowed (``intervals.floor_s``); with ``optimal``:
                       the marginal value is above the multiplier even there
timed                  policy ``optimal``: one visit per period of a page that changes at a
                       learnt time of day or week (``jobs.core.timing``): more buys nothing
multiplier             policy ``optimal``: the rate whose marginal value equals the day's
                       multiplier (``metrics.refresh_marginal_value``)
policy                 the rate of the configured policy (uniform, proportional, adaptive)
                       at the day's level
override_pin           the operator pinned the page's visits/day (``overrides/``)
override_pin_capped    pinned above the host's daily cap: the cap's rate instead
override_force         the operator forced a visit at the start of the window
override_pause         the operator paused the page's host: no visit today
=====================  ==================================================================

``audit`` (a measurement-only full fetch of the freshness audit sample today) is a flag
beside the reason, not a reason: an audited page keeps its own rate.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from jobs.core.allocation_kkt import marginal_value
from jobs.core.freshness import p_changed

REASONS = {
    "gone_recheck": "confirmed gone; re-checked every policy.gone_recheck_days",
    "discovery": "a frontier URL picked for a first fetch today",
    "discovery_deferred": "a frontier URL below today's discovery threshold",
    "push_signal": "a trusted push signal newer than the last fetch: due now",
    "signal_not_worth": "a trusted push signal newer than the last fetch, not acted on: a "
                        "visit now buys less than the day's multiplier; the page keeps its rate",
    "fast_lane": "the fast lane's rate",
    "host_cap": "the host's daily cap binds (the page's marginal value is above the "
                "day's multiplier, the host has no visits left)",
    "min_rate": "the lowest rate allowed (intervals.cap_s): the marginal value is below "
                "the day's multiplier even there",
    "max_rate": "the highest rate allowed (intervals.floor_s): the marginal value is above "
                "the day's multiplier even there",
    "timed": "one visit per period of a page that changes at a learnt time of day or week: "
             "more visits buy nothing",
    "multiplier": "the rate whose marginal value equals the day's multiplier",
    "policy": "the configured policy's rate at the day's level",
    "override_pin": "the operator pinned the page's visits/day (overrides/)",
    "override_pin_capped": "the operator pinned the page above its host's daily cap: "
                           "politeness wins, the page gets the cap",
    "override_force": "the operator forced a visit at the start of the window (overrides/)",
    "override_pause": "the operator paused the page's host (overrides/): no visit today",
}

PLAN_ROW_DDL = (  # plan_bucket's per-page rows (``reason`` not null): the plan/dt=D table
    "reason string, planned_rate double, visits long, audit boolean, cap_binds boolean, "
    "host_cap long, importance double, lambda_hat double, marginal_value double, "
    "last_success_s double, p_stale_now double, stale_since_s double")
PLAN_ROW_COLUMNS = [c.split()[0] for c in PLAN_ROW_DDL.split(", ")]
_TOL = 1e-9  # relative: a rate "at" a bound or a host "at" its cap


def p_stale(lam, since_s, at_s) -> np.ndarray:
    """P(the page changed since ``since_s``) at ``at_s`` (epoch seconds):
    :math:`1 - e^{-\\hat\\lambda\\,(t - t_0)}` with :math:`t_0` the instant of the last
    confirmed copy (:func:`jobs.core.plan_work.stale_since`); 1 where there is none (we hold
    no copy known to have been current)."""
    last = np.asarray(since_s, dtype=float)
    age_days = (at_s - last) / 86400.0
    return np.where(np.isnan(last), 1.0, p_changed(np.nan_to_num(lam), np.nan_to_num(age_days)))


def reasons(*, lane, gone, selected, signal, rate, fast_rate, cap_binds, policy, f_min, f_max,
            rate_ceiling=None, signal_ignored=None, override=None):
    """The reason code of each page (:data:`REASONS`), the first that applies (an
    operator's ``override`` code, where not None, before all)."""
    lane = np.asarray(lane, dtype=object)
    ignored = (np.zeros(lane.size, bool) if signal_ignored is None
               else np.asarray(signal_ignored, dtype=bool))
    name = getattr(policy, "name", None)
    interior = "multiplier" if name == "optimal" else "policy"
    out = np.where(rate <= f_min * (1 + _TOL), "min_rate",
                   np.where(rate >= f_max * (1 - _TOL), "max_rate", interior)).astype(object)
    if name == "optimal" and rate_ceiling is not None:
        out[np.isfinite(rate_ceiling) & (rate >= np.asarray(rate_ceiling) * (1 - _TOL))] = "timed"
    if policy is None:  # no policy: the seed backoff interval, clipped
        out[:] = "policy"
    fast = (lane == "fast") & (rate <= fast_rate * (1 + _TOL))
    for mask, code in ((cap_binds & (lane != "discovery"), "host_cap"),
                       (fast, "fast_lane"), (ignored, "signal_not_worth"),
                       (signal, "push_signal"),
                       ((lane == "discovery") & ~selected, "discovery_deferred"),
                       ((lane == "discovery") & selected, "discovery"), (gone, "gone_recheck")):
        out[mask] = code  # later rules win: they are checked first in the table above
    if override is not None:
        override = np.asarray(override, dtype=object)
        has = np.array([o is not None for o in override], dtype=bool)
        out[has] = override[has]
    return out


def page_rows(*, host, url, lane, gone, selected, signal, rate, fast_rate, importance,
              lambda_hat, last_success_s, visits, audit, host_cap, cap_binds, policy,
              f_min, f_max, window_start, timing_gain=None, rate_ceiling=None,
              signal_ignored=None, override=None, stale_since_s=None) -> pd.DataFrame:
    """One plan row per page (columns ``host``, ``url``, ``lane`` and :data:`PLAN_ROW_COLUMNS`).

    ``visits``/``audit``: the page's candidate visits and whether one is an audit, after the
    host cap and before the budget cut; ``host_cap``/``cap_binds``: per page, from its host.
    ``policy`` is the refresh policy the day was solved with (its box: ``f_min``/``f_max``).
    ``timing_gain``/``rate_ceiling`` (per page, optional): a timed page's value multiplier
    and its one visit per period (:mod:`jobs.core.timing`); its marginal value is
    :math:`g w F'(f)` below the ceiling, 0 at it. ``signal_ignored`` (optional): the pages
    whose push signal the policy found not worth a visit now (``signal`` false there).
    ``stale_since_s`` (optional, default ``last_success_s``): the instant ``p_stale_now``
    counts from, the last confirmed copy unless the host's 304s are trusted.
    """
    since = last_success_s if stale_since_s is None else stale_since_s
    rate = np.asarray(rate, dtype=float)
    code = reasons(lane=lane, gone=gone, selected=selected, signal=signal, rate=rate,
                   fast_rate=fast_rate, cap_binds=cap_binds, policy=policy, f_min=f_min,
                   f_max=f_max, rate_ceiling=rate_ceiling, signal_ignored=signal_ignored,
                   override=override)
    priced = (np.asarray(lane, dtype=object) != "discovery") & ~np.asarray(gone, bool)
    mv = np.full(rate.size, np.nan)
    if getattr(policy, "name", None) == "optimal" and priced.any():
        weight = np.asarray(importance, dtype=float)
        if timing_gain is not None and policy.objective == "freshness":
            weight = weight * np.asarray(timing_gain, dtype=float)
        mv[priced] = marginal_value(lambda_hat[priced], weight[priced], rate[priced],
                                    policy.objective)
        if rate_ceiling is not None:
            at_ceiling = rate >= np.asarray(rate_ceiling, dtype=float) * (1 - _TOL)
            mv[priced & at_ceiling] = 0.0
    return pd.DataFrame({
        "host": host, "url": url, "lane": lane, "reason": code, "planned_rate": rate,
        "visits": np.asarray(visits, dtype=np.int64), "audit": np.asarray(audit, bool),
        "cap_binds": np.asarray(cap_binds, bool), "host_cap": np.asarray(host_cap, np.int64),
        "importance": importance, "lambda_hat": lambda_hat, "marginal_value": mv,
        "last_success_s": last_success_s,
        "p_stale_now": p_stale(lambda_hat, since, window_start),
        "stale_since_s": since,
    })
