"""Rhythm checks (issue 14 §1): a change between two phase windows refutes a day rhythm, and a
day-timed page that never went unchanged gets one visit that can tell (jobs/core/timing.py,
"Rhythm checks")."""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config
from jobs.core import state_update, timing
from jobs.core.allocation_kkt import stale_visit_value
from jobs.core.freshness import p_changed
from jobs.core.host_plan import plan_bucket
from jobs.core.timing import DAY_S
from jobs.params import plan_context, timing_params, update_params

TP = timing_params(Config())
H = 3600.0
MON = pd.Timestamp("2026-11-02T00:00Z").timestamp()  # a Monday, midnight UTC


def sums_at(hour, n=8, off=0.0):
    """n dated changes at ``hour`` o'clock on consecutive days, and ``off`` off-phase ones."""
    s = timing.empty(1)
    timing.add_changes(s, np.zeros(n, np.int64), MON + np.arange(n) * DAY_S + hour * H, 1.0)
    s["tod_off_n"][0] = off
    return s


@pytest.mark.parametrize("start_h, length_h, start_changed, off", [
    (20.0, 12.0, False, True),    # after the window [17, 19] until 08:00: nothing can change
    (20.0, 22.5, False, False),   # ends at 18:30, inside the next window
    (18.33, 11.0, True, True),    # after the phase at a fetch that saw the day's change
    (18.33, 11.0, False, False),  # ... that did not: the day's change may still come
    (17.5, 10.0, True, False),    # starts before the phase
    (20.0, 24.0, False, False),   # a whole day covers a phase
    (20.0, 0.0, False, False),    # no interval
])
def test_an_interval_is_off_phase_only_between_two_windows(start_h, length_h, start_changed, off):
    start = MON + start_h * H
    got = timing.off_phase([start], [start + length_h * H], [start_changed], [18 * H], [H])
    assert got.tolist() == [off]


def test_off_phase_wraps_around_midnight_and_needs_a_window():
    phase, half = 0.5 * H, H  # window 23:30-01:30
    start = MON + 2 * H
    assert timing.off_phase([start], [start + 18 * H], [False], [phase], [half]).tolist() == [True]
    assert timing.off_phase([start], [start + 21.75 * H], [False], [phase], [half]).tolist() \
        == [False]  # ends at 23:45
    assert timing.off_phase([start], [start + 2 * H], [False], [np.nan], [np.nan]).tolist() \
        == [False]  # no rhythm, nothing refuted
    assert timing.off_phase([start], [start + 2 * H], [False], [phase], [12 * H]).tolist() \
        == [False]  # a window of the whole day


def test_the_check_is_halfway_from_a_visit_after_the_phase_to_the_next_window():
    phase, half = 18 * H, H
    after = MON + 18 * H + 20 * 60  # 18:20, the timed visit
    at = timing.rhythm_check_at([after], [phase], [half])
    assert at[0] == pytest.approx(after + (22 * H + 40 * 60) / 2)  # halfway to 17:00 tomorrow
    assert timing.off_phase([after], at, [True], [phase], [half]).tolist() == [True]
    before = timing.rhythm_check_at([MON + 17.5 * H, MON + 16.5 * H, MON + 18 * H],
                                    [phase] * 3, [half, half, np.nan])
    assert np.isnan(before).all()  # before the phase; 30 min to the window; no window


def test_day_window_is_the_own_phase_with_two_sds_and_a_floor():
    phase, half = timing.day_window(sums_at(9.0), TP, 1.0)
    assert phase[0] == pytest.approx(9 * H, abs=1) and half[0] == pytest.approx(
        2 * TP.host_min_spread_s)  # identical instants: sd 0, floored
    rng = np.random.default_rng(3)
    s = timing.empty(1)
    timing.add_changes(s, np.zeros(30, np.int64), MON + np.arange(30) * DAY_S + 9 * H
                       + rng.normal(0, 2400, 30), 1.0)
    wide = timing.day_window(s, TP, 1.0)[1][0]
    r = np.hypot(s["tod_cos"][0], s["tod_sin"][0]) / s["tod_n"][0]
    assert wide == pytest.approx(2 * np.sqrt(-2 * np.log(r)) / (2 * np.pi) * DAY_S)
    assert wide > 2 * TP.host_min_spread_s
    for sums, lam, params in ((sums_at(9.0, n=1), 1.0, TP), (sums_at(9.0), 9.0, TP),
                              (sums_at(9.0), 1.0, replace(TP, enabled=False))):
        assert np.isnan(timing.day_window(sums, params, lam)[0][0])


def test_one_off_phase_change_untimes_the_day_until_a_half_life_has_passed():
    assert timing.rhythm(sums_at(9.0), TP, 1.0).period_s[0] == DAY_S
    assert not timing.rhythm(sums_at(9.0, off=1.0), TP, 1.0).timed[0]
    assert timing.rhythm(sums_at(9.0, off=0.49), TP, 1.0).period_s[0] == DAY_S
    # a refuted page neither anchors its host's phase nor is timed through it
    host = {c: np.concatenate([sums_at(9.0, off=1.0)[c], sums_at(9.0, n=2)[c]])
            for c in timing.TIMING_COLUMNS}
    r = timing.shrunk_rhythm(host, TP, np.array([1.0, 1.0]), np.zeros(2, np.int64), 1)
    assert not r.timed.any()
    host["tod_off_n"][0] = 0.0
    assert timing.shrunk_rhythm(host, TP, np.array([1.0, 1.0]), np.zeros(2, np.int64),
                                1).timed.all()
    # the week is not refuted by the day's check
    weekly = timing.empty(1)
    timing.add_changes(weekly, np.zeros(6, np.int64), MON + np.arange(6) * 7 * DAY_S + 9 * H, 1.0)
    weekly["tod_off_n"][0] = 2.0
    assert timing.rhythm(weekly, TP, 0.14).period_s[0] == 7 * DAY_S


def _logs(rows):
    return pd.DataFrame({
        "url": "u", "host": "h.example", "fetched_at": [pd.Timestamp(t, unit="s", tz="UTC")
                                                       for t, _ in rows],
        "status": 200, "etag": None, "last_modified": None,
        "content_hash": [h for _, h in rows], "trust_etag": False, "trust_lm": False})


@pytest.mark.parametrize("check_hash, refuted", [("h2", True), ("h1", False)])
def test_a_claim_locked_page_is_refuted_by_its_check_and_a_publisher_is_not(check_hash, refuted):
    """Trusted claims at 23:40 every day time the page at 23:40, whether it publishes once a
    day then or changes 50 times a day and the host's snapshot is at midnight. Visited at
    00:50 after each claim, it is changed every time either way. The check at 12:20 tells:
    changed (h2), the rhythm is refuted; unchanged (h1), it stands and the page has gone
    unchanged once."""
    params = update_params(Config())
    state = state_update.empty_state()
    for d in range(8):
        day = MON + d * DAY_S
        sig = pd.DataFrame({"url": ["u"], "signaled_at": [pd.Timestamp(day - 20 * 60, unit="s",
                                                                       tz="UTC")],
                            "signal_trusted": [True]})
        logs = _logs([(day + 50 * 60, f"h{d}")])
        date = pd.Timestamp(day, unit="s").strftime("%Y-%m-%d")
        state = state_update.fold_day(state, logs, date, params, signals=sig,
                                      estimate=False)[state_update.STATE_COLUMNS]
    sums = {c: np.array([float(state.iloc[0][c])]) for c in timing.TIMING_COLUMNS}
    assert timing.rhythm(sums, TP, 2.0).period_s[0] == DAY_S
    assert state.iloc[0]["tod_off_n"] == 0.0
    day = MON + 8 * DAY_S
    logs = _logs([(day + 50 * 60, "h1"), (day + 12 * H + 20 * 60, check_hash)])
    state = state_update.fold_day(state, logs, pd.Timestamp(day, unit="s").strftime("%Y-%m-%d"),
                                  params, estimate=False)[state_update.STATE_COLUMNS]
    row = state.iloc[0]
    sums = {c: np.array([float(row[c])]) for c in timing.TIMING_COLUMNS}
    assert row["tod_off_n"] == (1.0 if refuted else 0.0)
    assert timing.rhythm(sums, TP, 2.0).timed[0] == (not refuted)
    assert row["n_observations"] - row["n_changes"] == (0 if refuted else 1)


W0 = 1_800_000_000.0  # 08:00 UTC
W1 = W0 + DAY_S


def _timed_host(n_changes=5, off=0.0, rate_interval_s=DAY_S):
    """One page timed at 09:00 (eight dated changes), fetched yesterday at 09:20, and a
    host with room to spare."""
    sums = sums_at(9.0, off=off)
    last = pd.to_datetime([W0 - DAY_S + 1 * H + 20 * 60], unit="s", utc=True)
    return pd.DataFrame({
        "host": "h", "url": ["https://h/p"], "lane": "refresh", "interval_s": rate_interval_s,
        "gone": False, "lambda_hat": 2.0, "importance": 3.0, "last_fetch_at": last,
        "last_success_at": last, "etag": '"e"', "last_modified": None, "crawl_delay_s": 30.0,
        "max_fetches_per_day": [None], "method_hint": "conditional",
        "n_observations": 5.0, "n_changes": float(n_changes),
        **{c: sums[c] for c in timing.TIMING_COLUMNS}})


def _ctx(**changes):
    quiet = {"policy": None, "fast_floor": False, "fast_min_lambda": np.inf,
             "fast_patterns": "", "audit_rate": 0.0}
    return replace(plan_context(Config(), W0, W1), **{**quiet, **changes})


@pytest.mark.parametrize("signaled", [False, True])
def test_a_timed_page_that_never_went_unchanged_gets_one_check_in_spare_budget(signaled):
    pages = _timed_host()
    if signaled:  # a claim since the last visit: due at its phase, checked after it all the same
        pages["pending_signal_at"] = pd.to_datetime([W0 - 60], unit="s", utc=True)
    out = plan_bucket(pages, _ctx())
    v = out[out.url.notna() & out.reason.isna()].sort_values("due_s")
    # the timed visit just after 09:00, then the check halfway to the next window (08:00)
    timed_at = W0 + 1 * H + TP.visit_lag_s
    assert v.lane.tolist() == ["refresh", "backfill"]
    assert v.due_s.iloc[0] == pytest.approx(timed_at)
    check = timed_at + (W1 - timed_at) / 2
    assert v.due_s.iloc[1] == pytest.approx(check)
    half_days = (check - timed_at) / DAY_S
    assert v.p_changed.iloc[1] == pytest.approx(p_changed(2.0, half_days))
    assert v.priority.iloc[1] == pytest.approx(
        p_changed(2.0, half_days) * stale_visit_value(2.0, 3.0, half_days))
    assert out[out.reason.notna()].visits.tolist() == [2]
    # the day's cut keeps it first of the budget left unused (jobs.budget_cut: probe bin)
    assert v.probe.tolist() == [False, True]


@pytest.mark.parametrize("pages, ctx", [
    (_timed_host(n_changes=4), _ctx()),                        # went unchanged once
    (_timed_host(off=1.0), _ctx()),                            # refuted: not timed
    (_timed_host(), _ctx(backfill_s=0.0)),                     # no spare budget to use
    (_timed_host(rate_interval_s=200 * DAY_S), _ctx()),        # at the floor rate
    (_timed_host(), _ctx(timing=replace(TP, enabled=False))),  # timing off
])
def test_no_check_without_a_doubt_a_visit_worth_checking_or_spare_budget(pages, ctx):
    out = plan_bucket(pages, ctx)
    v = out[out.url.notna() & out.reason.isna()]
    # (an untimed page's next visit may still be pulled to the window's last second)
    assert not ((v.lane == "backfill") & (v.due_s < W1 - 1.0)).any()
