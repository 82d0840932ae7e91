r"""Lanes that share one host capacity: fast, discovery, audit and refresh (pure numpy).

Every host has one daily cap :math:`C_h` (politeness x health, see
:func:`host_capacity`); every visit of every lane uses it, a 304 included. Lanes claim it
in this order, each with its own global budget:

1. **fast** -- pages whose estimated λ and importance pass thresholds, or whose URL matches
   a configured pattern (front pages, feeds). They share the fast budget ``B_f`` as a
   common rate :math:`r_f` per page, as high as the budget allows up to the 1 h floor:
   :math:`\sum_h \min(C_h, n^{fast}_h r_f) = B_f` (:func:`fast_rate`). The freshness
   optimum alone would give such pages f_min when λ > w/μ (Cho & Garcia-Molina 2003).
2. **audit** -- the policy-independent freshness audit sample, fetched in full on a
   fixed cadence (:func:`audit_due`).
3. **discovery** -- frontier URLs, deduplicated against known URLs, ranked by importance
   (the host's median known importance where missing, :func:`fill_importance`); the lane
   takes the best ``B_d`` (:func:`importance_threshold`).
4. **refresh** -- everything else, solved optimally under the remaining budget and the
   remaining host capacity :math:`C_h - fast_h - audit_h - disc_h` (Kolobov et al., SIGIR
   2019: host caps as multipliers inside the optimisation).

Split ``auto`` (:func:`auto_split`) moves budget between refresh and discovery until one
more fetch is worth the same in both. Value model (documented in docs/allocation-spark.md):
refresh's marginal value is the budget multiplier μ, the importance-weighted freshness one
more visit/day buys; a discovery fetch of a URL with importance w adds a copy worth
``w x discovery_value_days`` freshness-days (it was missing, i.e. stale, and a first fetch
makes it fresh), in the same unit as μ.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from jobs.core.audit_sample import url_unit
from jobs.core.host_groups import HostGroups
from jobs.core.plan import host_cap

BINS_PER_OCTAVE = 16


def host_capacity(crawl_delay_s, max_fetches_per_day, cap_factor) -> np.ndarray:
    """Daily visits a host gets: ``floor(min(86400/delay, max_fetches) x cap_factor)``.

    The health factor (in (0, 1]) only ever lowers the politeness cap, so a robots
    crawl delay or an explicit ``max_fetches_per_day`` always wins. ``host_cap`` uses the
    same microsecond arithmetic as slot placement, so a full host always fits the day.
    """
    base = host_cap(crawl_delay_s, max_fetches_per_day).astype(float)
    factor = np.clip(np.nan_to_num(np.asarray(cap_factor, dtype=float), nan=1.0), 0.0, 1.0)
    return np.floor(base * factor + 1e-9).astype(np.int64)


def compile_patterns(patterns: str):
    """Comma-separated regular expressions -> one compiled alternation (None if empty)."""
    parts = [p.strip() for p in (patterns or "").split(",") if p.strip()]
    return re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None


def pattern_match(urls, pattern) -> np.ndarray:
    """Whether each URL matches the fast lane's compiled ``pattern`` (``re.search``)."""
    urls = pd.Series(np.asarray(urls, dtype=object), dtype=object)
    if pattern is None or not len(urls):
        return np.zeros(len(urls), dtype=bool)
    with warnings.catch_warnings():  # groups in a fast pattern are fine: we only test
        warnings.filterwarnings("ignore", "This pattern is interpreted", UserWarning)
        return urls.str.contains(pattern, na=False).to_numpy(dtype=bool)


def fast_mask(urls, lam, importance, is_known, min_lambda, min_importance, pattern,
              matched=None) -> np.ndarray:
    """Known pages that belong in the fast lane: (λ >= min and w >= min) or a URL pattern.

    ``matched``: :func:`pattern_match` of every URL with this ``pattern``, when the caller
    has it already (allocate computes it once for its three passes)."""
    lam = np.nan_to_num(np.asarray(lam, dtype=float))
    w = np.nan_to_num(np.asarray(importance, dtype=float))
    known = np.asarray(is_known, dtype=bool)
    fast = (lam >= min_lambda) & (w >= min_importance) & known
    ask = np.flatnonzero(known & ~fast)  # only pages the thresholds left out
    if pattern is not None and ask.size:
        fast[ask] = (np.asarray(matched, dtype=bool)[ask] if matched is not None
                     else pattern_match(np.asarray(urls, dtype=object)[ask], pattern))
    return fast


def fill_importance(importance, is_frontier, is_known, default: float,
                    groups: HostGroups | None = None) -> np.ndarray:
    """Frontier URLs without importance get the host prior: the median of the host's known
    pages (``default`` if it has none). ``groups`` gives each page's host (one host if
    None)."""
    w = np.asarray(importance, dtype=float).copy()
    missing = np.asarray(is_frontier, bool) & np.isnan(w)
    if missing.any():
        groups = groups or HostGroups.single(w.size)
        prior = groups.median(w, np.asarray(is_known, bool) & ~np.isnan(w))
        w[missing] = np.nan_to_num(prior, nan=default)[groups.codes[missing]]
    return np.nan_to_num(w, nan=default)


def importance_bin(importance) -> np.ndarray:
    """Log-spaced bin (16 per octave) of each importance; -100000 for w <= 0."""
    w = np.asarray(importance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.floor(np.log2(w) * BINS_PER_OCTAVE)
    return np.where(w > 0, b, -100_000).astype(np.int64)


def importance_threshold(bins, counts, budget: float) -> int | None:
    """Lowest bin the best ``budget`` URLs reach (None: every URL fits; the cut trims
    the boundary bin exactly later)."""
    order = np.argsort(-np.asarray(bins))
    b, c = np.asarray(bins)[order], np.asarray(counts)[order]
    taken = 0
    for bb, cc in zip(b, c):
        if taken + cc > budget:
            return int(bb) if budget > taken else int(bb) + 1
        taken += cc
    return None


def fast_rate(n_fast, caps, budget: float, f_min: float, f_max: float) -> float:
    r"""Common per-page rate :math:`r_f` of the fast lane, solving
    :math:`\sum_h \min(C_h, n_h r_f) = B_f` by bisection, clipped to [f_min, f_max].

    Parameters
    ----------
    n_fast, caps : array_like
        Fast pages and the daily cap of each host.
    budget : float
        The fast lane's visits/day.
    """
    n, c = np.asarray(n_fast, dtype=float), np.asarray(caps, dtype=float)
    if n.sum() == 0:
        return f_max

    def demand(r):
        return float(np.minimum(c, n * r).sum())

    if demand(f_max) <= budget:
        return f_max
    if demand(f_min) >= budget:
        return f_min
    lo, hi = f_min, f_max
    for _ in range(100):  # demand is monotone in r; 100 halvings reach float resolution
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if demand(mid) <= budget else (lo, mid)
    return lo


def audit_due(urls, sample_rate: float, cadence_days: int, day_index: int):
    """Audit-sample URLs due on ``day_index`` (days since epoch) and their time offset.

    Membership is :func:`jobs.core.audit_sample.in_audit_sample` (policy-independent);
    each member is fetched every ``cadence_days`` on the day ``day_index mod cadence`` equal
    to its hash slot, at a hash-spread time of day, so the audit never follows the policy.

    Returns
    -------
    due : ndarray of bool
    offset_s : ndarray of float
        Seconds after the window start.
    """
    if sample_rate <= 0 or len(urls) == 0:
        return np.zeros(len(urls), bool), np.zeros(len(urls))
    u = url_unit(urls)
    member = u < sample_rate
    # Re-use the hash below the sample rate as a uniform number for day slot and time.
    v = np.where(member, u / sample_rate, 0.0)
    slot = np.floor(v * cadence_days).astype(np.int64)
    due = member & (slot == day_index % cadence_days)
    offset = (v * cadence_days - slot) * 86400.0
    return due, offset


def refresh_marginal(grid, demand, budget: float) -> float:
    """μ at which the summed refresh demand curve equals ``budget`` (log-log interpolation;
    0 if the whole curve fits, the top of the grid if none of it does)."""
    grid, demand = np.asarray(grid, float), np.asarray(demand, float)
    if demand[0] <= budget:  # fits at the bottom of the grid: the budget barely binds
        return 0.0
    fits = np.flatnonzero(demand <= budget)
    if fits.size == 0:
        return float(grid[-1])
    k = int(fits[0])
    d_lo, d_hi = demand[k - 1], demand[k]
    if d_hi <= 0 or budget <= 0:
        return float(grid[k])
    frac = (np.log(d_lo) - np.log(budget)) / (np.log(d_lo) - np.log(d_hi))
    return float(np.exp(np.log(grid[k - 1]) + frac * (np.log(grid[k]) - np.log(grid[k - 1]))))


def auto_split(grid, refresh_demand, total: float, bins, counts, value_days: float) -> dict:
    r"""Discovery budget that equalises the marginal value of one fetch in both lanes.

    ``total`` visits are shared by refresh and discovery. Discovery's k-th fetch is worth
    :math:`v_d(k) = w_{(k)}\,T_d` (importance of the k-th best frontier URL times
    ``value_days``), non-increasing in k; refresh's marginal value :math:`\mu(B_r)` is
    non-increasing in its budget :math:`B_r = total - k`, i.e. non-decreasing in k. The
    split is the largest k (on the histogram's bin boundaries) with
    :math:`v_d(k) \ge \mu(total - k)`.

    Returns
    -------
    dict
        ``discovery_budget``, ``refresh_budget``, ``refresh_value`` (μ at the split),
        ``discovery_value`` (value of the last discovery fetch; None when none).
    """
    order = np.argsort(-np.asarray(bins))
    b, c = np.asarray(bins)[order], np.asarray(counts, float)[order]
    values = np.exp2((b + 0.5) / BINS_PER_OCTAVE) * value_days  # bin centre
    chosen, v_last, taken = 0.0, None, 0.0
    for value, cnt in zip(values, c):
        if taken >= total:
            break
        # Take the whole bin, or the part of it where discovery still beats refresh.
        step = min(cnt, total - taken)
        if value < refresh_marginal(grid, refresh_demand, total - taken):
            break
        lo, hi = 0.0, step  # largest x in [0, step] with value >= mu(total - taken - x)
        if value >= refresh_marginal(grid, refresh_demand, total - taken - step):
            lo = step
        else:
            for _ in range(50):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if value >= refresh_marginal(
                    grid, refresh_demand, total - taken - mid) else (lo, mid)
        taken += np.floor(lo)
        chosen, v_last = taken, float(value)
        if lo < step:
            break
    chosen = int(chosen)
    return {"discovery_budget": chosen, "refresh_budget": float(total - chosen),
            "refresh_value": refresh_marginal(grid, refresh_demand, total - chosen),
            "discovery_value": v_last}


# ---------------------------------------------------------------------------------------
# Lane budgets: the one place for the shares, the reservation order and the auto split.
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BudgetParams:
    """The day's budget and how it is shared (``[budget]`` and
    ``lanes.discovery_value_days``; built by :func:`jobs.params.budget_params`, which holds
    no defaults of its own: they live in ``jobs.config``)."""

    daily_fetches: int
    fast_share: float
    audit_share: float
    discovery_share: float
    split: str                     # 'fixed' or 'auto'
    discovery_value_days: float


def share_targets(params: BudgetParams) -> dict:
    r"""Each side lane's target from its share: :math:`\lfloor s_\ell B \rfloor` for
    :math:`\ell` in fast, audit, discovery (refresh gets the rest)."""
    b = params.daily_fetches
    return {"fast": math.floor(params.fast_share * b),
            "audit": math.floor(params.audit_share * b),
            "discovery": math.floor(params.discovery_share * b)}


def audit_keep(target: int, due: float) -> float:
    r"""Share :math:`q` of the day's due audit visits that claim host capacity.

    The cut keeps at most :math:`T_a` audits (the highest hash priorities of a uniform
    random subset), so when :math:`n` > :math:`T_a` are due, the others would claim host
    capacity only to be dropped: a host limited to 13 visits a day lost 12 of them to audits
    of which the cut kept one or two. Thinning by the same hash keeps
    :math:`\mathrm{Binomial}(n, q)` of them, with

    .. math:: q = \min\Big(1, \frac{T_a + 2\sqrt{T_a} + 1}{n}\Big),

    two standard deviations above :math:`T_a`, so the audit lane is rarely short (what it
    leaves flows to refresh, :func:`cut_budgets`) and the sample stays uniform.
    """
    if not (target >= 0 and due >= 0):
        raise ValueError("target and due must be >= 0")
    if due <= target:
        return 1.0
    if target == 0:
        return 0.0
    return float(min(1.0, (target + 2.0 * math.sqrt(target) + 1.0) / due))


@dataclass(frozen=True)
class HostReservations:
    """What each host's cap gives each lane, in claim order (arrays, one entry per host)."""

    fast: np.ndarray
    audit: np.ndarray
    discovery: np.ndarray
    gone: np.ndarray
    refresh_cap: np.ndarray


def reserve(caps, n_fast, fast_rate, n_audit, n_discovery, n_gone, gone_rate) -> HostReservations:
    r"""The reservation order: lanes claim each host's cap :math:`C_h` one after another,

    .. math::

        f_h = \min(C_h, n^{fast}_h r_f),\quad a_h = \min(C_h - f_h, n^{audit}_h),\quad
        d_h = \min(C_h - f_h - a_h, n^{disc}_h),

        g_h = \min(C_h - f_h - a_h - d_h, n^{gone}_h r_g),\quad
        R_h = \max(0, C_h - f_h - a_h - d_h - g_h)

    (fast, audit, discovery, gone re-checks, then refresh under :math:`R_h`). The one copy
    of the order: the hosts plan by it (:func:`jobs.core.host_plan.reservations`) and the
    driver's budgets count by it (:func:`lane_budgets`).

    Parameters
    ----------
    caps : array_like
        Daily cap of each host (:func:`host_capacity`).
    n_fast, n_audit, n_discovery, n_gone : array_like
        Fast pages, due audits, discovery candidates and gone pages of each host.
    fast_rate, gone_rate : float
        Visits/day of one fast page and of one gone page.
    """
    c = np.asarray(caps, dtype=float)
    fast = np.minimum(c, np.asarray(n_fast, dtype=float) * fast_rate)
    audit = np.minimum(c - fast, np.asarray(n_audit, dtype=float))
    disc = np.minimum(c - fast - audit, np.asarray(n_discovery, dtype=float))
    gone = np.minimum(c - fast - audit - disc, np.asarray(n_gone, dtype=float) * gone_rate)
    return HostReservations(fast=fast, audit=audit, discovery=disc, gone=gone,
                            refresh_cap=np.maximum(0.0, c - fast - audit - disc - gone))


@dataclass(frozen=True)
class LaneBudgets:
    """The day's visits per lane (:func:`lane_budgets`)."""

    total: int                      # budget.daily_fetches
    fast_rate: float                # r_f, the fast lane's common rate per page
    fast: int                       # B_f
    audit: int                      # B_a
    discovery: int                  # B_d
    discovery_min_bin: Optional[int]  # lowest importance bin the discovery lane takes
    gone: float                     # Σ g_h, gone re-checks
    joint: float                    # fast visits priced with refresh (fast_floor), else 0
    refresh_solve: float            # B_r + joint: the budget the refresh level is solved for
    floor_need: float               # joint + Σ min(R_h, n^refresh_h f_min)
    discovery_value: Optional[float] = None  # value of the last discovery fetch (with demand)
    fast_floor: bool = False

    @property
    def refresh(self) -> float:
        """B_r: what the refresh solve spends beyond the fast pages priced with it."""
        return float(self.refresh_solve - self.joint)

    def planned(self) -> dict:
        """Per-lane budgets for the day's cut (:func:`cut_budgets`). With ``fast_floor`` the
        fast lane may draw on the joint pool (its rows still go first; what it leaves flows
        to refresh), so ``fast`` is B_f + floor(B_r); refresh gets B - B_f - B_a - B_d."""
        fast = self.fast + (math.floor(self.refresh_solve - self.joint) if self.fast_floor else 0)
        return {"fast": fast, "audit": self.audit, "discovery": self.discovery,
                "refresh": int(self.total) - self.fast - self.audit - self.discovery}


def lane_budgets(params: BudgetParams, hosts, bins, counts, *, f_min: float, f_max: float,
                 gone_rate: float, fast_floor: bool, demand=None) -> LaneBudgets:
    r"""Every lane's budget for the day, from per-host summaries.

    With :math:`B` = ``daily_fetches``, targets :math:`T_\ell = \lfloor s_\ell B \rfloor`
    (:func:`share_targets`) and each host's claims in the order of :func:`reserve`:

    .. math::

        \sum_h \min(C_h, n^{fast}_h r_f) = T_f \;\text{(solved for } r_f\text{, clipped)},
        \qquad B_f = \min(T_f, \lceil \textstyle\sum_h f_h \rceil),
        \qquad B_a = \min(T_a, \textstyle\sum_h a_h),

        S = B - B_f - B_a, \qquad B_d = \min(N_d, T_d, S), \qquad
        B_r = \max(0, S - B_d - \textstyle\sum_h g_h),

    where :math:`N_d` is the number of frontier URLs. With ``fast_floor`` the fast pages are
    priced with refresh, so the refresh solve gets :math:`B_r + J` with :math:`J = \sum_h
    f_h`. Split ``auto`` (needs ``demand``): :math:`B_d` and :math:`B_r + J` come from
    :func:`auto_split` over :math:`S - \sum_h g_h + J`. The discovery lane takes the frontier
    URLs of the top importance bins down to :func:`importance_threshold` of :math:`B_d`.

    The driver does not see which of a host's frontier URLs pass that threshold, so it
    reserves each host's whole frontier (``n_discovery``) before its gone re-checks and
    refresh floors: exact when every frontier URL is a candidate, otherwise an upper bound
    of the host's discovery claim.

    Parameters
    ----------
    params : BudgetParams
    hosts : DataFrame
        One row per host: ``cap``, ``n_fast``, ``n_audit``, ``n_discovery``, ``n_gone``,
        ``n_refresh`` (pass 1 of :mod:`jobs.policy_rates`).
    bins, counts : array_like
        Histogram of frontier importance bins (:func:`importance_bin`).
    f_min, f_max : float
        The policy's rate floor and ceiling (visits/day).
    gone_rate : float
        Visits/day of a gone page.
    fast_floor : bool
        The fast rate is a floor of a joint solve with refresh (budget-aware policies).
    demand : (grid, curve), optional
        Summed refresh demand on the level grid (pass 2). Given, the split is ``auto``'s
        (when chosen and there is a frontier) and ``discovery_value`` is filled.

    Returns
    -------
    LaneBudgets
    """
    total = float(params.daily_fetches)
    targets = share_targets(params)
    bins = np.asarray(bins, dtype=np.int64)
    counts = np.asarray(counts, dtype=float)
    caps = hosts["cap"].to_numpy(dtype=float)
    n_fast = hosts["n_fast"].to_numpy()
    r_fast = fast_rate(n_fast, caps, targets["fast"], f_min, f_max)
    n_disc = float(counts.sum())
    res = reserve(caps, n_fast, r_fast, hosts["n_audit"].to_numpy(),
                  hosts["n_discovery"].to_numpy(), hosts["n_gone"].to_numpy(), gone_rate)
    audit = int(min(targets["audit"], res.audit.sum()))
    fast = int(min(targets["fast"], math.ceil(res.fast.sum() - 1e-9)))
    shared = total - fast - audit  # refresh + discovery (+ gone re-checks)
    gone = float(res.gone.sum())
    disc = int(min(n_disc, targets["discovery"], shared))
    joint = float(res.fast.sum()) if fast_floor else 0.0
    refresh_solve = max(0.0, shared - disc - gone) + joint
    floor_need = joint + float(np.minimum(
        res.refresh_cap, hosts["n_refresh"].to_numpy() * f_min).sum())
    disc_value = None
    if demand is not None and n_disc > 0:
        grid, curve = demand
        if params.split == "auto":
            split = auto_split(grid, curve, shared - gone + joint, bins, counts,
                               params.discovery_value_days)
            disc, refresh_solve = int(split["discovery_budget"]), split["refresh_budget"]
            disc_value = split["discovery_value"]
        elif disc > 0:
            threshold = importance_threshold(bins, counts, disc)
            lowest = bins >= (threshold if threshold is not None else bins.min())
            disc_value = float(np.exp2((bins[lowest].min() + 0.5) / BINS_PER_OCTAVE)
                               * params.discovery_value_days)
    return LaneBudgets(total=params.daily_fetches, fast_rate=r_fast, fast=fast, audit=audit,
                       discovery=disc, discovery_min_bin=importance_threshold(bins, counts, disc),
                       gone=gone, joint=joint, refresh_solve=refresh_solve, floor_need=floor_need,
                       discovery_value=disc_value, fast_floor=fast_floor)


def cut_budgets(planned: dict, total: int, counts: dict) -> dict:
    """The day's cut per lane: fast, audit and discovery get what was planned for them, or
    fewer if they have fewer candidates; refresh gets the rest of ``total``, so budget a
    lane cannot use flows to refresh."""
    out = {lane: max(0, min(counts.get(lane, 0), int(planned.get(lane, 0))))
           for lane in ("fast", "audit", "discovery")}
    out["refresh"] = max(0, total - sum(out.values()))
    return out
