"""Freshness audit in simulation: an estimate with a confidence interval, checked against truth.

The audit sample is ``jobs.core.audit_sample.in_audit_sample(url, rate)``: a stable hash of
the URL, so membership never depends on the policy. Each sampled URL is checked once a
day at a time drawn from a hash of (URL, day), again independent of the policy: a full
fetch whose content hash is compared with the hash of the copy the crawler holds at that
moment (the planner's stored hash from ``state/dt=D-1``, replaced by any 2xx the fleet got
earlier that day). Equal hashes mean the copy was fresh.

The check is a *shadow* fetch: it is answered by the simulated server but neither counts
against the host nor updates the crawler's copy. That matters: an audit fetch that
refreshed the copy would make audited pages fresher than the rest, and the sample would
overstate the freshness of the whole index. (A production audit should likewise keep its
result out of the index copy, or be scored on the copy as it stood before the fetch and
never feed the planner's revisit times.)

Estimator: the ratio Σ w·fresh / Σ w over the day's checks (w = 1 plain, importance for the
weighted figure), with a cluster-robust (by URL) normal 95% interval, so a window pooled over
days does not treat repeated checks of one URL as independent.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs import storage
from jobs.core.audit_sample import in_audit_sample
from lab.sim.rand import hex_strings, uniform

Z95 = 1.959963984540054
_AUDIT_SALT = 0xA0D17


def read_state_for_audit(state_uri: str, rate: float) -> pd.DataFrame:
    """The audit sample's rows of a state partition: url, content_hash, importance, gone."""
    files = storage.list_parquet_files(state_uri)
    if not files:
        return pd.DataFrame(columns=["url", "content_hash", "importance", "gone"])
    state = pd.concat([pd.read_parquet(f, columns=["url", "content_hash", "importance", "gone"])
                       for f in files], ignore_index=True)
    return state[in_audit_sample(state["url"].to_numpy(object), rate)].reset_index(drop=True)


def check_times(sim, page: np.ndarray, day: int) -> np.ndarray:
    """Policy-independent check time (days) of each sampled page on ``day``."""
    return day + uniform(sim.web.pages.url_key[page], np.int64(day), _AUDIT_SALT)


def shadow_audit(sim, day: int, sample: pd.DataFrame, fetch_log: pa.Table,
                 times=check_times) -> pd.DataFrame:
    """One audit check per sampled URL alive at its check time on ``day``.

    Parameters
    ----------
    sim : Simulation
        Already stepped through ``day`` (its change window for ``day`` is kept).
    day : int
    sample : DataFrame
        Output of :func:`read_state_for_audit` for the state before ``day``.
    fetch_log : pyarrow.Table
        The fleet's fetch log of ``day``.
    times : callable
        ``times(sim, page, day)`` -> check times; :func:`check_times` unless a test pins them.

    Returns
    -------
    DataFrame
        ``day``, ``url``, ``t`` (days), ``importance``, ``fresh`` (bool).
    """
    cols = ["day", "url", "t", "importance", "fresh"]
    if sample.empty:
        return pd.DataFrame(columns=cols)
    web = sim.web
    page = web.page_ids(sample["url"].to_numpy(object))
    keep = page >= 0
    sample, page = sample[keep].reset_index(drop=True), page[keep]
    t = np.asarray(times(sim, page, day), float)
    alive = web.is_alive(page, t)
    # A 404/410 answer is not a freshness observation (truth stops counting at death).
    sample, page, t = sample[alive].reset_index(drop=True), page[alive], t[alive]
    held = sample["content_hash"].to_numpy(object).copy()

    cols = ["url", "fetched_at", "status", "content_hash"]
    log = fetch_log.select(cols + (["lane"] if "lane" in fetch_log.column_names else [])
                           ).to_pandas()
    # Lane-audit rows are measurement-only: they never replace the crawler's copy.
    not_audit = (log["lane"] != "audit") if "lane" in log else True
    log = log[(log["status"] == 200) & log["content_hash"].notna() & not_audit
              & log["url"].isin(set(sample["url"]))]
    if len(log):
        start_us = sim.params.start_epoch_s * 1_000_000
        at_us = ((pd.to_datetime(log["fetched_at"], utc=True) - pd.Timestamp(0, tz="UTC"))
                 // pd.Timedelta(1, "us")).to_numpy(np.int64)
        log_t = (at_us - start_us) / 86_400_000_000
        pos = pd.Index(sample["url"]).get_indexer(log["url"])
        t_check = t[pos]
        before = log_t < t_check
        # The latest 2xx before the check replaces the copy the state remembered.
        upd = pd.DataFrame({"pos": pos[before], "t": log_t[before],
                            "h": log["content_hash"].to_numpy(object)[before]})
        last = upd.sort_values("t", kind="stable").groupby("pos").tail(1)
        held[last["pos"].to_numpy()] = last["h"].to_numpy(object)
    live = hex_strings(web.content_hash_u64(page, web.version_at(page, t))).to_numpy(
        zero_copy_only=False)
    fresh = np.array([h is not None and h == v for h, v in zip(held, live)], dtype=bool)
    return pd.DataFrame({"day": day, "url": sample["url"].to_numpy(object), "t": t,
                         "importance": sample["importance"].to_numpy(float), "fresh": fresh})


def estimate(checks: pd.DataFrame, weighted: bool) -> dict:
    """Ratio estimate of freshness with a cluster-robust (by URL) 95% interval."""
    if checks.empty:
        return {"est": np.nan, "lo": np.nan, "hi": np.nan, "n": 0}
    w = checks["importance"].to_numpy(float) if weighted else np.ones(len(checks))
    b = checks["fresh"].to_numpy(float)
    sw = w.sum()
    r = float((w * b).sum() / sw) if sw > 0 else np.nan
    e = pd.Series(w * (b - r)).groupby(checks["url"].to_numpy(object)).sum().to_numpy()
    g = len(e)
    var = g / (g - 1) * float((e ** 2).sum()) / sw ** 2 if g > 1 else np.nan
    half = Z95 * np.sqrt(var)
    return {"est": r, "lo": max(0.0, r - half), "hi": min(1.0, r + half), "n": int(len(checks))}


def combine(checks: pd.DataFrame, daily: pd.DataFrame, policy: str) -> pd.DataFrame:
    """Per day: the audit estimates (plain, weighted) beside the true freshness of that day."""
    truth = daily.set_index("day")
    rows = []
    for day, g in checks.groupby("day"):
        plain, wtd = estimate(g, False), estimate(g, True)
        row = _row(policy, int(day), plain, wtd, truth.loc[day, "freshness"],
                   truth.loc[day, "freshness_weighted"])
        # The production audit (metrics/dt=D: update_state's score of the day's lane-audit
        # fetches, Wilson interval), when the planner scored one that day.
        est = truth.loc[day].get("planner_audit_freshness")
        if est is not None and pd.notna(est):
            lo = truth.loc[day, "planner_audit_freshness_lo"]
            hi = truth.loc[day, "planner_audit_freshness_hi"]
            row.update(planner_audit_n=truth.loc[day].get("planner_audit_n"),
                       planner_audit_freshness=est, planner_audit_lo=lo, planner_audit_hi=hi,
                       planner_audit_source=truth.loc[day].get("planner_audit_source"),
                       planner_covered=bool(lo <= row["true_freshness"] <= hi))
        rows.append(row)
    return pd.DataFrame(rows)


def window(checks: pd.DataFrame, truth_plain: float, truth_weighted: float,
           policy: str) -> dict:
    """The audit estimate pooled over a whole window, beside the window's truth."""
    return _row(policy, -1, estimate(checks, False), estimate(checks, True), truth_plain,
                truth_weighted)


def _row(policy, day, plain, wtd, truth_plain, truth_weighted) -> dict:
    return {"policy": policy, "day": day, "audit_n": plain["n"],
            "audit_freshness": plain["est"], "audit_lo": plain["lo"], "audit_hi": plain["hi"],
            "true_freshness": float(truth_plain),
            "covered": bool(plain["lo"] <= truth_plain <= plain["hi"]),
            "audit_freshness_w": wtd["est"], "audit_lo_w": wtd["lo"], "audit_hi_w": wtd["hi"],
            "true_freshness_w": float(truth_weighted),
            "covered_w": bool(wtd["lo"] <= truth_weighted <= wtd["hi"])}
