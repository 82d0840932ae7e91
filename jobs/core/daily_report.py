"""The daily report's figures from small frames (pure pandas/numpy, no I/O).

``jobs/report.py`` reads the production tables (metrics of the last N days, allocate's run
record, ``plan/dt=D`` in row batches, ``quarantine/dt=D``) and hands them here; the page is
drawn by ``jobs/report_html.py``. Per-page tables are reduced batch by batch to per-host sums
(:func:`host_sums`, :func:`merge_host_sums`) and λ̂ histogram counts
(:func:`lambda_counts`), so the report never holds a day's plan in memory.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from jobs.core import budget_curve as bc

# λ̂ histogram edges, changes/day: one bin per half decade from 1e-3 to 100, plus the rest.
LAMBDA_EDGES = np.array([0.0, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0,
                         np.inf])
HOST_SUM_COLUMNS = ("host", "urls", "importance", "stale_weight", "visits", "cap_binds",
                    "host_cap")
FRESHNESS_COLUMNS = ("dt", "audit", "audit_lo", "audit_hi", "audit_n", "expected", "forecast",
                     "missing")


def input_warnings(records: list[dict]) -> list[str]:
    """The run records' ``warnings`` (a stale or skipped snapshot, jobs.snapshots), each once,
    in the order the stages wrote them."""
    return list(dict.fromkeys(w for r in records for w in (r.get("warnings") or [])))


def freshness_series(days: list[str], metrics: dict) -> pd.DataFrame:
    """Audit and expected freshness per day, with the forecast each audit is checked against.

    Parameters
    ----------
    days : list of str
        The report's dates, oldest first.
    metrics : dict
        date -> the day's ``metrics`` row as a dict, or a string saying why it is missing.

    Returns
    -------
    DataFrame
        One row per day (:data:`FRESHNESS_COLUMNS`). ``forecast`` is the previous run's
        ``expected_freshness``: the run for D-1 planned the window whose fetches, logged
        on D, the audit of ``metrics/dt=D`` scores. ``missing`` says why a day has no row.
    """
    rows = []
    for i, d in enumerate(days):
        m = metrics.get(d)
        prev = metrics.get(days[i - 1]) if i else None
        row = {"dt": d, "missing": m if isinstance(m, str) else None}
        m = m if isinstance(m, dict) else {}
        row.update(audit=m.get("audit_freshness"), audit_lo=m.get("audit_freshness_lo"),
                   audit_hi=m.get("audit_freshness_hi"), audit_n=m.get("audit_n"),
                   expected=m.get("expected_freshness"),
                   forecast=prev.get("expected_freshness") if isinstance(prev, dict) else None)
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(FRESHNESS_COLUMNS))
    for c in ("audit", "audit_lo", "audit_hi", "expected", "forecast"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out


def forecast_match(series: pd.DataFrame) -> dict:
    """How well the planner's expected freshness forecast the audit, over the days that have
    both: ``days``, ``mean_abs_error``, ``bias`` (audit - forecast, mean) and ``covered`` (days
    whose audit interval contains the forecast). Zero days gives None figures, not zeros."""
    both = series.dropna(subset=["audit", "forecast"])
    if both.empty:
        return {"days": 0, "mean_abs_error": None, "bias": None, "covered": None}
    err = both["audit"] - both["forecast"]
    inside = (both["audit_lo"] <= both["forecast"]) & (both["forecast"] <= both["audit_hi"])
    return {"days": int(len(both)), "mean_abs_error": float(err.abs().mean()),
            "bias": float(err.mean()), "covered": int(inside.sum())}


LANE_BUDGET_COLUMNS = ("lane", "budget", "candidates", "planned", "to_backfill", "unused")


def lane_budget(cut: dict) -> pd.DataFrame:
    """Budget, candidates, planned visits, what each lane left to the backfill and the unused
    budget per lane, from allocate's budget cut (``{lane: {budget, candidates, selected}}``),
    with a ``total`` row.

    Lane ``backfill`` has no budget of its own: it gets what the other lanes leave
    (``budget - planned`` each, column ``to_backfill``) and plans the next day's visits
    pulled forward with it; only what backfill cannot use is ``unused``. So the total's
    ``unused`` is backfill's, and ``to_backfill`` summed over the lanes is backfill's budget.
    A cut without a backfill lane leaves the lanes' leftovers unused.
    """
    rows = [{"lane": lane, "budget": int(c.get("budget") or 0),
             "candidates": int(c.get("candidates") or 0), "planned": int(c.get("selected") or 0)}
            for lane, c in sorted(cut.items())]
    out = pd.DataFrame(rows, columns=["lane", "budget", "candidates", "planned"])
    left = (out["budget"] - out["planned"]).clip(lower=0)
    is_backfill = out["lane"] == "backfill"
    has_backfill = bool(is_backfill.any())
    out["to_backfill"] = np.where(~is_backfill & has_backfill, left, 0)
    out["unused"] = np.where(is_backfill | (not has_backfill), left, 0)
    total = out[["budget", "candidates", "planned", "to_backfill", "unused"]].sum()
    # backfill's budget is what the other lanes left unused: not more budget in the total
    total["budget"] -= int(out.loc[is_backfill, "budget"].sum())
    out = pd.concat([out, pd.DataFrame([{"lane": "total", **total.to_dict()}])],
                    ignore_index=True)
    return out.astype({c: "int64" for c in LANE_BUDGET_COLUMNS[1:]})


def fast_lane_note(allocate: dict, fast_share: float | None) -> dict:
    """Why the fast lane planned what it did, from allocate's run record: its share's target
    ``floor(fast_share × budget)``, the budget the cut gave it, what it planned, and whether
    its rate is a floor of the policy's joint solve (``fast_floor``: fast pages are priced
    with refresh, so the lane may spend refresh budget; what it leaves flows to refresh)."""
    cut = allocate.get("budget_cut") or {}
    fast = cut.get("fast") or {}
    total = sum(int((c or {}).get("budget") or 0) for lane, c in cut.items() if lane != "backfill")
    target = (int(np.floor(fast_share * total)) if fast_share is not None and total else None)
    return {"fast_share": fast_share, "target": target,
            "cut_budget": fast.get("budget"), "planned": fast.get("selected"),
            "candidates": fast.get("candidates"), "fast_floor": bool(allocate.get("fast_floor")),
            "fast_rate": allocate.get("fast_rate"), "policy": allocate.get("policy")}


def due_planned_carried(days: list[str], metrics: dict) -> pd.DataFrame:
    """Per day: visits due, planned (schedule rows) and carried over (due that did not fit);
    NaN on a day without metrics."""
    rows = []
    for d in days:
        m = metrics.get(d) if isinstance(metrics.get(d), dict) else {}
        rows.append({"dt": d, "due": m.get("due_total"), "planned": m.get("planned_total"),
                     "carried_over": m.get("carried_over")})
    out = pd.DataFrame(rows, columns=["dt", "due", "planned", "carried_over"])
    return out.astype({c: float for c in ("due", "planned", "carried_over")})


HOST_HEALTH_COLUMNS = ("dt", "hosts_limited", "hosts_blocked", "host_fetches", "error_rate",
                       "host_throttled", "capacity_withheld")


def host_health_series(days: list[str], metrics: dict) -> pd.DataFrame:
    """Per day: hosts under a served-rate limit and blocked by a Retry-After for the next plan,
    the day's fetches, their error rate (status 0/5xx/429) and 429/503s, and the visits/day
    the limits withheld from the hosts' caps (free for the others). NaN on a day without
    metrics or from before these columns existed."""
    rows = []
    for d in days:
        m = metrics.get(d) if isinstance(metrics.get(d), dict) else {}
        fetches, errors = m.get("host_fetches"), m.get("host_errors")
        rate = errors / fetches if fetches and errors is not None else None
        rows.append({"dt": d, "hosts_limited": m.get("hosts_limited"),
                     "hosts_blocked": m.get("hosts_blocked"), "host_fetches": fetches,
                     "error_rate": rate, "host_throttled": m.get("host_throttled"),
                     "capacity_withheld": m.get("capacity_withheld")})
    out = pd.DataFrame(rows, columns=list(HOST_HEALTH_COLUMNS))
    return out.astype({c: float for c in HOST_HEALTH_COLUMNS[1:]})


def host_sums(plan: pd.DataFrame) -> pd.DataFrame:
    """One batch of ``plan`` rows reduced per host (:data:`HOST_SUM_COLUMNS`): pages,
    importance, stale weight Σ importance·p_stale_now, candidate visits, whether the cap binds
    and the cap. Frontier pages (lane ``discovery``) count as pages but hold no copy that
    could be stale, so they add no importance or stale weight."""
    known = (plan["lane"] != "discovery").to_numpy()
    imp = np.where(known, plan["importance"].to_numpy(float), 0.0)
    frame = pd.DataFrame({"host": plan["host"].to_numpy(object), "urls": 1,
                          "importance": imp,
                          "stale_weight": imp * plan["p_stale_now"].to_numpy(float),
                          "visits": plan["visits"].to_numpy(np.int64),
                          "cap_binds": plan["cap_binds"].to_numpy(bool),
                          "host_cap": plan["host_cap"].to_numpy(np.int64)})
    return merge_host_sums([frame])


def merge_host_sums(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Combine per-batch :func:`host_sums` (a host may span batches and files)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=list(HOST_SUM_COLUMNS))
    return (pd.concat(parts, ignore_index=True).groupby("host", sort=True)
            .agg(urls=("urls", "sum"), importance=("importance", "sum"),
                 stale_weight=("stale_weight", "sum"), visits=("visits", "sum"),
                 cap_binds=("cap_binds", "max"), host_cap=("host_cap", "max"))
            .reset_index())


def hosts_at_cap(sums: pd.DataFrame) -> pd.DataFrame:
    """Hosts whose daily cap binds, most planned visits first."""
    at = sums[sums["cap_binds"].astype(bool)]
    return (at[["host", "host_cap", "visits", "urls"]]
            .sort_values(["visits", "host"], ascending=[False, True]).reset_index(drop=True))


def top_stale_hosts(sums: pd.DataFrame, n: int) -> pd.DataFrame:
    """The ``n`` hosts with the most stale importance now (Σ importance·p_stale_now), with
    the share of their importance that is stale."""
    s = sums[sums["importance"] > 0]
    out = s.assign(stale_share=s["stale_weight"] / s["importance"])
    out = out.sort_values(["stale_weight", "host"], ascending=[False, True]).head(n)
    return out[["host", "stale_weight", "stale_share", "importance", "urls"]].reset_index(
        drop=True)


def lambda_counts(lambda_hat, lane) -> np.ndarray:
    """Counts of known pages' λ̂ (changes/day) per :data:`LAMBDA_EDGES` bin (summable over
    batches). Frontier pages (lane ``discovery``, λ̂ 0 by definition) are left out."""
    lam = np.asarray(lambda_hat, dtype=float)[np.asarray(lane, dtype=object) != "discovery"]
    lam = lam[np.isfinite(lam)]
    counts, _ = np.histogram(np.clip(lam, 0.0, None), bins=LAMBDA_EDGES)
    return counts.astype(np.int64)


def lambda_bin_labels() -> list[str]:
    """Human labels of the :data:`LAMBDA_EDGES` bins (changes/day)."""
    e = LAMBDA_EDGES
    return [f"<{e[1]:g}"] + [f"{lo:g}-{hi:g}" for lo, hi in zip(e[1:-2], e[2:-1])] + [f"≥{e[-2]:g}"]


def quarantine_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Quarantined rows per (source, reason), most first; ``frame`` has one row per
    quarantined row or is already counted (a ``rows`` column)."""
    if frame.empty:
        return pd.DataFrame({"source": pd.Series(dtype=object), "reason": pd.Series(dtype=object),
                             "rows": pd.Series(dtype="int64")})
    f = frame if "rows" in frame else frame.assign(rows=1)
    out = f.groupby(["source", "reason"], sort=True, dropna=False)["rows"].sum().reset_index()
    return out.sort_values(["rows", "source", "reason"], ascending=[False, True, True]
                           ).reset_index(drop=True).astype({"rows": "int64"})


BUDGET_CURVE_COLUMNS = ("factor", "budget", "freshness", "age_days", "today")


def budget_curve_frame(m: dict) -> pd.DataFrame:
    """The day's what-if curve (:mod:`jobs.core.budget_curve`) with today's point: per budget
    multiple, the budget and the expected freshness and age there (NaN: an empty point,
    or a row from before the curve existed)."""
    m = m if isinstance(m, dict) else {}
    budget = m.get("budget")
    rows = [{"factor": c, "freshness": m.get(f), "age_days": m.get(a), "today": False}
            for c, f, a in zip(bc.FACTORS, bc.FRESHNESS_COLUMNS, bc.AGE_COLUMNS)]
    rows.append({"factor": 1.0, "freshness": m.get("expected_freshness"),
                 "age_days": m.get("expected_age_days"), "today": True})
    out = pd.DataFrame(rows).sort_values("factor", kind="stable").reset_index(drop=True)
    out["budget"] = out["factor"] * (float(budget) if budget is not None else np.nan)
    out = out[list(BUDGET_CURVE_COLUMNS)]
    return out.astype({"freshness": float, "age_days": float, "budget": float})


def budget_reading(curve: pd.DataFrame, factor: float = 1.25) -> str | None:
    """The report's one line: what ``factor`` × the budget would do to expected freshness."""
    today = curve[curve["today"]]
    points = curve[~curve["today"]]
    if today.empty or points.empty:
        return None
    f = [None if pd.isna(v) else float(v) for v in points["freshness"]]
    t = today.iloc[0]
    return bc.reading(list(points["budget"]), f, t["budget"],
                      None if pd.isna(t["freshness"]) else float(t["freshness"]), factor)


BUDGET_SERIES_COLUMNS = ("dt", "multiplier", "expected_freshness", "expected_age_days",
                         "days_per_pass", "budget_per_url", "share_304", "bytes_saved_304",
                         "share_unchanged")


def budget_series(days: list[str], metrics: dict) -> pd.DataFrame:
    """Per day the budget figures: the day's multiplier (the value of one more visit/day:
    ``refresh_marginal_value``, else the policy's level), expected freshness and age, days
    per full pass and visits per known URL at the day's budget, and from the day's logs the
    share of fetches answered 304, the bytes the 304s saved and the share of the budget
    spent on pages found unchanged. NaN on a day without metrics or before a column."""
    rows = []
    for d in days:
        m = metrics.get(d) if isinstance(metrics.get(d), dict) else {}
        mu = m.get("refresh_marginal_value")
        folded = m.get("fetches_folded")
        rows.append({
            "dt": d, "multiplier": mu if mu is not None else m.get("policy_level"),
            "expected_freshness": m.get("expected_freshness"),
            "expected_age_days": m.get("expected_age_days"),
            "days_per_pass": m.get("days_per_pass"), "budget_per_url": m.get("budget_per_url"),
            "share_304": (m.get("fetches_304") / folded
                          if folded and m.get("fetches_304") is not None else None),
            "bytes_saved_304": m.get("bytes_saved_304"),
            "share_unchanged": (m.get("fetches_unchanged") / folded
                                if folded and m.get("fetches_unchanged") is not None else None),
        })
    out = pd.DataFrame(rows, columns=list(BUDGET_SERIES_COLUMNS))
    return out.astype({c: float for c in BUDGET_SERIES_COLUMNS[1:]})
