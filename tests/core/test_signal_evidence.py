"""Signals that defer: a trusted lastmod not newer than the stored copy is evidence of no
change (jobs.core.signal_evidence, its fold in jobs.core.state_update and its use in
jobs.core.host_plan)."""
import numpy as np
import pandas as pd
import pytest

from jobs.config import Config, load_config
from jobs.core import host_plan, signal_evidence, state_update
from jobs.core.state_update import empty_state
from jobs.params import plan_context, update_params

DAY = 86400.0
D2 = pd.Timestamp("2026-11-02", tz="UTC").timestamp()


def test_no_change_evidence_on_known_pages():
    # Rows: 0 copy confirmed on D1 12:00, signal lastmod D1 06:00 (older): evidence.
    #       1 the same but the host's signals untrusted: none.
    #       2 lastmod D1 18:00, newer than the copy: a change claim, not evidence.
    #       3 two signals, the older not newer, the latest newer: the latest wins, none.
    #       4 copy confirmed today (D2 01:00), after the day's start: nothing to add.
    #       5 no copy at all: none.
    d1 = D2 - DAY
    known = np.array([d1 + 12 * 3600, d1 + 12 * 3600, d1 + 12 * 3600, d1 + 12 * 3600,
                      D2 + 3600, np.nan])
    rows = np.array([0, 1, 2, 3, 3, 4, 5])
    at = np.array([d1 + 6 * 3600, d1 + 6 * 3600, d1 + 18 * 3600, d1 + 6 * 3600,
                   d1 + 20 * 3600, d1, d1])
    trusted = np.array([True, False, True, True, True, True, True])
    r, ev = signal_evidence.no_change_evidence(rows, at, trusted, known, D2)
    assert r.tolist() == [0] and ev.tolist() == [D2]


def test_deferred_anchor_is_capped_at_max_defer():
    anchor = np.array([0.0, 0.0, 0.0, np.nan, 5 * DAY])
    ev = np.array([0.5 * DAY, 3 * DAY, np.nan, DAY, 4 * DAY])
    moved, deferred = signal_evidence.deferred_anchor(anchor, ev, DAY)
    assert moved.tolist()[:3] == [0.5 * DAY, DAY, 0.0]
    assert np.isnan(moved[3]) and moved[4] == 5 * DAY     # never fetched; evidence older
    assert deferred.tolist() == [True, True, False, False, False]
    off, none = signal_evidence.deferred_anchor(anchor, ev, 0.0)
    assert not none.any() and np.array_equal(off, anchor, equal_nan=True)


def _logs(rows):
    df = pd.DataFrame(rows, columns=["url", "fetched_at", "status", "etag", "last_modified",
                                     "content_hash"])
    df["host"], df["trust_etag"], df["trust_lm"] = "h.example", True, True
    df["fetched_at"] = pd.to_datetime(df["fetched_at"], utc=True)
    return df


def test_fold_keeps_trusted_no_change_evidence_until_a_fetch_confirms_the_copy():
    params = update_params(Config())
    s1 = state_update.fold_day(empty_state(), _logs([
        ("u", "2026-11-01T12:00Z", 200, '"a"', None, "h1"),
        ("w", "2026-11-01T12:00Z", 200, '"a"', None, "h1")]), "2026-11-01", params)
    sig = pd.DataFrame({"url": ["u", "w", "new"], "signal_trusted": [True, False, True],
                        "signaled_at": pd.to_datetime(["2026-11-01T06:00Z"] * 3, utc=True)})
    s2 = state_update.fold_day(s1, _logs([]), "2026-11-02", params,
                               signals=sig).set_index("url")
    assert s2.loc["u", "signal_unchanged_at"] == pd.Timestamp("2026-11-02", tz="UTC")
    assert pd.isna(s2.loc["w", "signal_unchanged_at"])       # untrusted: no evidence
    assert pd.isna(s2.loc["u", "pending_signal_at"])         # and no change claim
    assert "new" not in s2.index                             # allocate discovers it
    # Statistics untouched: the evidence plans visits, it is no observation for λ.
    assert s2.loc["u", "n_observations"] == 0
    s3 = state_update.fold_day(s2.reset_index(), _logs([
        ("u", "2026-11-03T08:00Z", 200, '"a"', None, "h1")]), "2026-11-03", params)
    assert pd.isna(s3.set_index("url").loc["u", "signal_unchanged_at"])


def _pages(unchanged):
    n = len(unchanged)
    last = pd.Timestamp("2026-11-01T00:00Z").timestamp()
    return pd.DataFrame({
        "host": "h.example", "url": [f"https://h.example/{i}" for i in range(n)],
        "lane": "refresh", "lambda_hat": 0.1, "importance": 1.0, "interval_s": 2 * DAY,
        "gone": False, "last_fetch_at": last, "last_success_at": last, "last_status": 200,
        "etag": None, "last_modified": None, "method_hint": "conditional",
        "pending_signal_at": np.nan, "signal_unchanged_at": unchanged,
        "crawl_delay_s": 1.0, "max_fetches_per_day": np.nan})


@pytest.mark.parametrize("max_defer_days, due_pages", [(0.0, {0, 1}), (1.0, {1})])
def test_plan_defers_a_visit_by_at_most_max_defer(max_defer_days, due_pages):
    # Planned on 2026-11-02 for the window 2026-11-03: both pages last fetched 2026-11-01
    # 00:00 at 1/2 visits per day (uniform), so due 2026-11-03 00:00. Page 0 has trusted
    # "not changed" evidence of 2026-11-02 00:00: its rhythm runs from there (capped one
    # day after the last fetch), so its visit moves to 2026-11-04, out of the window.
    cfg = load_config(None, ["policy.name=uniform", "budget.daily_fetches=1",
                             "budget.fast_share=0", "budget.discovery_share=0",
                             "budget.audit_share=0", "lanes.backfill_horizon_days=0",
                             f"signals.max_defer_days={max_defer_days}"])
    start = pd.Timestamp("2026-11-03", tz="UTC").timestamp()
    ctx = plan_context(cfg, start, start + DAY)
    from dataclasses import replace
    ctx = replace(ctx, level=None, policy=None)  # the pages' own interval_s (no pricing)
    pages = _pages(np.array([D2, np.nan]))
    pages["interval_s"] = 2 * DAY
    out = host_plan.plan_bucket(pages, ctx)
    visits = out[out["url"].notna() & out["reason"].isna()]
    assert {int(u.rsplit("/", 1)[1]) for u in visits["url"]} == due_pages
    figures = out[out["url"].isna() & out["reason"].isna()]
    assert int(figures["signal_deferred"].sum()) == (1 if max_defer_days else 0)
