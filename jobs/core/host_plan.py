"""The three allocation passes over one bucket of hosts (pure pandas; Spark calls each once
per bucket).

A bucket is every page of some hosts (:mod:`jobs.core.plan_work` describes the rows and
prepares them). Each pass works on all of the bucket's hosts at once -- per-host
quantities are numpy reductions over host codes, the policy solves every host's cap price
in one vectorised search -- so its cost grows with the pages, not with a Python call per
host. A bucket of one host is a host's plan (the tests use that).

1. :func:`bucket_summary` -- per host its lane counts, cap and refresh level bounds, and the
   bucket's histogram of frontier importance (small rows for the driver);
2. :func:`bucket_demand` -- the bucket's capped refresh demand on the shared level grid
   (summed over its hosts);
3. :func:`plan_bucket` -- final rates for every lane, due visits, and each host's capped,
   ranked candidates plus one row of its figures (``url`` null: due and carried visits,
   expected-freshness sums) and one plan row per page (``reason`` not null,
   :mod:`jobs.core.plan_table`). allocate splits the three at the source: candidates go to
   the ``_work/dt=D/candidates`` table (:data:`CANDIDATE_DDL`), plan rows to ``plan/dt=D``,
   the figures are summed over hosts and committed in the candidates' marker beside the
   files, never as rows in it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from jobs.core import budget_curve, bursts, http_fields, lanes, plan, plan_table, plan_work
from jobs.core import probes, signal_evidence, timing
from jobs.core import observations as ob
from jobs.core.host_groups import HostGroups
from jobs.core.plan_work import PlanContext  # noqa: F401  (the passes' context, re-exported)

CANDIDATE_DDL = (  # one row per candidate visit: the _work/dt=D/candidates table
    "host string, url string, lane string, due_s double, priority double, p_changed double, "
    "method string, if_none_match string, if_modified_since string, crawl_delay_s double, "
    "rate double, audit_wanted boolean, signal boolean, probe boolean")
CANDIDATE_COLUMNS = [c.split()[0] for c in CANDIDATE_DDL.split(", ")]
HOST_FIGURES_DDL = (  # each host's figures, in plan_bucket's url-null rows (summed per run)
    "due_count long, carried long, known_urls long, weight_sum double, "
    "weighted_freshness double, w_fast double, wf_fast double, w_refresh double, "
    "wf_refresh double, signals long, cap long, discovery_deferred long, health_withheld double, "
    "weighted_age double, " + ", ".join(f"{c} double" for c in budget_curve.SUM_COLUMNS)
    + ", signal_deferred long")
HOST_FIGURES = [c.split()[0] for c in HOST_FIGURES_DDL.split(", ")]
# plan_bucket's output (one Spark pass): visits, host figures and per-page plan rows
PLAN_DDL = CANDIDATE_DDL + ", " + HOST_FIGURES_DDL + ", " + plan_table.PLAN_ROW_DDL
PLAN_COLUMNS = CANDIDATE_COLUMNS + HOST_FIGURES + plan_table.PLAN_ROW_COLUMNS
SUMMARY_DDL = ("host string, cap long, n_fast long, n_refresh long, n_gone long, "
               "n_audit long, n_discovery long, lo double, hi double, bin long, bin_count long")
SUMMARY_COLUMNS = [c.split()[0] for c in SUMMARY_DDL.split(", ")]
# The page columns passes 1 and 2 read (pass 3 reads them all): allocate sends only these.
LEVEL_COLUMNS = ("host", "url", "lane", "lambda_hat", "importance", "interval_s", "gone",
                 "crawl_delay_s", "max_fetches_per_day", "cap_factor", plan_work.PATTERN_COLUMN,
                 *timing.TIMING_COLUMNS)
# Timestamp columns; plan_bucket takes them as timestamps or as epoch seconds (doubles).
TIME_COLUMNS = ("last_fetch_at", "last_success_at", "pending_signal_at", "signal_unchanged_at")
# Optional: the last confirmed copy (state's last_known_at), what P(changed) counts from on a
# host whose 304s are not trusted (plan_work.stale_since).
CONFIRMED_COLUMN = "last_known_at"
# Optional: the fetch that last saw a change (state's last_change_at). A burst recheck needs
# the last fetch to be that one: a recheck that found the copy unchanged ends the burst.
CHANGE_COLUMN = "last_change_at"
# A page's learnt rhythm (jobs.core.timing) as plan_work.prepare gives it to due_visits.
TIMED_COLUMNS = ("period_s", "phase_s", "spread_s")


def bucket_summary(pages: pd.DataFrame, ctx: PlanContext, f_low: float, f_high: float):
    """Pass 1: one row per host (``bin`` null: cap, lane counts, the level bounds of its
    priced pages) and one row per frontier importance bin of the bucket (``host`` null)."""
    b = plan_work.load(pages, ctx)
    g, work = b.groups, b.work
    lane, gone = work["lane"].to_numpy(), work["gone"].to_numpy()
    lo, hi = np.full(g.n, np.inf), np.zeros(g.n)
    priced = plan_work.priced_mask(work, ctx)
    if ctx.policy is not None and ctx.policy.budget_aware and priced.any():
        page_lo, page_hi = ctx.policy.page_bounds(work[priced], f_low, f_high)
        lo = g.min(_scatter(page_lo, priced, np.inf))
        hi = g.max(_scatter(page_hi, priced, 0.0))
    hosts = pd.DataFrame({
        "host": g.labels, "cap": b.cap, "n_fast": g.count(lane == "fast"),
        "n_refresh": g.count((lane == "refresh") & ~gone), "n_gone": g.count(gone),
        "n_audit": g.count(work["audit"].to_numpy()), "n_discovery": g.count(lane == "discovery"),
        "lo": lo, "hi": hi})
    disc = lane == "discovery"
    bins, counts = np.unique(lanes.importance_bin(work["importance"].to_numpy()[disc]),
                             return_counts=True)
    rows = pd.DataFrame({"bin": bins.astype(np.int64), "bin_count": counts.astype(np.int64)})
    return pd.concat([hosts, rows], ignore_index=True).reindex(columns=SUMMARY_COLUMNS)


def _scatter(values, mask, fill):
    out = np.full(mask.size, fill, dtype=float)
    out[mask] = values
    return out


def bucket_demand(pages: pd.DataFrame, ctx: PlanContext, grid) -> np.ndarray:
    """Pass 2: the bucket's refresh demand at each grid level, every host under its
    remaining cap: :math:`\\sum_h D_h(g)` (:meth:`RatePolicy.hosts_demand`)."""
    grid = np.asarray(grid, dtype=float)
    b = plan_work.load(pages, ctx)
    res = plan_work.reservations(b, ctx)
    idx, priced, codes, caps = plan_work.priced_pages(b, res, ctx)
    if not idx.size:
        return np.zeros(grid.size)
    return ctx.policy.hosts_demand(priced, codes, caps, grid).sum(axis=0)


def _audit_visits(page_cols: dict, b, ctx: PlanContext) -> pd.DataFrame:
    """Policy-independent full fetches of the audit pages due today, at their hash-spread
    time of day."""
    audit = b.work["audit"].to_numpy()
    a = pd.DataFrame({k: v[audit] for k, v in page_cols.items()})
    a["lane"], a["method_hint"] = "audit", "full"
    due = ctx.window_start + b.work["audit_offset_s"].to_numpy()[audit]
    a["due_s"] = due
    elapsed = (due - np.nan_to_num(a["last_success_s"].to_numpy(), nan=-np.inf)) / 86400.0
    a["p_changed"] = np.where(np.isinf(elapsed), 1.0,
                              -np.expm1(-a["lambda_hat"].to_numpy() * np.maximum(elapsed, 0)))
    a["priority"] = plan_work.audit_priority(a["url"].to_numpy(dtype=object), ctx.day_index)
    return a


def _validators(pages: pd.DataFrame, page: np.ndarray):
    """If-None-Match / If-Modified-Since a visit of ``page`` may send (None: none trusted or
    valid). Only the kept visits' values are checked, each distinct value once."""
    def checked(name, clean, trust):
        codes, values = pd.factorize(pages[name].to_numpy(dtype=object)[page])
        ok = clean(pd.Series(values, dtype=object)) if len(values) else np.array([], object)
        out = np.where(codes >= 0, ok[np.maximum(codes, 0)] if ok.size else None, None)
        return np.where(plan_work.flag(pages, trust, True)[page], out, None)

    return (checked("etag", http_fields.clean_etags, "trust_etag"),
            checked("last_modified", http_fields.clean_dates, "trust_lm"))


def _health_withheld(b: plan_work.Bucket, rate: np.ndarray, ctx: PlanContext) -> np.ndarray:
    """Per host, the visits/day its health cut (``cap_factor`` < 1) took from it at the day's
    level: its pages' rates under the politeness cap alone minus those it got — the budget
    that went to other hosts. Re-solved for the cut hosts' pages only (hosts are independent
    at a given level), so a bucket without them costs nothing."""
    withheld = np.zeros(b.groups.n)
    factor = plan_work.column(b.pages, "cap_factor", 1.0).to_numpy(dtype=float)
    cut = np.isfinite(factor) & (factor < 1.0)
    if not cut.any():
        return withheld
    alone = plan_work.load(b.pages[cut].assign(cap_factor=1.0), ctx)
    uncut, _ = plan_work.lane_rates(alone, ctx)
    codes = b.groups.codes
    wanted = np.bincount(codes[cut], weights=uncut, minlength=b.groups.n)
    got = np.bincount(codes[cut], weights=rate[cut], minlength=b.groups.n)
    return np.clip(wanted - got, 0.0, None)


def _backfill(pullable: pd.DataFrame, stale_now: pd.DataFrame, checks: pd.DataFrame,
              kept: pd.DataFrame, last_in_window: pd.Series, spare: np.ndarray, g: HostGroups,
              ctx: PlanContext) -> pd.DataFrame:
    """Lane ``backfill``: each host's next-day visits pulled to the end of the window
    (:func:`jobs.core.plan.backfill_visits`), its ``stale_now`` visits (turned-down push
    signals at the window start, priced by what they buy) for pages without a visit in the
    window, and its rhythm checks (``checks``, :func:`_rhythm_checks`), best first, at most
    the cap its due visits left (``spare``). The day's cut gives the lane only what every
    other lane leaves unused. ``last_in_window``: each page's last kept visit (by page)."""
    empty = kept.iloc[0:0]
    if (ctx.backfill_s <= 0 or not (len(pullable) or len(stale_now) or len(checks))
            or not np.any(spare > 0)):
        return empty
    pullable = pullable[spare[g.codes[pullable["page"].to_numpy()]] > 0]
    pullable = pullable.assign(after_s=pullable["page"].map(last_in_window).to_numpy(float))
    stale_now = stale_now[~stale_now["page"].isin(last_in_window.index)]
    pulled = plan.backfill_visits(pullable, ctx.window_start, ctx.window_end, ctx.backfill_s)
    cand = pd.concat([pulled, stale_now.reindex(columns=kept.columns),
                      checks.reindex(columns=kept.columns)], ignore_index=True)
    if not len(cand):
        return empty
    hosts = HostGroups.from_codes(g.labels, g.codes[cand["page"].to_numpy()])
    fill, _ = plan.apply_host_caps(cand, hosts, spare)
    return fill.assign(lane="backfill").reindex(columns=kept.columns)


def _rhythm_checks(pages: pd.DataFrame, frame: pd.DataFrame, last_in_window: pd.Series, rate,
                   last_success, live, ctx: PlanContext) -> pd.DataFrame:
    """The rhythm checks of pages timed on the day that never went unchanged, visited above
    ``f_min`` (:mod:`jobs.core.timing`, "Rhythm checks"): one each, halfway from its last
    visit (in the window when it has one, else its last success) to its next phase window,
    marked ``check`` (the day's cut keeps them first in lane backfill: ``probe``)."""
    t = ctx.timing
    empty = frame.iloc[0:0]
    if t is None or not t.enabled or not all(c in pages for c in probes.PROBE_COLUMNS):
        return empty
    n_obs = np.nan_to_num(pages["n_observations"].to_numpy(dtype=float))
    n_chg = np.nan_to_num(pages["n_changes"].to_numpy(dtype=float))
    cand = (live & (frame["period_s"].to_numpy(dtype=float) == timing.DAY_S) & (n_obs >= 1.0)
            & (n_chg >= n_obs) & (np.asarray(rate, dtype=float) > ctx.f_min * (1.0 + 1e-9)))
    if not cand.any():
        return empty
    rows = np.flatnonzero(cand)
    phase, half = timing.day_window(timing.stored(pages.iloc[rows]), t,
                                    frame["lambda_hat"].to_numpy(dtype=float)[rows])
    anchor = np.fmax(np.asarray(last_success, dtype=float)[rows],
                     frame["page"].iloc[rows].map(last_in_window).to_numpy(dtype=float))
    return plan.rhythm_check_visits(frame.iloc[rows], anchor, phase, half, ctx.window_start,
                                    ctx.window_end).assign(check=True)


def rhythm_anchor(last_fetch_s, last_success_s, pages: pd.DataFrame) -> np.ndarray:
    """The instant each page's visit rhythm runs from (:func:`jobs.core.plan.due_visits`):
    its last fetch, or its last success when the last fetch failed (status 0, 429, 5xx:
    :func:`jobs.core.observations.is_error`; NaN when it never succeeded, so it is due at
    the window start). A failed visit did not see the page, so it should not push the next
    one a whole period away: a host's 503 storm would otherwise leave its pages due in a
    lump one period later and almost none due in between, and a host under a served-rate
    limit would get a fraction of its limit on the days it recovers. The host's
    cap still bounds how many of them go out in one day. ``pages`` without ``last_status``
    (older callers) keep the last fetch."""
    last_fetch = np.asarray(last_fetch_s, dtype=float)
    if "last_status" not in pages:
        return last_fetch
    # An unknown status (never fetched) is not a failure.
    status = np.nan_to_num(pd.to_numeric(pages["last_status"]).to_numpy(dtype=float), nan=200.0)
    failed = ob.is_error(status)
    return np.where(failed, np.asarray(last_success_s, dtype=float), last_fetch)


def _early_visits(pages: pd.DataFrame, work: pd.DataFrame, rate, last_success, lane, period_s,
                  live, ctx: PlanContext) -> dict:
    """``recheck_s``/``recheck_p`` (:func:`jobs.core.plan.due_visits`) of the untimed refresh
    pages whose next visit comes early: caught mid-burst on a host whose Last-Modified is
    trusted (:mod:`jobs.core.bursts`), or every fetch changed on one whose is not
    (:mod:`jobs.core.probes`)."""
    n = len(pages)
    out = {"recheck_s": np.full(n, np.nan), "recheck_p": np.full(n, np.nan)}
    candidates = live & (lane == "refresh") & np.isnan(period_s) & np.isfinite(last_success)
    trusted = plan_work.flag(pages, "trust_lm", False)
    if ctx.probe_factor > 0 and all(c in pages for c in probes.PROBE_COLUMNS):
        out["recheck_s"], out["recheck_p"] = probes.probe_recheck(
            last_success, work["lambda_hat"].to_numpy(dtype=float), rate,
            pages["n_observations"].to_numpy(dtype=float), pages["n_changes"].to_numpy(dtype=float),
            candidates & ~trusted, ctx.f_min, ctx.probe_factor)
    t = ctx.timing
    if t is None or not t.enabled or t.burst_max_poisson_prob <= 0 or "last_modified" not in pages:
        return out
    if CHANGE_COLUMN in pages:
        # Only a change the last fetch found: the same Last-Modified seen again by a recheck
        # is the burst over (a slow page's one change would otherwise look recent to its λ̂
        # for days, and be rechecked every burst_recheck_s until it did not). A page fetched
        # once (no observation yet) found its Last-Modified at that fetch.
        found = plan_work.seconds(pages, CHANGE_COLUMN)
        observed = plan_work.column(pages, "n_observations", np.nan).to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            first = np.isnan(found) & ~(observed > 0)
            candidates = candidates & ((found >= last_success) | first)
    rows = np.flatnonzero(candidates & trusted)
    if rows.size == 0:
        return out
    modified = http_fields.parse_http_dates(pages["last_modified"].to_numpy(dtype=object)[rows])
    at, p = bursts.burst_recheck(last_success[rows], modified,
                                 work["lambda_hat"].to_numpy(dtype=float)[rows],
                                 np.ones(rows.size, bool), t.burst_max_poisson_prob,
                                 t.burst_recheck_s)
    out["recheck_s"][rows], out["recheck_p"][rows] = at, p
    return out


def _overrides(pages: pd.DataFrame, b: plan_work.Bucket, rate: np.ndarray, live: np.ndarray,
               last_fetch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rates, override reason per page or None) after the operator's overrides.

    ``pin_rate``: a live page's visits/day, at most its host's cap (``override_pin_capped``
    when the cap lowered it); ``force_after``: a live page not fetched since gets a visit
    now (``override_force``); ``paused``: its host's cap is 0 today (``override_pause``)."""
    n = len(pages)
    override = np.full(n, None, dtype=object)
    paused = plan_work.flag(pages, "paused", False)
    pin = plan_work.column(pages, "pin_rate", np.nan).to_numpy(dtype=float)
    force_after = plan_work.column(pages, "force_after", np.nan).to_numpy(dtype=float)
    cap = b.cap[b.groups.codes].astype(float)
    pinned = live & ~np.isnan(pin) & ~paused
    rate = np.where(pinned, np.minimum(pin, cap), rate)
    override[pinned] = np.where(pin[pinned] > cap[pinned], "override_pin_capped",
                                "override_pin")
    forced = (live & ~np.isnan(force_after) & ~paused
              & (np.isnan(last_fetch) | (last_fetch <= force_after)) & (cap >= 1))
    override[forced] = "override_force"
    override[paused] = "override_pause"
    return rate, override


def plan_bucket(pages: pd.DataFrame, ctx: PlanContext) -> pd.DataFrame:
    """Pass 3: every host's capped candidate visits, best first, plus one figures row per
    host (``url`` null, :data:`HOST_FIGURES`; the visits leave those columns null) and one
    plan row per page (``reason`` not null, :data:`jobs.core.plan_table.PLAN_ROW_COLUMNS`).

    Parameters
    ----------
    pages : DataFrame
        The bucket's pages (any hosts; see :mod:`jobs.core.plan_work`) with url, lane,
        lambda_hat, importance, interval_s, gone, last_fetch_at, last_success_at, etag,
        last_modified, method_hint, crawl_delay_s, max_fetches_per_day and optionally
        last_known_at (:func:`jobs.core.plan_work.stale_since`), cap_factor, trust_etag, trust_lm, audit_wanted, pending_signal_at (the
        :data:`TIME_COLUMNS` as timestamps or as epoch seconds).
    """
    b = plan_work.load(pages, ctx)
    pages, g, work = b.pages, b.groups, b.work
    rate, res, curve_rates = plan_work.lane_rates_at(b, ctx, ctx.curve)
    last_fetch, last_success, signal_at, unchanged = (plan_work.seconds(pages, c)
                                                      for c in TIME_COLUMNS)
    known, gone = work["known"].to_numpy(), work["gone"].to_numpy()
    # The operator's overrides (jobs.core.overrides; allocate adds the columns): a pinned
    # rate replaces the policy's, never above the host's cap (politeness wins); a forced
    # page is due at the window's start like a push signal, kept first by the cap and cut.
    rate, override = _overrides(pages, b, rate, known & ~gone, last_fetch)
    forced = override == "override_force"
    # A trusted push signal newer than the last fetch: due now, P(changed) = 1, when a visit
    # now is worth the day's price (a page changing many times a day is stale again within
    # hours: its signal is no news, and its visit would cost a better one elsewhere).
    # A signal not acted on may still take budget the day leaves unused (lane backfill).
    signaled = (~np.isnan(signal_at) & (np.isnan(last_fetch) | (signal_at > last_fetch)) & known)
    signal = signaled.copy()
    stale_value = None  # what a visit now buys each signaled page (a pricing policy only)
    if ctx.policy is not None and signal.any():
        stale_value = ctx.policy.stale_visit_values(work[signaled], rate[signaled])
        signal[signaled] = ctx.policy.stale_visit_worth(work[signaled], rate[signaled],
                                                        ctx.level, values=stale_value)
    signaled_only = signaled & ~forced  # a forced page is due now whatever its signal says
    signal |= forced
    rhythm_from = rhythm_anchor(last_fetch, last_success, pages)
    # P(changed) counts from the last confirmed copy unless the host's 304s are trusted.
    since = plan_work.stale_since(pages, last_success)
    # A trusted signal's "not changed since the copy" moves the rhythm (and P(changed)) on,
    # by at most signals.max_defer_days (jobs.core.signal_evidence).
    moved, deferred = signal_evidence.deferred_anchor(rhythm_from, unchanged, ctx.max_defer_s)
    deferred &= known & ~gone & ~signal & (override == None)  # noqa: E711 (elementwise)
    rhythm_from = np.where(deferred, moved, rhythm_from)
    last_success = np.where(deferred, np.fmax(last_success, moved), last_success)
    since = np.where(deferred, np.fmax(since, moved), since)
    period = 86400.0 / np.where(rate > 0, rate, 1.0)
    page_cols = {
        "page": np.arange(len(pages)), "url": work["url"].to_numpy(), "rate": rate,
        "lambda_hat": work["lambda_hat"].to_numpy(), "importance": work["importance"].to_numpy(),
        "signal": signal, "method_hint": pages["method_hint"].to_numpy(dtype=object),
        "rhythm_from_s": np.where(signal, ctx.window_start - period, rhythm_from),
        # the instant P(changed) counts from (plan.due_visits names it last_success_s)
        "last_success_s": np.where(signal, np.nan, since),
    }
    lane = work["lane"].to_numpy()
    keep = (rate > 0) & ((lane != "discovery") | plan_work.discovery_selected(work, ctx))
    # The policy's rates fill what the cap left the pages it prices (each host solved its
    # own cap price, above the day's level).
    priced = plan_work.priced_mask(work, ctx)
    room = res.hosts.refresh_cap + (res.hosts.fast if ctx.fast_floor else 0.0)
    rates_fill = (g.count(priced) > 0) & (g.sum(rate, priced) >= room * (1 - 1e-9))
    # A probe-due host (its limit is a probe above what it served before) that the plan
    # wants more of than its limit gets every overdue page due now, not at its next grid
    # point, so the day asks for the whole limit and tests it (visits on their rhythm alone
    # come to fewer than the limit, and the probe would go untested for days).
    probe_due = plan_work.flag(pages, "probe_due", False)[g.first]
    catch_up = (probe_due & rates_fill)[g.codes]
    # A timed page's visits go just after its learnt change time; a signal is due now, or at
    # that time when it comes inside the window (plan.due_visits).
    timed = {c: work[c].to_numpy() for c in TIMED_COLUMNS}
    recheck = _early_visits(pages, work, rate, last_success, lane, timed["period_s"],
                            known & ~gone & ~signal, ctx)
    frame = pd.DataFrame({**page_cols, "lane": lane, **timed, **recheck})
    lag = ctx.timing.visit_lag_s if ctx.timing is not None else 0.0
    visits = pd.concat([
        plan.due_visits(frame[keep & ~catch_up], ctx.window_start, ctx.window_end,
                        ctx.max_visits_per_url, lag_s=lag),
        plan.due_visits(frame[keep & catch_up], ctx.window_start, ctx.window_end,
                        ctx.max_visits_per_url, resume_rhythm=False, lag_s=lag)],
        ignore_index=True).drop(columns=[*TIMED_COLUMNS, *recheck])
    if work["audit"].any():
        visits = pd.concat([visits, _audit_visits(page_cols, b, ctx)], ignore_index=True)
    visit_hosts = HostGroups.from_codes(g.labels, g.codes[visits["page"].to_numpy()])
    kept, _ = plan.apply_host_caps(visits, visit_hosts, b.cap)
    kept = kept.assign(check=False)
    kept_due = np.bincount(g.codes[kept["page"].to_numpy()], minlength=g.n)
    # Backfill: known, not gone, untimed refresh and fast pages not already due in full,
    # and the signals not worth a planned visit (at the window start, P(changed) = 1), all
    # ranked by what the visit buys.
    pinned = np.isin(override, ("override_pin", "override_pin_capped"))  # the rate is theirs
    pullable = (keep & ~catch_up & ~signaled & ~forced & ~pinned & ~gone
                & np.isin(lane, ("refresh", "fast")) & np.isnan(timed["period_s"]))
    ignored = ~signal[signaled_only] & ~gone[signaled_only]  # of the signaled rows: turned down
    if stale_value is not None:
        stale_value = stale_value[~forced[signaled]]
    stale_now = frame[signaled_only][ignored].assign(
        due_s=ctx.window_start, p_changed=1.0,
        priority=stale_value[ignored] if stale_value is not None else np.nan)
    last_in_window = kept.groupby("page")["due_s"].max()
    checks = _rhythm_checks(pages, frame, last_in_window, rate, last_success, known & ~gone,
                            ctx)
    kept = pd.concat([kept, _backfill(frame[pullable], stale_now, checks, kept, last_in_window,
                                      b.cap - kept_due, g, ctx)], ignore_index=True)

    page = kept["page"].to_numpy()
    host = g.codes[page]
    inm, ims = _validators(pages, page)
    has_validator = ~(pd.isna(inm) & pd.isna(ims))
    conditional = has_validator & (kept["method_hint"].to_numpy() == "conditional")
    delay = pages["crawl_delay_s"].to_numpy(dtype=float)[g.first]
    out = pd.DataFrame({
        "host": g.labels[host], "url": kept["url"].to_numpy(), "lane": kept["lane"].to_numpy(),
        "due_s": kept["due_s"].to_numpy(), "priority": kept["priority"].to_numpy(),
        "p_changed": kept["p_changed"].to_numpy(),
        "method": np.where(conditional, "conditional", "full"),
        "if_none_match": np.where(conditional, inm, None),
        "if_modified_since": np.where(conditional, ims, None),
        "crawl_delay_s": delay[host], "rate": kept["rate"].to_numpy(),
        "audit_wanted": plan_work.flag(pages, "audit_wanted", False)[g.first][host],
        "signal": kept["signal"].to_numpy(bool),
    })
    policy = ctx.policy
    live = known & ~gone
    fresh = timing.expected_freshness(work["lambda_hat"].to_numpy(), rate,
                                      work["period_s"].to_numpy())
    imp = work["importance"].to_numpy()
    figures = {"host": g.labels, "url": None, "lane": None, "crawl_delay_s": delay,
               "due_count": visit_hosts.counts,
               "carried": visit_hosts.counts - kept_due,
               "known_urls": g.count(known), "signals": g.count(signaled), "cap": b.cap,
               "discovery_deferred": g.count((lane == "discovery") & ~keep),
               "health_withheld": _health_withheld(b, rate, ctx),
               "signal_deferred": g.count(deferred)}
    # The budget advisor: Σ w·A today, and Σ w·F, Σ w·A at each what-if level (empty: null).
    lam, period = work["lambda_hat"].to_numpy(), work["period_s"].to_numpy()
    figures["weighted_age"] = g.sum(budget_curve.weighted(imp, budget_curve.page_age(lam, rate)),
                                    live)
    bc = budget_curve
    for c, alt in zip(bc.FACTORS, curve_rates or [None] * len(bc.FACTORS)):
        k, empty = bc.factor_key(c), np.full(g.n, np.nan)
        figures[f"curve_wf_{k}"] = (empty if alt is None else
                                    g.sum(imp * bc.page_freshness(lam, alt, period), live))
        figures[f"curve_wa_{k}"] = (empty if alt is None else
                                    g.sum(bc.weighted(imp, bc.page_age(lam, alt)), live))
    for w_key, wf_key, mask in (("weight_sum", "weighted_freshness", live),
                                ("w_fast", "wf_fast", lane == "fast"),
                                ("w_refresh", "wf_refresh", (lane == "refresh") & ~gone)):
        figures[w_key], figures[wf_key] = g.sum(imp, mask), g.sum(imp * fresh, mask)
    # A host's cap binds when it cut due visits, or when the policy's rates fill it.
    binds = (figures["carried"] > 0) | (rates_fill if policy is not None else False)
    # A probe-due host whose cap binds has its capped visits kept first by the day's cut
    # (not its audits, whose hash priority keeps the audit sample uniform).
    out["probe"] = (probe_due & binds)[host] & (out["lane"].to_numpy() != "audit")
    # A rhythm check is kept first of the budget the day leaves unused: one visit that can
    # stop a page taking a visit a day for nothing (jobs.core.timing, "Rhythm checks").
    out["probe"] |= kept["check"].eq(True).to_numpy()
    # Visits the operator asked for (pinned or forced) are kept first by the cut too.
    out["probe"] |= (np.isin(override[page], ("override_pin", "override_pin_capped",
                                              "override_force"))
                     & (out["lane"].to_numpy() != "audit"))
    per_page = np.bincount(page, minlength=len(pages))
    audited = np.bincount(page, weights=kept["lane"].to_numpy() == "audit", minlength=len(pages))
    rows = plan_table.page_rows(
        host=g.labels[g.codes], url=work["url"].to_numpy(), lane=lane, gone=gone,
        selected=plan_work.discovery_selected(work, ctx), signal=signal, rate=rate,
        fast_rate=res.fast_per_page[g.codes], importance=imp,
        lambda_hat=work["lambda_hat"].to_numpy(), last_success_s=last_success,
        stale_since_s=since,
        visits=per_page, audit=audited > 0, host_cap=b.cap[g.codes], cap_binds=binds[g.codes],
        policy=policy, f_min=getattr(policy, "f_min", ctx.f_min),
        f_max=getattr(policy, "f_max", ctx.f_max), window_start=ctx.window_start,
        timing_gain=work["timing_gain"].to_numpy(), rate_ceiling=work["rate_ceiling"].to_numpy(),
        signal_ignored=signaled & ~signal, override=override)
    out = pd.concat([out, pd.DataFrame(figures), rows], ignore_index=True)
    return out.reindex(columns=PLAN_COLUMNS)
