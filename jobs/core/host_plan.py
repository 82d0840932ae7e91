"""One host's part of each allocation pass (pure pandas; Spark calls these per host).

Input is every page of one host: known pages from state and frontier pages (lane
``discovery``), joined with the host's politeness (``crawl_delay_s``,
``max_fetches_per_day``) and health/trust (``cap_factor``, ``trust_etag``, ``trust_lm``,
``audit_wanted``; defaults when the hosts table is absent). The three passes:

1. :func:`host_summary` -- lane counts, the host's cap and its refresh level bounds, and a
   histogram of its frontier importance (small rows for the driver);
2. :func:`refresh_demand` -- the host's capped refresh demand on the shared level grid;
3. :func:`plan_host` -- final rates for every lane, due visits, and the capped, ranked
   candidates plus one row of the host's figures (``url`` null: due and carried visits,
   expected-freshness sums). allocate splits the two at the source: candidates go to the
   ``_work/dt=D/candidates`` table (:data:`CANDIDATE_DDL`), the figures are summed over
   hosts and committed in that table's marker beside the files, never as rows in it.

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

from jobs.core import http_fields, lanes, plan
from jobs.core.freshness import freshness
from jobs.core.times import epoch_seconds as _epoch_s

CANDIDATE_DDL = (  # one row per candidate visit: the _work/dt=D/candidates table
    "host string, url string, lane string, due_s double, priority double, p_changed double, "
    "method string, if_none_match string, if_modified_since string, crawl_delay_s double, "
    "rate double, audit_wanted boolean, signal boolean")
CANDIDATE_COLUMNS = [c.split()[0] for c in CANDIDATE_DDL.split(", ")]
HOST_FIGURES_DDL = (  # the host's figures, in plan_host's one url-null row (summed per run)
    "due_count long, carried long, known_urls long, weight_sum double, "
    "weighted_freshness double, w_fast double, wf_fast double, w_refresh double, "
    "wf_refresh double, signals long, cap long, discovery_deferred long")
HOST_FIGURES = [c.split()[0] for c in HOST_FIGURES_DDL.split(", ")]
PLAN_DDL = CANDIDATE_DDL + ", " + HOST_FIGURES_DDL  # plan_host's output (one Spark pass)
PLAN_COLUMNS = CANDIDATE_COLUMNS + HOST_FIGURES
SUMMARY_DDL = ("host string, cap long, n_fast long, n_refresh long, n_gone long, "
               "n_audit long, n_discovery long, lo double, hi double, bin long, bin_count long")


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
    max_visits_per_url: int = 24

    @property
    def day_index(self) -> int:
        return int(self.window_start // 86400)


def _col(pages, name, default):
    if name in pages.columns:
        return pages[name]
    return pd.Series([default] * len(pages), index=pages.index, dtype=object)


def _flag(pages, name, default: bool) -> np.ndarray:
    return _col(pages, name, default).astype("boolean").fillna(default).to_numpy(dtype=bool)


def prepare(pages: pd.DataFrame, ctx: PlanContext) -> pd.DataFrame:
    """Per-page lane, filled importance, λ, and flags (same answer in every pass)."""
    known = pages["lane"].to_numpy(dtype=object) != "discovery"
    gone = _flag(pages, "gone", False) & known
    imp = lanes.fill_importance(pages["importance"].to_numpy(dtype=float), ~known, known,
                                ctx.default_importance)
    lam = np.nan_to_num(pages["lambda_hat"].to_numpy(dtype=float))
    urls = pages["url"].to_numpy(dtype=object)
    fast = (lanes.fast_mask(urls, lam, imp, known, ctx.fast_min_lambda,
                            ctx.fast_min_importance, lanes.compile_patterns(ctx.fast_patterns))
            | (pages["lane"].to_numpy(dtype=object) == "fast")) & ~gone & ctx.fast_enabled
    lane = np.where(~known, "discovery", np.where(fast, "fast", "refresh"))
    audit, offset = lanes.audit_due(urls, ctx.audit_rate, ctx.audit_cadence_days,
                                    ctx.day_index)
    interval = pages["interval_s"].to_numpy(dtype=float)
    return pd.DataFrame({
        "url": urls, "lane": lane, "known": known, "gone": gone, "lambda_hat": lam,
        "importance": imp, "interval_s": np.where(np.isnan(interval), ctx.initial_s, interval),
        "audit": audit & known & ~gone, "audit_offset_s": offset,
    })


def host_capacity(pages: pd.DataFrame) -> int:
    cap = lanes.host_capacity(pages["crawl_delay_s"].iloc[:1].to_numpy(dtype=float),
                              pages["max_fetches_per_day"].iloc[:1].to_numpy(),
                              _col(pages, "cap_factor", 1.0).iloc[:1].to_numpy(dtype=float))
    return int(cap[0])


def reservations(work: pd.DataFrame, cap: int, ctx: PlanContext) -> dict:
    """Visits/day the host's cap gives fast, audit, discovery and gone pages before refresh
    (in the order of :func:`jobs.core.lanes.reserve`)."""
    n_fast = int((work["lane"] == "fast").sum())
    r = lanes.reserve([cap], [n_fast], ctx.fast_rate, [float(work["audit"].sum())],
                      [float(discovery_selected(work, ctx).sum())],
                      [float(work["gone"].sum())], ctx.gone_rate)
    fast = float(r.fast[0])
    return {"fast": fast, "fast_per_page": fast / n_fast if n_fast else 0.0,
            "audit": float(r.audit[0]), "discovery": float(r.discovery[0]),
            "gone": float(r.gone[0]), "refresh_cap": float(r.refresh_cap[0])}


def discovery_selected(work: pd.DataFrame, ctx: PlanContext) -> np.ndarray:
    is_disc = (work["lane"] == "discovery").to_numpy()
    if ctx.discovery_min_bin is None:
        return is_disc
    return is_disc & (lanes.importance_bin(work["importance"].to_numpy()) >= ctx.discovery_min_bin)


def _refresh_pages(work):
    return work[(work["lane"] == "refresh").to_numpy() & ~work["gone"].to_numpy()]


def _priced_mask(work, ctx: PlanContext) -> np.ndarray:
    lane = work["lane"].to_numpy()
    priced = (lane == "refresh") & ~work["gone"].to_numpy()
    if ctx.fast_floor:
        priced |= lane == "fast"
    return priced


def priced_pages(work, res: dict, ctx: PlanContext):
    """Pages the policy prices and the cap they share: refresh pages under ``refresh_cap``;
    with ``ctx.fast_floor`` also the fast pages, each with ``rate_floor`` = its fast-lane
    rate, under ``refresh_cap`` + the fast reservation."""
    mask = _priced_mask(work, ctx)
    pages = work[mask]
    if not ctx.fast_floor:
        return mask, pages, res["refresh_cap"]
    floor = np.where(pages["lane"].to_numpy() == "fast", res["fast_per_page"], 0.0)
    return mask, pages.assign(rate_floor=floor), res["refresh_cap"] + res["fast"]


def host_summary(pages: pd.DataFrame, ctx: PlanContext, f_low: float, f_high: float):
    """Pass 1: one summary row (``bin`` null) and one row per frontier importance bin."""
    work = prepare(pages, ctx)
    ref = _refresh_pages(work)
    priced = work[_priced_mask(work, ctx)]
    lo, hi = np.inf, 0.0
    if ctx.policy is not None and ctx.policy.budget_aware and len(priced):
        lo, hi = ctx.policy.level_bounds(priced, f_low, f_high)
    host = pages["host"].iloc[0]
    rows = [{"host": host, "cap": host_capacity(pages), "n_fast": int((work.lane == "fast").sum()),
             "n_refresh": len(ref), "n_gone": int(work["gone"].sum()),
             "n_audit": int(work["audit"].sum()),
             "n_discovery": int((work.lane == "discovery").sum()), "lo": lo, "hi": hi}]
    disc = work[work.lane == "discovery"]
    if len(disc):
        bins, counts = np.unique(lanes.importance_bin(disc["importance"].to_numpy()),
                                 return_counts=True)
        rows += [{"host": host, "bin": int(b), "bin_count": int(c)} for b, c in zip(bins, counts)]
    return pd.DataFrame(rows)


def refresh_demand(pages: pd.DataFrame, ctx: PlanContext, grid) -> np.ndarray:
    """Pass 2: the host's refresh demand at each grid level, under its remaining cap."""
    work = prepare(pages, ctx)
    res = reservations(work, host_capacity(pages), ctx)
    _, priced, cap = priced_pages(work, res, ctx)
    if not len(priced):
        return np.zeros(len(grid))
    return ctx.policy.host_demand(priced, cap, np.asarray(grid))


def lane_rates(work: pd.DataFrame, cap: int, ctx: PlanContext) -> tuple[np.ndarray, dict]:
    """Final visits/day of every page; refresh at the driver's level under the host's
    remaining cap (the host re-solves its own cap multiplier, so it never overspends)."""
    res = reservations(work, cap, ctx)
    rate = np.zeros(len(work))
    lane = work["lane"].to_numpy()
    rate[lane == "fast"] = res["fast_per_page"]
    rate[discovery_selected(work, ctx)] = 1.0
    gone = work["gone"].to_numpy()
    if gone.any():
        rate[gone] = res["gone"] / gone.sum()
    is_ref = (lane == "refresh") & ~gone
    if is_ref.any() and ctx.policy is None:  # no policy: the backoff interval as is
        rate[is_ref] = np.clip(86400.0 / work.loc[is_ref, "interval_s"].to_numpy(),
                               ctx.f_min, ctx.f_max)
    elif ctx.policy is not None:
        mask, priced, priced_cap = priced_pages(work, res, ctx)
        if mask.any():
            level = 1.0 if ctx.level is None else ctx.level
            rate[mask] = ctx.policy.host_rates(priced, priced_cap, level)
    return rate, res


def plan_host(pages: pd.DataFrame, ctx: PlanContext) -> pd.DataFrame:
    """Pass 3: the host's capped candidate visits, best first, plus its figures row (``url``
    null, :data:`HOST_FIGURES`; the visits leave those columns null).

    Parameters
    ----------
    pages : DataFrame
        One host's pages (see module docstring) with url, lane, lambda_hat, importance,
        interval_s, gone, last_fetch_at, last_success_at, etag, last_modified,
        method_hint, crawl_delay_s, max_fetches_per_day and optionally cap_factor,
        trust_etag, trust_lm, audit_wanted, pending_signal_at.
    """
    host = pages["host"].iloc[0]
    delay = float(pages["crawl_delay_s"].iloc[0])
    cap = host_capacity(pages)
    work = prepare(pages, ctx)
    rate, res = lane_rates(work, cap, ctx)
    last_fetch = _epoch_s(pages["last_fetch_at"])
    last_success = _epoch_s(pages["last_success_at"])
    signal_at = _epoch_s(_col(pages, "pending_signal_at", None))
    # A trusted push signal newer than the last fetch: due now, P(changed) = 1.
    signal = (~np.isnan(signal_at) & (np.isnan(last_fetch) | (signal_at > last_fetch))
              & work["known"].to_numpy())
    period = 86400.0 / np.where(rate > 0, rate, 1.0)
    last_fetch = np.where(signal, ctx.window_start - period, last_fetch)
    last_success = np.where(signal, np.nan, last_success)
    trust_etag, trust_lm = _flag(pages, "trust_etag", True), _flag(pages, "trust_lm", True)
    etag = http_fields.clean_etags(pages["etag"])
    lm = http_fields.clean_dates(pages["last_modified"])
    page_cols = {
        "url": work["url"].to_numpy(), "rate": rate, "lambda_hat": work["lambda_hat"].to_numpy(),
        "importance": work["importance"].to_numpy(), "signal": signal,
        "if_none_match": np.where(trust_etag, etag, None),
        "if_modified_since": np.where(trust_lm, lm, None),
        "method_hint": pages["method_hint"].to_numpy(dtype=object),
    }
    lane = work["lane"].to_numpy().astype(object)
    keep = (rate > 0) & ((lane != "discovery") | discovery_selected(work, ctx))
    cols = pd.DataFrame({**page_cols, "lane": lane, "last_fetch_s": last_fetch,
                         "last_success_s": last_success})[keep]
    visits = plan.due_visits(cols, ctx.window_start, ctx.window_end, ctx.max_visits_per_url)
    audit = work["audit"].to_numpy()
    if audit.any():  # policy-independent full fetch, at its hash-spread time of day
        a = pd.DataFrame({**page_cols, "lane": "audit", "last_fetch_s": last_fetch,
                          "last_success_s": last_success})[audit]
        a["method_hint"] = "full"
        due = ctx.window_start + work["audit_offset_s"].to_numpy()[audit]
        a["due_s"] = due
        elapsed = (due - np.nan_to_num(a["last_success_s"].to_numpy(), nan=-np.inf)) / 86400.0
        a["p_changed"] = np.where(np.isinf(elapsed), 1.0,
                                  -np.expm1(-a["lambda_hat"].to_numpy() * np.maximum(elapsed, 0)))
        # A policy-independent priority: a uniform hash of (URL, day) in (0, 1]. The budget
        # cut and the host cap rank an over-full audit lane by it, so the audits kept are a
        # random subset of the due sample; importance x P(changed) would keep the pages most
        # likely stale and bias the audit's freshness estimate down.
        a["priority"] = 1.0 - lanes.audit_day_unit(a["url"].to_numpy(dtype=object),
                                                   ctx.day_index)
        visits = pd.concat([visits, a], ignore_index=True)
    kept, carried = plan.apply_host_cap(visits, cap)

    has_validator = ~(pd.isna(kept["if_none_match"]) & pd.isna(kept["if_modified_since"]))
    conditional = has_validator.to_numpy() & (kept["method_hint"].to_numpy() == "conditional")
    out = pd.DataFrame({
        "host": host, "url": kept["url"].to_numpy(), "lane": kept["lane"].to_numpy(),
        "due_s": kept["due_s"].to_numpy(), "priority": kept["priority"].to_numpy(),
        "p_changed": kept["p_changed"].to_numpy(),
        "method": np.where(conditional, "conditional", "full"),
        "if_none_match": np.where(conditional, kept["if_none_match"].to_numpy(), None),
        "if_modified_since": np.where(conditional, kept["if_modified_since"].to_numpy(), None),
        "crawl_delay_s": delay, "rate": kept["rate"].to_numpy(),
        "audit_wanted": bool(_flag(pages, "audit_wanted", False)[0]),
        "signal": kept["signal"].to_numpy(bool),
    })
    summary = {"host": host, "url": None, "lane": None, "crawl_delay_s": delay,
               "due_count": len(visits), "carried": len(carried),
               "known_urls": int(work["known"].sum()), "signals": int(signal.sum()), "cap": cap,
               "discovery_deferred": int(((lane == "discovery") & ~keep).sum())}
    for name, mask in (("", work["known"].to_numpy() & ~work["gone"].to_numpy()),
                       ("_fast", lane == "fast"),
                       ("_refresh", (lane == "refresh") & ~work["gone"].to_numpy())):
        w = work["importance"].to_numpy()[mask]
        fresh = freshness(work["lambda_hat"].to_numpy()[mask], rate[mask])
        key_w, key_wf = ("weight_sum", "weighted_freshness") if not name else (
            f"w{name}", f"wf{name}")
        summary[key_w], summary[key_wf] = float(w.sum()), float((w * fresh).sum())
    out = pd.concat([out, pd.DataFrame([summary])], ignore_index=True)
    return out.reindex(columns=PLAN_COLUMNS)
