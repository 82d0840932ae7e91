"""Time-of-day and day-of-week rhythm (issue 14 §1): evidence, detection, value, placement."""
import numpy as np
import pandas as pd
import pytest

from jobs.config import Config, load_config
from jobs.core import plan, policies, state_update, timing
from jobs.core.freshness import freshness
from jobs.core.timing import DAY_S, WEEK_S
from jobs.errors import ConfigError
from jobs.params import timing_params, update_params

TP = timing_params(Config())
MON = pd.Timestamp("2026-11-02T00:00Z").timestamp()  # a Monday, midnight UTC


def sums_of(times, weight=1.0):
    s = timing.empty(1)
    timing.add_changes(s, np.zeros(len(times), np.int64), np.asarray(times, float), weight)
    return s


def test_a_daily_publisher_is_found_at_its_time_of_day():
    rng = np.random.default_rng(1)
    t = MON + np.arange(10) * DAY_S + 7.5 * 3600 + rng.normal(0, 300, 10)
    r = timing.rhythm(sums_of(t), TP, 1.0)
    assert r.period_s[0] == DAY_S
    assert abs(r.phase_s[0] - 7.5 * 3600) < 300
    assert 60 < r.spread_s[0] < 900  # jitter sd 300 s


def test_a_weekly_publisher_gets_the_week_and_uniform_times_get_nothing():
    t = MON + np.arange(6) * WEEK_S + 2 * DAY_S + 9 * 3600  # Wednesdays 09:00
    r = timing.rhythm(sums_of(t), TP, 1.0)
    assert r.period_s[0] == WEEK_S and r.phase_s[0] == pytest.approx(2 * DAY_S + 9 * 3600, abs=1)
    rng = np.random.default_rng(7)
    poisson = [timing.rhythm(sums_of(MON + np.sort(rng.uniform(0, 20 * DAY_S, 12))), TP, 1.0).timed[0]
               for _ in range(200)]
    assert sum(poisson) == 0  # 12 changes uniform in time are never concentrated at R >= 0.9
    spread = t[:2] + np.array([0.0, 2 * 3600.0])  # two Wednesdays two hours apart: not tight
    assert not timing.rhythm(sums_of(spread), TP, 0.14).timed[0]


def test_two_dated_changes_at_one_instant_of_the_week_time_a_weekly_page():
    """Two Wednesdays at 09:00 (week_min_dated_changes = 2, fewer than the tight rule's three)
    time a page on the week when its rate says weekly; not at a daily rate, not on the day
    (two uniform times sit within 30 min on the day 8 % of the time), and not when the rule
    is off. Two uniform instants pass about 1.2 % of the time."""
    t = MON + np.array([0, 1]) * WEEK_S + 2 * DAY_S + 9 * 3600 + np.array([0.0, 900.0])
    r = timing.rhythm(sums_of(t), TP, 0.14)
    assert r.period_s[0] == WEEK_S
    assert r.phase_s[0] == pytest.approx(2 * DAY_S + 9 * 3600 + 450, abs=1)
    assert not timing.rhythm(sums_of(t), TP, 0.5).timed[0]  # 3.5 changes a week > 3
    daily = MON + np.array([0, 1]) * DAY_S + 9 * 3600  # consecutive days: not the week
    assert not timing.rhythm(sums_of(daily), TP, 0.14).timed[0]
    off = timing_params(load_config(None, ["timing.week_min_dated_changes=3"]))
    assert not timing.rhythm(sums_of(t), off, 0.14).timed[0]
    # decayed: two changes a week apart weigh 1.95 and still count as two
    assert timing.rhythm(timing.decayed(sums_of(t), 2 ** (-7 / 90)), TP, 0.14).timed[0]
    rng = np.random.default_rng(9)
    poisson = [timing.rhythm(sums_of(MON + rng.uniform(0, 28 * DAY_S, 2)), TP, 0.2).timed[0]
               for _ in range(5000)]
    assert 0.003 < np.mean(poisson) < 0.025


def test_few_tight_dated_changes_time_a_page_on_their_own():
    """Three or four Wednesdays at 09:00 (below min_dated_changes = 5 but within
    tight_spread_s): the week when the rate says weekly, the day when it says daily; three
    or four uniform instants are rarely that tight (0.7 % and 0.06 % on the day)."""
    t = MON + np.arange(4) * WEEK_S + 2 * DAY_S + 9 * 3600 + np.array([0, 300, -240, 120])
    for k in (3, 4):
        weekly = timing.rhythm(sums_of(t[:k]), TP, 0.14)
        assert weekly.period_s[0] == WEEK_S
        assert weekly.phase_s[0] == pytest.approx(2 * DAY_S + 9 * 3600, abs=300)
        assert timing.rhythm(sums_of(t[:k]), TP, 1.0).period_s[0] == DAY_S  # 7 > 3 a week
    spread = t[:4] + np.array([0, 2, -2, 1]) * 3600.0  # sd ~1.6 h: not tight
    assert not timing.rhythm(sums_of(spread), TP, 0.14).timed[0]
    rng = np.random.default_rng(8)
    poisson = [timing.rhythm(sums_of(MON + rng.uniform(0, 20 * DAY_S, rng.integers(3, 5))),
                             TP, 0.2).timed[0] for _ in range(3000)]
    assert np.mean(poisson) < 0.015


def test_decay_forgets_weight_not_direction():
    t = MON + np.arange(8) * DAY_S + 20 * 3600
    s = sums_of(t)
    half = timing.decayed(s, 0.5)
    assert half["tod_n"][0] == pytest.approx(4.0)
    r0, r1 = timing.rhythm(s, TP, 1.0), timing.rhythm(timing.decayed(s, 0.7), TP, 1.0)
    assert r1.phase_s[0] == pytest.approx(r0.phase_s[0]) and r1.spread_s[0] == pytest.approx(
        r0.spread_s[0])
    faded = timing.decayed(s, 0.2)  # 1.6 dated changes' weight: below every rule (the
    assert not timing.rhythm(faded, TP, 1.0).timed[0]  # tight one needs more than 2)
    # 2.4 counts as three changes (timing.counts): tight ones, all at 20:00
    assert timing.rhythm(timing.decayed(s, 0.3), TP, 1.0).timed[0]
    assert timing.rhythm(half, TP, 1.0).timed[0]  # 4, all at 20:00: the tight rule


def test_a_long_changed_interval_says_nothing_and_a_short_one_its_midpoint():
    mid, w = timing.arc_evidence([0.0, 0.0, 0.0], [3600.0, DAY_S / 2, DAY_S], 6 * 3600.0)
    assert mid[0] == 1800.0 and w[0] == pytest.approx(np.sinc(1 / 24))
    assert w[1] == 0.0 and w[2] == 0.0


@pytest.mark.parametrize("lam", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_value_of_a_timed_page_is_the_exact_periodic_freshness(lam, k):
    # Visited every k days just after its publish time, with p = 1 - exp(-lam) per day,
    # the copy is fresh until the first publish after the visit: (1 - (1-p)^k) / (k p).
    p = -np.expm1(-lam)
    exact = (1 - (1 - p) ** k) / (k * p)
    got = timing.expected_freshness([lam], [1.0 / k], [DAY_S])[0]
    assert got == pytest.approx(exact, rel=1e-12)
    assert timing.value_gain([lam], [DAY_S])[0] * freshness(lam, 1.0 / k) == pytest.approx(exact)
    # More than one visit per period buys nothing; untimed pages keep the Poisson value.
    assert timing.expected_freshness([lam], [3.0], [DAY_S])[0] == 1.0
    assert timing.expected_freshness([lam], [0.5], [np.nan])[0] == freshness(lam, 0.5)


def test_value_matches_a_simulated_daily_publisher():
    rng = np.random.default_rng(3)
    lam, k, days = 1.2, 2, 20000
    p = -np.expm1(-lam)
    publish = rng.random(days) < p                      # day d publishes at 08:00
    visits = np.arange(0, days, k)                      # visits at 08:10 every k days
    fresh_days = 0.0
    for v in visits[:-1]:
        window = publish[v + 1:v + k + 1]               # publishes after this visit
        first = np.argmax(window) if window.any() else k
        fresh_days += min(first + 1, k) if window.any() else k
    simulated = fresh_days / (k * (len(visits) - 1))
    assert simulated == pytest.approx(timing.expected_freshness([lam], [1 / k], [DAY_S])[0],
                                      abs=0.01)


def test_snap_moves_the_first_visit_just_after_the_phase_and_keeps_the_grid():
    w0 = MON + DAY_S
    r = timing.Rhythm(np.array([DAY_S, DAY_S, np.nan, DAY_S]),
                      np.array([7.5 * 3600, 20 * 3600, np.nan, 7.5 * 3600]), np.zeros(4))
    due = np.array([w0 + 14 * 3600, w0 + 2 * 3600, w0 + 5 * 3600, w0 + 1 * 3600])
    period = np.array([DAY_S, DAY_S, DAY_S, DAY_S / 4])
    got = timing.snap_to_phase(due, period, r, 600.0, w0)
    assert got[0] == w0 + 7.5 * 3600 + 600          # nearest 07:40 is earlier the same day
    assert got[1] == w0 + 20 * 3600 + 600           # nearest was yesterday's: next one
    assert got[2] == due[2]                         # not timed
    # four visits a day: the 6-hour grid is shifted through 07:40
    assert np.mod(got[3] - (w0 + 7.5 * 3600 + 600), DAY_S / 4) == pytest.approx(0.0, abs=1e-6)
    assert w0 <= got[3] < w0 + DAY_S / 4


def test_due_visits_of_a_timed_page_land_after_its_change_time():
    w0 = MON + DAY_S
    pages = pd.DataFrame({"url": ["a", "b"], "rate": [1.0, 1.0],
                          "rhythm_from_s": [w0 - 10 * 3600, w0 - 10 * 3600],
                          "last_success_s": [w0 - 10 * 3600] * 2, "lambda_hat": [1.0, 1.0],
                          "importance": [1.0, 1.0], "lane": ["refresh"] * 2,
                          "period_s": [DAY_S, np.nan], "phase_s": [6 * 3600.0, np.nan],
                          "spread_s": [120.0, np.nan]})
    v = plan.due_visits(pages, w0, w0 + DAY_S, lag_s=600.0).set_index("url")
    assert v.loc["a", "due_s"] == w0 + 6 * 3600 + 600 + 240
    assert v.loc["b", "due_s"] == w0 + 14 * 3600  # even spacing from the last fetch


def test_a_timed_page_planned_day_by_day_gets_its_planned_rate():
    """Plan 8 weeks one day at a time, the last visit feeding the next day (as update_state
    does). A weekly page (Wednesday 09:00) at one visit a week, last fetched on a Monday, and a
    daily page (03:00) at one visit every 2 days, last fetched at 22:00: every planned visit
    happens, each just after the phase. Snapping each day's next grid point instead skipped a
    period whenever the nearest phase fell in the next window."""
    cases = {"weekly": (WEEK_S, 2 * DAY_S + 9 * 3600, 1 / 7, MON - 2 * DAY_S + 10 * 3600),
             "daily": (DAY_S, 3 * 3600.0, 0.5, MON - 2 * 3600.0)}
    for name, (period, phase, rate, last) in cases.items():
        visits = []
        for day in range(56):
            w0 = MON + day * DAY_S
            page = pd.DataFrame({"url": [name], "rate": [rate], "rhythm_from_s": [last],
                                 "last_success_s": [last], "lambda_hat": [0.2],
                                 "importance": [1.0], "lane": ["refresh"],
                                 "period_s": [period], "phase_s": [phase], "spread_s": [60.0]})
            due = plan.due_visits(page, w0, w0 + DAY_S, lag_s=600.0)["due_s"].to_numpy()
            visits += list(due)
            if len(due):
                last = due[-1]
        visits = np.array(visits)
        # every planned visit but the boundary's (the daily page's first is on day 2: Wednesday
        # 03:10 is the phase nearest Tuesday 22:00); the old snapping never visited it at all
        assert len(visits) >= round(56 * rate) - 1 and np.all(np.diff(visits) == DAY_S / rate)
        origin = 4 * DAY_S if period == WEEK_S else 0.0
        lag = np.mod(visits - origin - phase, period)
        assert np.all((lag >= 600) & (lag <= 600 + 2 * 60 + 1))


def test_a_push_signal_on_a_timed_page_waits_for_its_phase_inside_the_window():
    """A signal says the page changed at its last phase. Daily (15:00): a visit at the window
    start would be fresh only until 15:00, one at 15:10 until tomorrow's change, so the
    signal's visit waits for 15:10. Weekly with its phase days away: due now."""
    w0 = MON + DAY_S
    pages = pd.DataFrame({"url": ["daily", "weekly", "plain"], "rate": [0.5, 1 / 7, 0.5],
                          "rhythm_from_s": [w0 - 2 * DAY_S] * 3, "last_success_s": np.nan,
                          "lambda_hat": [1.0, 0.1, 1.0], "importance": 1.0,
                          "lane": "refresh", "signal": True,
                          "period_s": [DAY_S, WEEK_S, np.nan],
                          "phase_s": [15 * 3600.0, 4 * DAY_S + 9 * 3600, np.nan],
                          "spread_s": [0.0, 0.0, np.nan]})
    pages["rhythm_from_s"] = w0 - DAY_S / pages["rate"]  # as host_plan arms a signal
    v = plan.due_visits(pages, w0, w0 + DAY_S, lag_s=600.0).set_index("url")
    assert v.loc["daily", "due_s"] == w0 + 15 * 3600 + 600
    assert v.loc["weekly", "due_s"] == w0      # Friday 09:00 is four days away: now
    assert v.loc["plain", "due_s"] == w0
    assert (v["p_changed"] == 1.0).all()
    # without the signal the weekly page would wait for its phase (no visit today)
    quiet = plan.due_visits(pages.assign(signal=False), w0, w0 + DAY_S, lag_s=600.0)
    assert "weekly" not in set(quiet.url)


def test_the_planner_keeps_a_signalled_timed_page_on_its_phase():
    from jobs.core import host_plan
    from jobs.params import plan_context
    ctx = plan_context(Config(), MON + 20 * DAY_S, MON + 21 * DAY_S)
    ctx = __import__("dataclasses").replace(
        ctx, policy=policies.get_policy("uniform", f_min=ctx.f_min, f_max=ctx.f_max), level=1.0,
        fast_rate=1.0, audit_rate=0.0, discovery_min_bin=-8, fast_floor=False)
    sums = sums_of(MON + np.arange(12) * DAY_S + 15 * 3600)
    at = pd.Timestamp(MON + 19 * DAY_S + 15 * 3600, unit="s", tz="UTC")
    pages = pd.DataFrame({
        "host": ["h.example"] * 2, "url": ["https://h.example/a", "https://h.example/b"],
        "lane": ["refresh"] * 2, "lambda_hat": [1.0, 1.0], "importance": [1.0, 1.0],
        "interval_s": [DAY_S] * 2, "gone": [False] * 2,
        "last_fetch_at": [at - pd.Timedelta(hours=20)] * 2,
        "last_success_at": [at - pd.Timedelta(hours=20)] * 2,
        "pending_signal_at": [at, at], "etag": ['"e"'] * 2, "last_modified": [None] * 2,
        "method_hint": ["conditional"] * 2, "crawl_delay_s": [10.0] * 2,
        "max_fetches_per_day": [np.nan] * 2,
        **{c: np.concatenate([sums[c], [0.0]]) for c in timing.TIMING_COLUMNS}})
    out = host_plan.plan_bucket(pages, ctx)
    visits = out[out.url.notna() & out.reason.isna()].set_index("url")
    w0 = MON + 20 * DAY_S
    assert visits.loc["https://h.example/a", "due_s"] == pytest.approx(
        w0 + 15 * 3600 + TP.visit_lag_s, abs=3 * 60)     # the timed page: just after 15:00
    assert visits.loc["https://h.example/b", "due_s"] == w0  # the untimed one: now


def test_optimal_prices_a_timed_page_by_its_periodic_value():
    # Two pages, one host, budget 1.5 visits/day: the allocator's split maximises
    # sum w * expected_freshness (timed value for the timed page) over a fine grid.
    lam = np.array([2.0, 2.0])
    period = np.array([DAY_S, np.nan])
    pages = pd.DataFrame({"host": ["h", "h"], "lambda_hat": lam, "importance": [1.0, 1.0],
                          "timing_gain": timing.value_gain(lam, period),
                          "rate_ceiling": timing.rate_ceiling(period)})
    pol = policies.get_policy("optimal", f_min=0.01, f_max=24.0)
    res = policies.policy_rates(pol, pages, "host", 100.0, 1.5)
    f = res.rates.to_numpy()
    x = np.linspace(0.01, 1.49, 14801)
    value = (timing.expected_freshness(lam[0], x, DAY_S)
             + timing.expected_freshness(lam[1], 1.5 - x, np.nan))
    best = x[np.argmax(value)]
    assert f.sum() == pytest.approx(1.5, rel=1e-6)
    assert f[0] <= 1.0 + 1e-9 and f[0] == pytest.approx(best, abs=2e-3)
    # With room for more, the timed page stops at one visit a day.
    more = policies.policy_rates(pol, pages, "host", 100.0, 6.0).rates.to_numpy()
    assert more[0] == pytest.approx(1.0) and more[1] == pytest.approx(5.0, rel=1e-6)


def test_fold_learns_the_rhythm_from_trusted_last_modified_dates():
    params = update_params(Config())
    state = state_update.empty_state()
    base = pd.Timestamp("2026-11-02T00:00Z")
    for d in range(8):
        day = base + pd.Timedelta(days=d)
        changed_at = day + pd.Timedelta(hours=6, minutes=int((d % 3) - 1))
        lm = changed_at.strftime("%a, %d %b %Y %H:%M:%S GMT")
        logs = pd.DataFrame({"url": ["u"], "host": ["h.example"],
                             "fetched_at": [day + pd.Timedelta(hours=15)], "status": [200],
                             "etag": [None], "last_modified": [lm],
                             "content_hash": [f"h{d}"], "trust_etag": [True],
                             "trust_lm": [True]})
        state = state_update.fold_day(state, logs, day.strftime("%Y-%m-%d"), params,
                                      estimate=False)[state_update.STATE_COLUMNS]
    row = state.iloc[0]
    assert row["tod_n"] == pytest.approx(7 * 2 ** (-3.5 / 90), rel=0.05)  # 7 dated, decayed
    r = timing.rhythm({c: np.array([row[c]]) for c in timing.TIMING_COLUMNS}, TP, 1.0)
    assert r.period_s[0] == DAY_S and abs(r.phase_s[0] - 6 * 3600) < 120


@pytest.mark.parametrize("trusted", [True, False])
def test_fold_learns_the_rhythm_from_trusted_push_signals_only(trusted):
    """A publisher announces each day's change at 21:00 (WebSub, IndexNow...); the page is
    fetched once. A host whose signals are trusted dates every change; an untrusted one none."""
    params = update_params(Config())
    base = pd.Timestamp("2026-11-02T00:00Z")
    state = state_update.fold_day(
        state_update.empty_state(),
        pd.DataFrame({"url": ["u"], "host": ["h.example"], "fetched_at": [base],
                      "status": [200], "etag": [None], "last_modified": [None],
                      "content_hash": ["h0"], "trust_etag": [False], "trust_lm": [False]}),
        "2026-11-02", params, estimate=False)[state_update.STATE_COLUMNS]
    no_logs = pd.DataFrame({c: pd.Series(dtype=object) for c in
                            ("url", "host", "fetched_at", "status", "etag", "last_modified",
                             "content_hash")})
    no_logs["fetched_at"] = pd.to_datetime(no_logs["fetched_at"], utc=True)
    for d in range(1, 8):
        at = base + pd.Timedelta(days=d, hours=21)
        # the same claim sent twice counts once
        sig = pd.DataFrame({"url": ["u", "u"], "signaled_at": [at, at],
                            "signal_trusted": [trusted, trusted]})
        state = state_update.fold_day(state, no_logs, (base + pd.Timedelta(days=d))
                                      .strftime("%Y-%m-%d"), params, signals=sig,
                                      estimate=False)[state_update.STATE_COLUMNS]
    row = state.iloc[0]
    r = timing.rhythm({c: np.array([float(row[c])]) for c in timing.TIMING_COLUMNS}, TP, 1.0)
    if trusted:
        assert row["tod_n"] == pytest.approx(7.0, rel=0.05)
        assert r.period_s[0] == DAY_S and r.phase_s[0] == pytest.approx(21 * 3600, abs=1)
    else:
        assert row["tod_n"] == 0 and not r.timed[0]


def test_a_change_both_claimed_and_dated_by_last_modified_counts_once():
    """A trusted push claim dates a change when it arrives; the fetch that confirms it then
    shows the same instant in a trusted Last-Modified. One change, one dated change: counted
    twice, a single change would look like two at one instant (R = 1) and could pass the
    host's phase test or the one-weekday rule alone."""
    params = update_params(Config())
    base = pd.Timestamp("2026-11-02T00:00Z")

    def fetch(at, h, lm=None):
        return pd.DataFrame({"url": ["u"], "host": ["h.example"], "fetched_at": [at],
                             "status": [200], "etag": [None],
                             "last_modified": [lm.strftime("%a, %d %b %Y %H:%M:%S GMT")
                                               if lm is not None else None],
                             "content_hash": [h], "trust_etag": [True], "trust_lm": [True]})

    state = state_update.fold_day(state_update.empty_state(), fetch(base, "h0"), "2026-11-02",
                                  params, estimate=False)[state_update.STATE_COLUMNS]
    changed_at = base + pd.Timedelta(days=1, hours=7)
    sig = pd.DataFrame({"url": ["u"], "signaled_at": [changed_at], "signal_trusted": [True]})
    state = state_update.fold_day(state, fetch(base + pd.Timedelta(days=1, hours=9), "h1",
                                               changed_at), "2026-11-03", params,
                                  signals=sig, estimate=False)[state_update.STATE_COLUMNS]
    assert float(state.iloc[0]["tod_n"]) == pytest.approx(1.0, rel=0.02)
    # without the claim, the Last-Modified alone dates it: still one
    alone = state_update.fold_day(state_update.empty_state(), fetch(base, "h0"), "2026-11-02",
                                  params, estimate=False)[state_update.STATE_COLUMNS]
    alone = state_update.fold_day(alone, fetch(base + pd.Timedelta(days=1, hours=9), "h1",
                                               changed_at), "2026-11-03", params,
                                  estimate=False)[state_update.STATE_COLUMNS]
    assert float(alone.iloc[0]["tod_n"]) == pytest.approx(1.0, rel=0.02)


def test_a_fast_page_fetched_at_a_steady_time_is_not_timed():
    """Fetch-locking: a λ = 20/day Poisson page fetched every day at 15:00 under a trusted
    Last-Modified shows its last change about Exp(20) before each fetch. Those instants are
    concentrated (R ≈ 0.95); only the λ̂ P gate keeps the page from being read as timed."""
    rng = np.random.default_rng(5)
    lm = MON + np.arange(12) * DAY_S + 15 * 3600 - rng.exponential(DAY_S / 20, 12)
    s = sums_of(lm)
    r_bar = np.hypot(s["tod_cos"][0], s["tod_sin"][0]) / s["tod_n"][0]
    assert r_bar > TP.min_concentration
    assert not timing.rhythm(s, TP, 20.0).timed[0]
    assert timing.rhythm(s, TP, 1.0).timed[0]  # the same instants from a slow page: timed
    # the bound in the notes: no fetch-locked page passes below the gate
    lam_p = TP.max_changes_per_period
    assert 1 / np.sqrt(1 + (2 * np.pi / lam_p) ** 2) < TP.min_concentration


def test_once_timed_its_last_modified_counts_as_a_plain_change_bit():
    """A page that changes every day at 06:00, fetched at 18:00 for 7 days (its Last-Modified
    dates the changes: λ̂ about 2/day), then just after its change, as the plan places a timed
    page. Its modification age is then 12 minutes at every fetch; read as Poisson evidence
    λ̂ = n / sum(ages) would jump far above the gate and untime it. As plain change bits
    λ̂ stays where it was and the page stays timed."""
    params = update_params(Config())
    state = state_update.empty_state()
    base = pd.Timestamp("2026-11-02T00:00Z")
    lam, lm_n = [], []
    for d in range(14):
        day = base + pd.Timedelta(days=d)
        changed_at = day + pd.Timedelta(hours=6)
        fetch = changed_at + (pd.Timedelta(hours=12) if d < 7 else pd.Timedelta(minutes=12))
        logs = pd.DataFrame({"url": ["u"], "host": ["h.example"], "fetched_at": [fetch],
                             "status": [200], "etag": [None],
                             "last_modified": [changed_at.strftime("%a, %d %b %Y %H:%M:%S GMT")],
                             "content_hash": [f"h{d}"], "trust_etag": [True], "trust_lm": [True]})
        state = state_update.fold_day(state, logs, day.strftime("%Y-%m-%d"), params,
                                      estimate=True)[state_update.STATE_COLUMNS]
        lam.append(float(state["lambda_hat"].iloc[0]))
        lm_n.append(float(state["lm_n"].iloc[0]))
    row = state.iloc[0]
    r = timing.rhythm({c: np.array([float(row[c])]) for c in timing.TIMING_COLUMNS}, TP,
                      row["lambda_hat"])
    assert r.timed[0] and r.period_s[0] == DAY_S
    # well under the gate; read as modification ages, 12 minutes at each fetch would climb
    # towards n / sum(ages), 120 a day
    assert lam[6] < TP.max_changes_per_period and max(lam[7:]) < TP.max_changes_per_period / 2
    assert lm_n[-1] < lm_n[6]  # no dated observation for λ since the page was timed


def test_plan_rows_explain_a_timed_page():
    from jobs.core import plan_table
    from jobs.core.allocation_kkt import marginal_value

    lam, period = np.array([1.5, 1.5, 1.5]), np.array([DAY_S, DAY_S, np.nan])
    rate = np.array([1.0, 0.5, 0.5])
    pol = policies.get_policy("optimal", f_min=0.01, f_max=24.0)
    gain, ceiling = timing.value_gain(lam, period), timing.rate_ceiling(period)
    rows = plan_table.page_rows(
        host=np.array(["h"] * 3), url=np.array(["a", "b", "c"]), lane=np.array(["refresh"] * 3),
        gone=np.zeros(3, bool), selected=np.zeros(3, bool), signal=np.zeros(3, bool), rate=rate,
        fast_rate=np.zeros(3), importance=np.ones(3), lambda_hat=lam,
        last_success_s=np.full(3, MON), visits=np.ones(3), audit=np.zeros(3, bool),
        host_cap=np.full(3, 100), cap_binds=np.zeros(3, bool), policy=pol, f_min=0.01,
        f_max=24.0, window_start=MON + DAY_S, timing_gain=gain, rate_ceiling=ceiling)
    assert rows.reason.tolist() == ["timed", "multiplier", "multiplier"]
    assert rows.marginal_value[0] == 0.0
    assert rows.marginal_value[1] == pytest.approx(gain[1] * marginal_value(1.5, 1.0, 0.5))
    assert rows.marginal_value[2] == pytest.approx(marginal_value(1.5, 1.0, 0.5))


# --- Shrinkage to the host's phase ------------------------------------------------------

def _pool(*pages):
    """Sums of several pages (one row each) from lists of change instants."""
    s = timing.empty(len(pages))
    for i, t in enumerate(pages):
        timing.add_changes(s, np.full(len(t), i, np.int64), np.asarray(t, float), 1.0)
    return s


def _at(hour, days, jitter_s=0.0, seed=0):
    rng = np.random.default_rng(seed)
    return MON + np.asarray(days, float) * DAY_S + hour * 3600 + rng.normal(0, jitter_s, len(days)) \
        if jitter_s else MON + np.asarray(days, float) * DAY_S + hour * 3600


def test_a_page_with_two_changes_at_its_hosts_hour_is_timed_through_the_host():
    anchors = [_at(7.5, range(6), 300, 1), _at(7.7, range(6), 300, 2)]  # timed on their own
    newcomer = _at(7.4, [2, 5])                                        # 07:24 twice
    off_hour = np.array([MON + 2 * DAY_S + 7.5 * 3600, MON + 5 * DAY_S + 19.5 * 3600])
    single = _at(7.5, [3])
    s = _pool(*anchors, newcomer, off_hour, single)
    codes, lam = np.zeros(5, np.int64), np.full(5, 0.7)
    own = timing.rhythm(s, TP, lam)
    assert own.timed.tolist() == [True, True, False, False, False]
    r = timing.shrunk_rhythm(s, TP, lam, codes, 1)
    assert r.timed.tolist() == [True, True, True, False, False]
    # its phase: its own 07:24 shrunk toward the anchors' 07:36 (two changes, a tight host)
    assert r.period_s[2] == DAY_S and 7.4 * 3600 < r.phase_s[2] < 7.6 * 3600
    # its spread is the host pool's: the anchors' own jitter and their 12 minutes apart
    assert 300 < r.spread_s[2] < 1800
    # the anchors keep their own rhythm
    for i in (0, 1):
        assert (r.phase_s[i], r.spread_s[i]) == (own.phase_s[i], own.spread_s[i])
    # the same newcomer on a host without anchors, or with shrinkage switched off: not timed
    alone = timing.shrunk_rhythm(s, TP, lam, np.array([0, 0, 1, 1, 1]), 2)
    assert not alone.timed[2]
    from dataclasses import replace
    off = replace(TP, host_min_dated_changes=TP.min_dated_changes)
    assert timing.shrunk_rhythm(s, off, lam, codes, 1).timed.tolist() == own.timed.tolist()


def test_a_weekly_publisher_at_its_hosts_hour_is_timed_on_its_weekday_through_the_host():
    """Two dated changes at the host's hour a week apart (Wednesdays 07:24): a page that
    changes about once a week (lambda_hat x 7 <= 3) is timed on the week at its own weekday;
    one whose rate says daily, or whose changes fell on two weekdays, gets the day. (Two
    changes this close on the week would time it alone: the week's two-change rule is off
    here, as for changes up to an hour or two apart.)"""
    anchors = [_at(7.5, range(6), 300, 1), _at(7.7, range(6), 300, 2)]
    weekly = _at(7.4, [2, 9], 120, 3)
    two_weekdays = _at(7.4, [2, 10], 120, 4)
    s = _pool(*anchors, weekly, two_weekdays)
    codes = np.zeros(4, np.int64)
    tp = timing_params(load_config(None, ["timing.week_min_dated_changes=3"]))
    assert timing.rhythm(s, TP, 0.15).period_s[2] == WEEK_S  # its own evidence, rule on
    r = timing.shrunk_rhythm(s, tp, np.array([0.7, 0.7, 0.15, 0.15]), codes, 1)
    assert r.timed.tolist() == [True] * 4
    assert r.period_s[2] == WEEK_S
    assert r.phase_s[2] == pytest.approx(2 * DAY_S + 7.4 * 3600, abs=300)  # Wednesday 07:24
    assert r.spread_s[2] == pytest.approx(r.spread_s[3])                   # the host's spread
    assert r.period_s[3] == DAY_S and r.phase_s[3] == pytest.approx(7.4 * 3600, abs=300)
    # the same weekly evidence on a page whose rate is daily: 0.5 x 7 = 3.5 > 3
    daily = timing.shrunk_rhythm(s, tp, np.array([0.7, 0.7, 0.5, 0.15]), codes, 1)
    assert daily.period_s[2] == DAY_S
    # and a weekly publisher placed by it: the first visit lands just after Wednesday 07:24
    due = timing.snap_to_phase(np.array([MON + 14 * DAY_S]), np.array([WEEK_S]),
                               timing.Rhythm(r.period_s[2:3], r.phase_s[2:3], r.spread_s[2:3]),
                               tp.visit_lag_s, MON + 14 * DAY_S)
    assert 0 < due[0] - (MON + 16 * DAY_S + 7.4 * 3600) < 2 * 3600


def test_decayed_changes_count_as_changes():
    """The fold decays each dated change to 2^(-age/h) (h = estimation.half_life_days), so k
    changes on different days weigh less than k; a threshold of k changes still counts them.
    Above: two changes a week apart once they have aged (1.9 of weight)."""
    assert timing.counts([2.0, 1.95, 1.01, 1.0, 0.0], 2).tolist() == [True, True, True, False,
                                                                      False]
    assert timing.counts([5.0, 4.3, 4.0], 5).tolist() == [True, True, False]
    h = Config().estimation.half_life_days * DAY_S
    now = MON + 17 * DAY_S  # the plan of Wednesday + 2 weeks, a week after the last change

    def aged(*pages):
        s = timing.empty(len(pages))
        for i, t in enumerate(pages):
            t = np.asarray(t, float)
            timing.add_changes(s, np.full(len(t), i, np.int64), t, 2.0 ** (-(now - t) / h))
        return s

    anchors = [_at(7.5, range(10, 16), 300, 1), _at(7.7, range(10, 16), 300, 2)]
    weekly, single = _at(7.4, [2, 9], 120, 3), _at(7.4, [9])
    s = aged(*anchors, weekly, single)
    assert 1.8 < s["tod_n"][2] < 2.0                           # two changes, aged
    r = timing.shrunk_rhythm(s, TP, np.array([0.7, 0.7, 0.15, 0.15]), np.zeros(4, np.int64), 1)
    assert r.timed.tolist() == [True, True, True, False]     # one change is never two
    assert r.period_s[2] == WEEK_S
    assert r.phase_s[2] == pytest.approx(2 * DAY_S + 7.4 * 3600, abs=300)  # Wednesday 07:24
    # five changes over four weeks (4.5 of weight) time a weekly page on its own evidence
    five = aged(_at(16.0, [-12, -5, 2, 9, 16], 300, 5))
    assert 4 < five["tod_n"][0] < 5
    assert timing.rhythm(five, TP, 0.15).period_s[0] == WEEK_S


def test_same_weekday_poisson_pairs_at_the_hosts_hour_are_rarely_weekly():
    """Poisson pages with two dated changes that passed the day test by chance: one pair in
    seven falls on one weekday, and the rate gate keeps the daily-rate ones on the day."""
    rng = np.random.default_rng(5)
    anchors = [_at(9.0, range(8), 600, k) for k in range(3)]
    days = rng.integers(0, 21, size=(4000, 2))
    pages = [_at(9.0, d, 900, 100 + i) for i, d in enumerate(days)]  # all near 09:00
    lam = np.concatenate([np.full(3, 0.7), rng.uniform(0.05, 1.0, len(pages))])
    s = _pool(*anchors, *pages)
    r = timing.shrunk_rhythm(s, TP, lam, np.zeros(len(lam), np.int64), 1)
    weekly = r.period_s[3:] == WEEK_S
    same_day = (days[:, 0] - days[:, 1]) % 7 == 0
    assert not (weekly & ~same_day).any()              # never across two weekdays
    assert not (weekly & (lam[3:] * 7 > TP.few_dates_max_changes_per_week)).any()
    assert weekly.mean() < same_day.mean()             # about 1/7 of these pairs, gated by rate


def test_the_host_phase_test_is_the_von_mises_likelihood_ratio():
    """Two changes 50 and 25 minutes from the host's phase (floor sd 30 min, kappa = 58.4):
    log ratio = kappa (cos 50' + cos 25') - 2 log I0(kappa) = 4.17 < 4.6 (log 100): not
    timed; 25 and 25 minutes: 5.21: timed; both exactly at the phase: 5.90, the most two
    changes can give (one change: at most 2.95, never timed)."""
    anchors = [_at(12.0, range(6)), _at(12.0, range(7, 13))]
    kappa = 1 / (2 * np.pi * 1800 / DAY_S) ** 2
    for minutes, expect in (((50, -25), False), ((25, -25), True)):
        page = [MON + 20 * DAY_S + 12 * 3600 + m * 60 for m in minutes]
        page[1] += DAY_S
        s = _pool(*anchors, page)
        ratio = kappa * sum(np.cos(2 * np.pi * m * 60 / DAY_S) for m in minutes) \
            - 2 * np.log(np.i0(kappa))
        assert ratio == pytest.approx(4.17 if not expect else 5.21, abs=0.01)
        got = timing.shrunk_rhythm(s, TP, np.full(3, 0.5), np.zeros(3, np.int64), 1)
        assert got.timed[2] is np.bool_(expect)


def test_poisson_pages_on_a_timed_host_are_rarely_timed_through_it():
    rng = np.random.default_rng(11)
    anchors = [_at(9.0, range(8), 600, k) for k in range(3)]
    pages = [MON + np.sort(rng.uniform(0, 20 * DAY_S, rng.integers(2, 5))) for _ in range(3000)]
    s = _pool(*anchors, *pages)
    r = timing.shrunk_rhythm(s, TP, np.full(len(pages) + 3, 0.3),
                             np.zeros(len(pages) + 3, np.int64), 1)
    assert r.timed[:3].all()
    # two uniform changes both within ~34 min of 09:00: (68 / 1440)^2 = 0.2 %; and the
    # page-level test: here every page with enough evidence to be judged is a publisher (prior
    # odds 4), so two uniform changes within about half an hour of each other pass it (~2 %
    # of pairs; measured 1.6 % over these 2-4 change pages)
    assert r.timed[3:].mean() < 0.025


def test_hosts_whose_anchors_disagree_or_fast_pages_get_no_shrinkage():
    anchors = [_at(7.0, range(6)), _at(19.0, range(6))]  # a pool with no phase
    # Two changes 40 minutes apart: neither at a host phase nor tight enough for the
    # page-level test (the anchors publish to the minute).
    s = _pool(*anchors, _at(7.0, [2]).tolist() + _at(7.67, [9]).tolist())
    r = timing.shrunk_rhythm(s, TP, np.full(3, 0.5), np.zeros(3, np.int64), 1)
    assert r.timed.tolist() == [True, True, False]
    s = _pool(_at(7.0, range(6)), _at(7.0, [2, 9]))
    fast = timing.shrunk_rhythm(s, TP, np.array([0.5, 12.0]), np.zeros(2, np.int64), 1)
    assert fast.timed.tolist() == [True, False]  # lambda_hat x day above the fetch-locking gate


def test_the_fold_reads_last_modified_as_a_change_bit_for_every_page_the_plan_may_time():
    rng = np.random.default_rng(3)
    n = 4000
    codes = rng.integers(0, 30, n)
    hour = rng.uniform(0, 24, 30)[codes]
    s = timing.empty(n)
    k = rng.integers(0, 9, n)
    rows = np.repeat(np.arange(n), k)
    daily = rng.random(n) < 0.5
    when = np.where(daily[rows], MON + rng.integers(0, 20, rows.size) * DAY_S + hour[rows] * 3600
                    + rng.normal(0, 900, rows.size), MON + rng.uniform(0, 20 * DAY_S, rows.size))
    timing.add_changes(s, rows, when, rng.uniform(0.3, 1.0, rows.size))
    lam = rng.uniform(0.05, 10, n)
    planned = timing.shrunk_rhythm(s, TP, lam, codes, 30).timed
    assert planned.sum() > timing.rhythm(s, TP, lam).timed.sum() > 0
    assert not (planned & ~timing.last_modified_is_change_bit(s, TP, lam)).any()


def test_hostile_stored_sums_read_as_no_evidence_through_the_plan():
    from jobs.core import plan_work

    good = _pool(_at(7.0, range(6)), _at(7.1, range(6)), _at(7.0, [3, 8]))
    frame = pd.DataFrame({c: v for c, v in good.items()})
    bad = pd.DataFrame({"tod_n": [np.inf, -5.0, np.nan], "tod_cos": [1e308, -1e308, np.nan],
                        "tod_sin": [np.nan, np.inf, 0.0], "tow_cos": [0.0, np.nan, -np.inf],
                        "tow_sin": [None, 0.0, 0.0], "tod_off_n": [np.inf, -5.0, None]},
                       dtype=object)
    pages = pd.concat([frame, bad], ignore_index=True)
    pages["host"] = "h"
    ctx = _ctx()
    groups = plan_work.HostGroups.of(pages["host"].to_numpy(object))
    r = plan_work.page_rhythm(pages, ctx, np.full(6, 0.5), groups)
    assert r.timed.tolist() == [True, True, True, False, False, False]
    assert np.isfinite(r.phase_s[:3]).all()
    # the hostile rows change nothing for the others
    clean = plan_work.page_rhythm(pages.iloc[:3], ctx, np.full(3, 0.5),
                                  plan_work.HostGroups.of(np.array(["h"] * 3, object)))
    assert np.array_equal(clean.phase_s, r.phase_s[:3])
    # a corrupt refutation count reads as none; a real one refutes
    for off, timed in ((np.inf, True), (-5.0, True), (np.nan, True), (1.0, False)):
        hostile = plan_work.page_rhythm(pages.iloc[:3].assign(tod_off_n=[off, 0.0, 0.0]), ctx,
                                        np.full(3, 0.5),
                                        plan_work.HostGroups.of(np.array(["h"] * 3, object)))
        assert hostile.timed.tolist() == [timed, True, True]


def _ctx():
    from jobs.core import plan_work
    return plan_work.PlanContext(
        window_start=MON, window_end=MON + DAY_S, f_min=0.01, f_max=24.0, initial_s=DAY_S,
        gone_rate=0.1, default_importance=1.0, fast_min_lambda=1e9, fast_min_importance=1e9,
        fast_patterns="", fast_rate=0.0, fast_enabled=False, audit_rate=0.0,
        audit_cadence_days=1, policy=None, fast_floor=False, timing=TP)


def test_only_day_evidence_below_five_changes_turns_last_modified_into_a_change_bit():
    """Shrinkage times pages on the day only, so two changes ten hours apart (close on the
    week circle, R = 0.99, far apart in the day) keep their modification ages for λ; two
    changes three days apart at 08:00 and 08:10 do not."""
    s = _pool([MON + 2 * 3600, MON + 12 * 3600], [MON + 8 * 3600, MON + 3 * DAY_S + 8 * 3600 + 600],
              [MON + 2 * 3600])
    got = timing.last_modified_is_change_bit(s, TP, np.full(3, 0.3))
    assert got.tolist() == [False, True, False]
    from dataclasses import replace
    assert not timing.last_modified_is_change_bit(s, replace(TP, enabled=False), 0.3).any()


def test_fast_lane_pages_are_never_timed_nor_lend_their_host_a_phase():
    """A front page whose Last-Modified dates sit just before our steady 15:00 fetch (a
    fetch-locked page whose λ̂ rests on its prior after all-changed fetches) is in the fast
    lane: not timed, and its host gets no phase from it, so an article with two changes
    near 15:00 is not timed either. A refresh page with six changes at 07:00 (another host)
    is."""
    from jobs.core import plan_work

    front = MON + np.arange(6) * DAY_S + 15 * 3600 - 900
    s = _pool(front, _at(15.1, [2, 4]), _at(7.0, range(6)))
    pages = pd.DataFrame({"url": ["https://h.example/", "https://h.example/a",
                                  "https://g.example/b"],
                          "host": ["h.example", "h.example", "g.example"],
                          "lane": "refresh", "lambda_hat": [4.0, 0.5, 0.5], "importance": 1.0,
                          "interval_s": DAY_S, **s})
    ctx = _ctx()
    from dataclasses import replace
    fast_ctx = replace(ctx, fast_enabled=True, fast_patterns=r"^https?://[^/]+/?$")
    work = plan_work.prepare(pages, fast_ctx, plan_work.HostGroups.of(pages["host"].to_numpy(object)))
    assert work["lane"].tolist() == ["fast", "refresh", "refresh"]
    assert np.isnan(work["period_s"][:2]).all() and work["period_s"][2] == DAY_S
    # without the fast lane the same front page is timed and times the article through the host
    slow = plan_work.prepare(pages, ctx, plan_work.HostGroups.of(pages["host"].to_numpy(object)))
    assert (slow["period_s"] == DAY_S).all()


@pytest.mark.parametrize("period, phase, last, window, expect", [
    # weekly, publishing Tuesdays 06:00, last fetched on a Friday 22:46 before it was timed:
    # the next Tuesday, not the one nearest a week after Friday (11 days on, stale for 7)
    (WEEK_S, 1 * DAY_S + 6 * 3600, MON - 3 * DAY_S + 22.77 * 3600, MON, MON + DAY_S + 6 * 3600),
    # daily at 06:00, last fetched at 23:00: tomorrow's 06:00, not the day after's
    (DAY_S, 6 * 3600, MON - 3600, MON, MON + 6 * 3600),
    # fetched just after today's change: the next day's
    (DAY_S, 6 * 3600, MON + 6 * 3600 + 700, MON + 12 * 3600, MON + DAY_S + 6 * 3600),
])
def test_a_page_visited_once_a_period_goes_at_the_first_change_time_after_its_last_visit(
        period, phase, last, window, expect):
    pages = pd.DataFrame({"url": ["u"], "rate": [DAY_S / period], "rhythm_from_s": [last],
                          "last_success_s": [last], "lambda_hat": [0.5], "importance": [1.0],
                          "lane": ["refresh"], "period_s": [period], "phase_s": [phase],
                          "spread_s": [0.0]})
    v = plan.due_visits(pages, window, window + 2 * DAY_S, lag_s=600.0)
    assert v.due_s.iloc[0] == pytest.approx(expect + 600.0)
    # strictly after: a visit exactly at the instant does not repeat it
    r = timing.Rhythm(np.array([period]), np.array([phase]), np.array([0.0]))
    at = timing.next_phase_after(np.array([expect + 600.0]), r, 600.0)
    assert at[0] == pytest.approx(expect + 600.0 + period)
    assert np.isnan(timing.next_phase_after(np.array([np.nan]), r, 600.0)[0])


# --- Page-level rhythm: the page's own hour, with the host's prior -----------------------

def test_a_host_whose_pages_share_an_hour_pools_the_phase_of_a_page_with_few_changes():
    """Anchors at 10:00 ± 2 min: a page with two changes at 10:20 is timed through the host at
    a phase pulled most of the way to 10:00 (the host's hours agree far better than two
    changes of one page locate it)."""
    anchors = [_at(10.0 + d / 60, range(6), 60, k) for k, d in enumerate((-2, 0, 1, 2))]
    s = _pool(*anchors, _at(10.0 + 20 / 60, [3, 7]))
    r = timing.shrunk_rhythm(s, TP, np.full(5, 0.7), np.zeros(5, np.int64), 1)
    assert r.timed.all()
    assert 10.0 * 3600 < r.phase_s[4] < 10.1 * 3600  # pooled: within 6 min of the host's 10:00


def test_a_host_whose_pages_publish_at_spread_hours_times_a_page_at_its_own_hour():
    """Anchors at 06:00, 10:00, 14:00, 18:00, 21:00 (each to the minute): no host phase, so no
    V-test; a page with two changes at 16:30 on two days is timed at its own hour (the
    page-level test: its two changes agree as tightly as the host's publishers do, and most of
    the host's pages with evidence are publishers: posterior odds above 10 to 1); its phase is
    its own (the host's hours say nothing about where it publishes)."""
    hours = (6.0, 10.0, 14.0, 18.0, 21.0)
    anchors = [_at(h, range(6), 120, k) for k, h in enumerate(hours)]
    page = _at(16.5, [3, 8], 120, 9)
    s = _pool(*anchors, page)
    codes, lam = np.zeros(6, np.int64), np.full(6, 0.7)
    r = timing.shrunk_rhythm(s, TP, lam, codes, 1)
    assert r.timed.all() and r.period_s[5] == DAY_S
    assert r.phase_s[5] == pytest.approx(16.5 * 3600, abs=240)
    assert timing.MIN_PAGE_SPREAD_S - 1 <= r.spread_s[5] < 900  # the publishers' own jitter
    # The same page on a host whose other pages with evidence are mostly not publishers
    # (sixty concentrated nowhere: prior odds 6/61): two changes do not suffice.
    rng = np.random.default_rng(4)
    poisson = [MON + np.sort(rng.uniform(0, 20 * DAY_S, 8)) for _ in range(60)]
    s2 = _pool(*anchors, page, *poisson)
    m = 6 + len(poisson)
    r2 = timing.shrunk_rhythm(s2, TP, np.full(m, 0.7), np.zeros(m, np.int64), 1)
    assert r2.timed[:5].all() and not r2.timed[5]
    # A third change at the same hour times it on its own (the tight rule), whatever the host.
    three = _pool(*anchors, np.concatenate([page, _at(16.5, [12], 120, 10)]), *poisson)
    assert timing.shrunk_rhythm(three, TP, np.full(m, 0.7), np.zeros(m, np.int64), 1).timed[5]


def test_a_wrong_page_level_rhythm_is_refuted_as_any_other():
    hours = (6.0, 10.0, 14.0, 18.0, 21.0)
    anchors = [_at(h, range(6), 120, k) for k, h in enumerate(hours)]
    s = _pool(*anchors, _at(16.5, [3, 8], 120, 9))
    s["tod_off_n"][5] = timing.REFUTED_AT
    r = timing.shrunk_rhythm(s, TP, np.full(6, 0.7), np.zeros(6, np.int64), 1)
    assert r.timed[:5].all() and not r.timed[5]


def test_the_phase_shrinks_to_the_host_with_few_changes_and_not_with_many():
    """The conjugate von Mises update: the posterior direction lies between the host's and the
    page's, nearer the page's the more changes it has and the less the host's hours agree."""
    mu_b, own = 0.0, 0.4  # radians
    def phase(kappa0, n):
        return timing._posterior_phase(np.array([kappa0]), np.array([mu_b]), np.array([50.0]),
                                       np.array([n * np.cos(own)]), np.array([n * np.sin(own)]))[0]
    assert 0 < phase(200.0, 2) < phase(200.0, 20) < own
    assert phase(200.0, 20) > own - 0.07
    assert phase(0.0, 2) == pytest.approx(own)        # hours that do not agree: the page's own
    assert phase(1e6, 2) == pytest.approx(mu_b, abs=1e-3)
    # A1 inverse is the inverse of the mean resultant length I1/I0 (to the approximation's 2 %)
    from scipy.special import i0e, i1e
    for kappa in (0.5, 2.0, 5.0, 50.0, 500.0):
        r = i1e(kappa) / i0e(kappa)
        assert timing._a1_inverse(r) == pytest.approx(kappa, rel=0.03)


def test_poisson_pages_on_a_host_of_own_hour_publishers_are_rarely_timed():
    """A host of publishers at spread hours: Poisson pages with 2-4 uniform changes and a few
    of their own with enough evidence to be judged; the page-level test times few of them."""
    rng = np.random.default_rng(12)
    anchors = [_at(h, range(8), 300, k) for k, h in enumerate(rng.uniform(5, 20, 6))]
    judged = [MON + np.sort(rng.uniform(0, 20 * DAY_S, 8)) for _ in range(6)]
    pages = [MON + np.sort(rng.uniform(0, 20 * DAY_S, rng.integers(2, 5))) for _ in range(3000)]
    s = _pool(*anchors, *judged, *pages)
    m = len(anchors) + len(judged) + len(pages)
    r = timing.shrunk_rhythm(s, TP, np.full(m, 0.3), np.zeros(m, np.int64), 1)
    assert r.timed[:6].all()
    assert r.timed[12:].mean() < 0.02


def test_few_tight_changes_take_their_hosts_publishers_spread_for_placement():
    """Two Wednesdays 4 min apart time a page on the week by their own evidence, and their
    own sd (2 min) would place its visit 14 min after the phase; its host's anchors keep
    their hours to about 40 min, so its spread is theirs and its visit lands after most of
    its changes. Anchors keep their own sd; a page on a host without anchors keeps its own."""
    jitter = 2400.0
    anchors = [_at(h, range(8), jitter, seed) for h, seed in ((6.0, 11), (13.0, 12), (20.0, 13))]
    weekly = _at(9.0, [2, 9]) + np.array([0.0, 240.0])
    s = _pool(*anchors, weekly, weekly)
    codes, lam = np.array([0, 0, 0, 0, 1]), np.array([1.0, 1.0, 1.0, 0.14, 0.14])
    own = timing.rhythm(s, TP, lam)
    assert own.period_s[3] == WEEK_S and own.spread_s[3] < 200  # two changes 4 min apart
    r = timing.shrunk_rhythm(s, TP, lam, codes, 2)
    assert r.period_s[3] == WEEK_S and r.phase_s[3] == pytest.approx(own.phase_s[3])
    assert 0.7 * jitter < r.spread_s[3] < 1.3 * jitter          # the anchors' own sd
    np.testing.assert_array_equal(r.spread_s[:3], own.spread_s[:3])  # anchors: their own
    assert r.spread_s[4] == own.spread_s[4]                      # no anchors on its host
    due = timing.next_phase_after(np.array([MON + 3 * DAY_S]), timing.Rhythm(
        r.period_s[3:4], r.phase_s[3:4], r.spread_s[3:4]), TP.visit_lag_s)
    assert due[0] - (MON + 9 * DAY_S + 9 * 3600) > 1.4 * jitter  # after most of its changes


@pytest.mark.parametrize("field", ["min_dated_changes", "host_min_dated_changes",
                                   "tight_min_dated_changes", "week_min_dated_changes",
                                   "few_dates_max_changes_per_week"])
@pytest.mark.parametrize("value", ["-1", "inf", "nan"])
def test_a_dated_change_threshold_must_be_finite_and_not_negative(field, value):
    with pytest.raises(ConfigError, match="timing.min_dated_changes finite"):
        load_config(None, [f"timing.{field}={value}"])
    assert getattr(load_config(None, [f"timing.{field}=0"]).timing, field) == 0.0
