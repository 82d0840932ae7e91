"""What every allocation pass derives from a bucket of pages (pure numpy/pandas).

A bucket is the pages of any number of hosts (one pandas call in Spark). Input rows are
known pages from state and frontier pages (lane ``discovery``), joined with their host's
politeness (``crawl_delay_s``, ``max_fetches_per_day``) and health/trust (``cap_factor``,
``trust_etag``, ``trust_lm``, ``audit_wanted``; defaults when the hosts table is absent).
:func:`load` prepares a bucket once per pass: each page's lane, filled importance, λ and
audit slot (:func:`prepare`), each host's cap (:func:`host_capacity`); per-host quantities
are reductions over the host codes (:class:`jobs.core.host_groups.HostGroups`), never a
Python call per host.

The host's cap is shared: fast, audit and discovery visits are reserved first
(:func:`reservations`), refresh is optimised under what is left (Kolobov et al., SIGIR 2019).
With ``PlanContext.fast_floor`` (budget-aware policies, ``lanes.fast_as_floor``) the fast
lane's rate is a guaranteed *floor*, not a ceiling: fast pages are priced by the policy
together with refresh (:func:`priced_pages`), each gets max(fast rate, policy rate), and the
fast reservation stays inside the jointly solved part of the cap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pandas as pd

from jobs.core import lanes, timing
from jobs.core.audit_sample import day_unit
from jobs.core.host_groups import HostGroups
from jobs.core.times import epoch_seconds
from jobs.core.timing import TimingParams


# Optional page column: lanes.pattern_match of the URL with ``fast_patterns``, computed once
# by the caller (allocate, for its three passes); absent, prepare matches the URLs itself.
PATTERN_COLUMN = "url_fast_pattern"


@dataclass(frozen=True)
class PlanContext:
    """Everything a host needs from the driver (pickled to executors; a few scalars).

    Built from the config by :func:`jobs.params.plan_context` (which holds the defaults'
    only copy, in ``jobs.config``); the driver's solve then sets ``fast_rate``,
    ``discovery_min_bin`` and ``level``.
    """

    window_start: float
    window_end: float
    f_min: float
    f_max: float
    initial_s: float
    gone_rate: float
    default_importance: float
    fast_min_lambda: float
    fast_min_importance: float
    fast_patterns: str
    fast_rate: float
    fast_enabled: bool                        # False when the fast lane has no budget
    audit_rate: float
    audit_cadence_days: int
    policy: Any                               # a jobs.core.policies.RatePolicy (or None)
    fast_floor: bool                          # fast rate = floor of a joint policy solve
    discovery_min_bin: Optional[int] = None   # None: every frontier URL is a candidate
    level: Any = None                         # float or MultiplierSolution (pass 3)
    curve: tuple = ()                         # budget_curve.FACTORS' levels (None: empty point)
    max_visits_per_url: int = 24
    audit_keep: float = 1.0                   # share of due audits the cut can keep (lanes.audit_keep)
    timing: Optional[TimingParams] = None     # None: no rhythm learnt, even spacing
    backfill_s: float = 0.0                   # horizon of pulled-forward visits (0: off)
    probe_factor: float = 0.0                 # all-changed pages probed at this / λ̂ (0: off)
    max_defer_s: float = 0.0                  # signals.max_defer_days in seconds (0: off)

    @property
    def day_index(self) -> int:
        return int(self.window_start // 86400)


def column(pages, name, default):
    """``pages[name]``, or ``default`` on every row when the column is absent."""
    if name in pages.columns:
        return pages[name]
    return pd.Series([default] * len(pages), index=pages.index, dtype=object)


def flag(pages, name, default: bool) -> np.ndarray:
    return column(pages, name, default).astype("boolean").fillna(default).to_numpy(dtype=bool)


def stale_since(pages, last_success_s) -> np.ndarray:
    """The instant each page's staleness counts from (epoch seconds, NaN: no copy).

    A 304 is news about the stored copy only when its host's validators are trusted
    (:mod:`jobs.core.trust`): a host that answers 304 while the content changed would
    otherwise look fresh for as long as it keeps answering. So the clock of
    :math:`P(\\text{changed}) = 1 - e^{-\\hat\\lambda\\,(t - t_0)}` starts at

    .. math:: t_0 = \\begin{cases} \\texttt{last\\_success\\_at} & \\text{the host trusts
              its ETag or Last-Modified} \\\\ \\texttt{last\\_known\\_at} &
              \\text{otherwise (the last full fetch with a hash, or a trusted 304)}
              \\end{cases}

    Pages without a ``last_known_at`` column (callers that predate it) count from
    ``last_success_s``.
    """
    last_success_s = np.asarray(last_success_s, dtype=float)
    if "last_known_at" not in pages.columns:
        return last_success_s
    trusted = flag(pages, "trust_etag", False) | flag(pages, "trust_lm", False)
    return np.where(trusted, last_success_s, seconds(pages, "last_known_at"))


def seconds(pages, name) -> np.ndarray:
    """Epoch seconds of a timestamp column (NaN where missing or absent), or the column
    itself when it already holds them as numbers: allocate sends timestamps as doubles
    (Spark's cast, whole microseconds / 1e6), which Arrow hands to pandas about three
    times faster than timestamps."""
    col = column(pages, name, None)
    if pd.api.types.is_float_dtype(col.dtype) or pd.api.types.is_integer_dtype(col.dtype):
        return col.to_numpy(dtype=float)
    return epoch_seconds(col)


@dataclass(frozen=True)
class Bucket:
    """A bucket's pages prepared for a pass."""

    pages: pd.DataFrame   # the input rows
    groups: HostGroups    # their hosts
    work: pd.DataFrame    # :func:`prepare`
    cap: np.ndarray       # daily cap per host (:func:`host_capacity`)


def load(pages: pd.DataFrame, ctx: PlanContext) -> Bucket:
    """Host codes, per-page lanes and flags, and host caps of a bucket (any hosts)."""
    pages = pages.reset_index(drop=True)
    groups = HostGroups.of(pages["host"].to_numpy(dtype=object))
    return Bucket(pages, groups, prepare(pages, ctx, groups), host_capacity(pages, groups))


def prepare(pages: pd.DataFrame, ctx: PlanContext, groups: HostGroups | None = None):
    """Per-page lane, filled importance, λ, and flags (same answer in every pass).

    ``groups``: the pages' hosts (for the frontier importance prior, a per-host median);
    one host when omitted.
    """
    lane_in = pages["lane"].to_numpy(dtype=object)
    known = lane_in != "discovery"
    gone = flag(pages, "gone", False) & known
    imp = lanes.fill_importance(pages["importance"].to_numpy(dtype=float), ~known, known,
                                ctx.default_importance, groups)
    lam = np.nan_to_num(pages["lambda_hat"].to_numpy(dtype=float))
    urls = pages["url"].to_numpy(dtype=object)
    listed = lane_in == "fast"
    fast = np.zeros(len(pages), dtype=bool)
    if ctx.fast_enabled:
        # Only pages that could still join need the thresholds and the URL patterns.
        matched = (pages[PATTERN_COLUMN].to_numpy(dtype=bool) if PATTERN_COLUMN in pages.columns
                   else None)
        fast = (lanes.fast_mask(urls, lam, imp, known & ~gone & ~listed, ctx.fast_min_lambda,
                                ctx.fast_min_importance, lanes.compile_patterns(ctx.fast_patterns),
                                matched) | listed) & ~gone
    lane = np.where(~known, "discovery", np.where(fast, "fast", "refresh")).astype(object)
    audit, offset = lanes.audit_due(urls, ctx.audit_rate, ctx.audit_cadence_days,
                                    ctx.day_index)
    if ctx.audit_keep < 1.0:  # only the audits the day's cut can keep claim a host's cap
        audit &= audit_priority(urls, ctx.day_index) > 1.0 - ctx.audit_keep
    interval = pages["interval_s"].to_numpy(dtype=float)
    r = page_rhythm(pages, ctx, lam, groups, eligible=lane == "refresh")
    return pd.DataFrame({
        "url": urls, "lane": lane, "known": known, "gone": gone, "lambda_hat": lam,
        "importance": imp, "interval_s": np.where(np.isnan(interval), ctx.initial_s, interval),
        "audit": audit & known & ~gone, "audit_offset_s": offset,
        "period_s": r.period_s, "phase_s": r.phase_s, "spread_s": r.spread_s,
        "timing_gain": timing.value_gain(lam, r.period_s), "rate_ceiling": timing.rate_ceiling(r.period_s),
    })


def page_rhythm(pages: pd.DataFrame, ctx: PlanContext, lam,
                groups: HostGroups | None = None, eligible=None) -> timing.Rhythm:
    """Each page's learnt rhythm, shrunk to its host's phase
    (:func:`jobs.core.timing.shrunk_rhythm`); none without the ``TIMING_COLUMNS`` (frontier
    pages, older state), with timing off, or where ``eligible`` is false (fast-lane pages:
    their Last-Modified dates are fetch-locked). ``groups``: the pages' hosts (one when
    omitted)."""
    if ctx.timing is None:
        return timing.Rhythm(*(np.full(len(pages), np.nan) for _ in range(3)))
    groups = groups if groups is not None else HostGroups.single(len(pages))
    return timing.shrunk_rhythm(timing.stored(pages), ctx.timing, lam, groups.codes, groups.n,
                                eligible)


def audit_priority(urls, day_index: int) -> np.ndarray:
    """An audit visit's priority: a uniform hash of (URL, day) in (0, 1]. The budget cut
    and the host cap rank an over-full audit lane by it, so the audits kept are a random
    subset of the due sample; importance x P(changed) would keep the pages most likely
    stale and bias the audit's freshness estimate down."""
    return 1.0 - day_unit(np.asarray(urls, dtype=object), day_index)


def host_capacity(pages: pd.DataFrame, groups: HostGroups | None = None) -> np.ndarray:
    """Daily cap of each host (:func:`jobs.core.lanes.host_capacity` of its first row)."""
    first = groups.first if groups is not None else np.zeros(min(len(pages), 1), np.int64)
    return lanes.host_capacity(pages["crawl_delay_s"].to_numpy(dtype=float)[first],
                               pages["max_fetches_per_day"].to_numpy()[first],
                               column(pages, "cap_factor", 1.0).to_numpy(dtype=float)[first])


@dataclass(frozen=True)
class Reservations:
    """Each host's claims on its cap (:func:`jobs.core.lanes.reserve`) and the fast rate
    one of its fast pages gets."""

    hosts: lanes.HostReservations
    fast_per_page: np.ndarray


def discovery_selected(work: pd.DataFrame, ctx: PlanContext) -> np.ndarray:
    is_disc = work["lane"].to_numpy() == "discovery"
    if ctx.discovery_min_bin is None:
        return is_disc
    return is_disc & (lanes.importance_bin(work["importance"].to_numpy()) >= ctx.discovery_min_bin)


def reservations(b: Bucket, ctx: PlanContext) -> Reservations:
    """Visits/day each host's cap gives fast, audit, discovery and gone pages before
    refresh (in the order of :func:`jobs.core.lanes.reserve`)."""
    g, work = b.groups, b.work
    n_fast = g.count(work["lane"].to_numpy() == "fast")
    r = lanes.reserve(b.cap, n_fast, ctx.fast_rate, g.count(work["audit"].to_numpy()),
                      g.count(discovery_selected(work, ctx)), g.count(work["gone"].to_numpy()),
                      ctx.gone_rate)
    return Reservations(r, np.where(n_fast > 0, r.fast / np.maximum(n_fast, 1), 0.0))


def priced_mask(work, ctx: PlanContext) -> np.ndarray:
    lane = work["lane"].to_numpy()
    priced = (lane == "refresh") & ~work["gone"].to_numpy()
    if ctx.fast_floor:
        priced |= lane == "fast"
    return priced


def priced_pages(b: Bucket, res: Reservations, ctx: PlanContext):
    """Pages the policy prices, sorted by host (stable), and the cap each host gives them:
    refresh pages under ``refresh_cap``; with ``ctx.fast_floor`` also the fast pages, each
    with ``rate_floor`` = its fast-lane rate, under ``refresh_cap`` + the fast reservation.

    Returns (index of the priced pages in the bucket, their frame, their host codes, cap
    per host).
    """
    codes = b.groups.codes
    idx = np.flatnonzero(priced_mask(b.work, ctx))
    idx = idx[np.argsort(codes[idx], kind="stable")]
    pages = b.work.iloc[idx]
    if not ctx.fast_floor:
        return idx, pages, codes[idx], res.hosts.refresh_cap
    floor = np.where(pages["lane"].to_numpy() == "fast", res.fast_per_page[codes[idx]], 0.0)
    return (idx, pages.assign(rate_floor=floor), codes[idx],
            res.hosts.refresh_cap + res.hosts.fast)


def lane_rates(b: Bucket, ctx: PlanContext) -> tuple[np.ndarray, Reservations]:
    """Final visits/day of every page; refresh at the driver's level under each host's
    remaining cap (every host re-solves its own cap multiplier, so none overspends)."""
    rate, res, _ = lane_rates_at(b, ctx)
    return rate, res


def lane_rates_at(b: Bucket, ctx: PlanContext, levels=()):
    """:func:`lane_rates`, and every page's rates with the priced pages at each of the
    other ``levels`` instead of the day's (the other lanes as planned; None: none). The
    hosts' cap prices are solved once for all levels."""
    res = reservations(b, ctx)
    work, codes = b.work, b.groups.codes
    rate = np.zeros(len(work))
    lane = work["lane"].to_numpy()
    is_fast = lane == "fast"
    rate[is_fast] = res.fast_per_page[codes[is_fast]]
    rate[discovery_selected(work, ctx)] = 1.0
    gone = work["gone"].to_numpy()
    if gone.any():  # each host's gone re-checks share its gone reservation
        per_gone = res.hosts.gone / np.maximum(b.groups.count(gone), 1)
        rate[gone] = per_gone[codes[gone]]
    is_ref = (lane == "refresh") & ~gone
    if is_ref.any() and ctx.policy is None:  # no policy: the backoff interval as is
        rate[is_ref] = np.clip(86400.0 / work.loc[is_ref, "interval_s"].to_numpy(),
                               ctx.f_min, ctx.f_max)
    others = [None if lv is None else rate for lv in levels]  # nothing priced: as planned
    if ctx.policy is not None:
        idx, priced, priced_codes, caps = priced_pages(b, res, ctx)
        if idx.size:
            level = 1.0 if ctx.level is None else ctx.level
            solved = ctx.policy.hosts_rates_at(priced, priced_codes, caps, [level, *levels])
            others = [None if r is None else rate.copy() for r in solved[1:]]
            rate[idx] = solved[0]
            for out, r in zip(others, solved[1:]):
                if out is not None:
                    out[idx] = r
    return rate, res, others
