from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config
from jobs.core import http_fields, plan
from jobs.core.host_plan import plan_bucket
from jobs.core.policies import get_policy
from jobs.core.allocation_kkt import stale_visit_value
from jobs.params import plan_context

W0 = 1_800_000_000.0
W1 = W0 + 86400


def _ctx(**changes):
    """The config's defaults, with no rate policy (each page keeps its backoff interval),
    no fast lane and no audit sample unless asked for."""
    quiet = {"policy": None, "fast_floor": False, "fast_min_lambda": np.inf,
             "fast_patterns": "", "audit_rate": 0.0}
    return replace(plan_context(Config(), W0, W1), **{**quiet, **changes})


def test_host_cap_takes_the_stricter_limit():
    assert plan.host_cap([10.0, 10.0, 7.0], [None, 100, 1e9]).tolist() == [8640, 100, 12342]


def test_due_visits_are_evenly_spaced_and_ranked():
    pages = pd.DataFrame({
        "url": ["fast", "slow", "new"], "rate": [4.0, 0.5, 1.0],
        "rhythm_from_s": [W0 - 3 * 3600, W0 - 86400, np.nan],
        "last_success_s": [W0 - 3 * 3600, W0 - 86400, np.nan],
        "lambda_hat": [2.0, 0.1, 0.0], "importance": [1.0, 1.0, 3.0],
        "lane": ["refresh", "refresh", "discovery"]})
    v = plan.due_visits(pages, W0, W1)
    fast = v[v.url == "fast"].due_s.to_numpy()
    assert fast[0] == W0 + 3 * 3600 and np.allclose(np.diff(fast), 6 * 3600) and len(fast) == 4
    slow = v[v.url == "slow"]
    assert len(slow) == 0  # due exactly at W1: tomorrow's window
    new = v[v.url == "new"]
    assert len(new) == 1 and new.p_changed.iloc[0] == 1.0 and new.priority.iloc[0] == 3.0
    kept, carried = plan.apply_host_cap(v, 2)
    assert kept.url.tolist()[0] == "new" and len(carried) == len(v) - 2


@pytest.mark.parametrize("seed", range(20))
def test_slots_respect_delay_and_window(seed):
    rng = np.random.default_rng(seed)
    delay = float(rng.uniform(0.5, 600))
    n = int(rng.integers(1, int(86400 // delay) + 1))
    due = rng.uniform(W0 - 5000, W1 + 5000, n)
    t = plan.place_in_slots(due, delay, W0, W1, rng.uniform(0, 1, n))
    # The last visit leaves a full crawl delay before the next day's window opens.
    assert t.min() >= W0 and t.max() <= W1 - delay + 1e-6
    if n > 1:
        assert np.diff(np.sort(t)).min() >= delay - 1e-6
    # Nothing is placed earlier than its due time unless the tail had to move back.
    assert np.all((t >= np.minimum(np.maximum(due, W0), W1) - 1e-6) | (t > W1 - n * delay - 1))


@pytest.mark.parametrize("delay", [30.0, 600.0, 0.5, 86400.0 / 7])
def test_consecutive_days_keep_the_crawl_delay_at_midnight(delay):
    # Issue 9: today's last visit due 5 s before midnight and tomorrow's first due at
    # midnight were placed 5 s apart against a 30 s delay.
    today = plan.place_in_slots(np.array([W1 - 5.0]), delay, W0, W1)
    tomorrow = plan.place_in_slots(np.array([W1]), delay, W1, W1 + 86400)
    assert tomorrow[0] - today[0] >= delay - 1e-6
    # The same with both days full of visits pulled towards the boundary.
    cap = int(plan.host_cap([delay])[0])
    n = min(cap, 50)
    today = plan.place_in_slots(np.full(n, W1 - 1.0), delay, W0, W1)
    tomorrow = plan.place_in_slots(np.full(n, W1), delay, W1, W1 + 86400)
    both = np.sort(np.concatenate([today, tomorrow]))
    assert np.diff(both).min() >= delay - 1e-6


@pytest.mark.parametrize("delay", [30.0, 864.0, 7.0, 86400.0 / 3, 86400.0])
def test_a_host_at_its_cap_still_fits_with_the_midnight_gap(delay):
    # The last slot moved to window_end - delay; host_cap need not shrink by one slot.
    cap = int(plan.host_cap([delay])[0])
    t = plan.place_in_slots(np.full(cap, W1 - 1.0), delay, W0, W1)
    assert len(t) == cap and t.min() >= W0 and t.max() <= W1 - delay
    assert cap == 1 or np.diff(np.sort(t)).min() >= delay - 1e-6
    with pytest.raises(ValueError):
        plan.place_in_slots(np.zeros(cap + 1), delay, W0, W1)


def test_delay_below_the_schedule_resolution_keeps_a_positive_cap():
    # 1e-12 s rounded to 0 us: the cap divided by zero and wrapped to -9.2e18 (no rows).
    assert plan.host_cap([1e-12])[0] == 86400 * 10**6
    t = plan.place_in_slots(np.full(3, W0), 1e-12, W0, W1)
    assert np.all(np.diff(np.sort(np.round(t * 1e6))) >= 1)


def test_slots_refuse_impossible_packing():
    with pytest.raises(ValueError):
        plan.place_in_slots(np.zeros(11), 10_000.0, W0, W1)


@pytest.mark.parametrize("value, ok", [
    ('"abc"', True), ('W/"x-1"', True), ('""', True), ("abc", False),
    ('"a\r\nX-Injected: 1"', False), ('"a\x00"', False), ('"a"b"', False), (None, False),
])
def test_etag_grammar(value, ok):
    assert http_fields.valid_etag(value) is ok


@pytest.mark.parametrize("value, ok", [
    ("Sun, 06 Nov 1994 08:49:37 GMT", True), ("Sunday, 06-Nov-94 08:49:37 GMT", False),
    ("Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y", False), ("yesterday", False),
])
def test_http_date_grammar(value, ok):
    assert http_fields.valid_http_date(value) is ok


def test_plan_host_headers_come_from_validators_and_bad_ones_force_full():
    pages = pd.DataFrame({
        "host": "h", "url": ["a", "b", "c", "d"], "lane": "refresh", "interval_s": 86400.0,
        "gone": False, "lambda_hat": 1.0, "importance": [4.0, 3.0, 2.0, 1.0],
        "last_fetch_at": pd.to_datetime([W0 - 86400] * 4, unit="s", utc=True),
        "last_success_at": pd.to_datetime([W0 - 86400] * 4, unit="s", utc=True),
        "etag": ['"good"', '"evil\r\nX: 1"', None, '"fine"'],
        "last_modified": [None, None, "Sun, 06 Nov 1994 08:49:37 GMT", None],
        "crawl_delay_s": 30.0, "max_fetches_per_day": [3, 3, 3, 3],
        "method_hint": ["conditional", "conditional", "conditional", "full"]})
    out = plan_bucket(pages, _ctx())
    visits = out[out.url.notna() & out.reason.isna()].set_index("url")
    assert len(visits) == 3  # cap 3: the least important waits
    assert visits.loc["a"].method == "conditional" and visits.loc["a"].if_none_match == '"good"'
    assert visits.loc["b"].method == "full" and visits.loc["b"].if_none_match is None
    assert visits.loc["c"].method == "conditional"
    assert visits.loc["c"].if_modified_since == "Sun, 06 Nov 1994 08:49:37 GMT"
    summary = out[out.url.isna()].iloc[0]
    assert summary.due_count == 4 and summary.carried == 1 and summary.known_urls == 4


def _host(n, interval_s=86400.0, delay=30.0, max_fetches=None, **extra):
    """n pages of one host, last fetched a day before the window (all due at its start)."""
    return pd.DataFrame({
        "host": "h", "url": [f"https://h/p{i}" for i in range(n)], "lane": "refresh",
        "interval_s": interval_s, "gone": False, "lambda_hat": 2.0,
        "importance": np.arange(n, 0, -1, dtype=float),
        "last_fetch_at": pd.to_datetime([W0 - 86400] * n, unit="s", utc=True),
        "last_success_at": pd.to_datetime([W0 - 86400] * n, unit="s", utc=True),
        "etag": '"e"', "last_modified": "Sun, 06 Nov 1994 08:49:37 GMT",
        "crawl_delay_s": delay, "max_fetches_per_day": [max_fetches] * n,
        "method_hint": "conditional", **extra})


def _visits(out):
    return out[out.url.notna() & out.reason.isna()]  # visits: not figures, not plan rows


def test_mass_interval_shrink_still_respects_the_host_cap():
    # 300 pages all shrunk to the 1 h floor want 7200 visits; the host allows 86400/864 = 100.
    out = plan_bucket(_host(300, interval_s=3600.0, delay=864.0), _ctx())
    v = _visits(out)
    assert len(v) == 100
    summary = out[out.url.isna()].iloc[0]
    assert summary.due_count == 300 * 24 and summary.carried == 300 * 24 - 100
    # Priority (importance x P(changed)) only decides who goes first: the first visits of
    # the 100 most important pages (P(changed over a day) = 0.86 beats 0.08 over an hour).
    assert sorted(v.url) == sorted(f"https://h/p{i}" for i in range(100))


def test_cap_factor_cuts_the_cap_and_explicit_caps_win():
    ctx = _ctx()
    half = plan_bucket(_host(50, delay=864.0, cap_factor=0.5), ctx)
    assert len(_visits(half)) == 50 and half.cap.dropna().iloc[0] == 50
    tight = plan_bucket(_host(50, delay=864.0, max_fetches=7, cap_factor=1.0), ctx)
    assert len(_visits(tight)) == 7
    # A factor above 1 (a producer bug) never raises the politeness cap.
    over = plan_bucket(_host(150, delay=864.0, cap_factor=3.0), ctx)
    assert len(_visits(over)) == 100


def test_validators_are_sent_only_when_trusted():
    ctx = _ctx()
    no_etag = _visits(plan_bucket(_host(3, trust_etag=False, trust_lm=True), ctx))
    assert (no_etag.method == "conditional").all() and no_etag.if_none_match.isna().all()
    assert no_etag.if_modified_since.notna().all()
    neither = _visits(plan_bucket(_host(3, trust_etag=False, trust_lm=False), ctx))
    assert (neither.method == "full").all()
    assert neither.if_none_match.isna().all() and neither.if_modified_since.isna().all()


def test_push_signal_jumps_the_queue_with_p_changed_one():
    pages = _host(20, interval_s=7 * 86400.0, delay=86400.0 / 3)  # cap 3, nothing due
    pages["last_fetch_at"] = pd.to_datetime([W0 - 3600] * 20, unit="s", utc=True)
    signal = [pd.NaT] * 20
    signal[19] = pd.Timestamp(W0 - 60, unit="s", tz="UTC")  # least important page
    pages["pending_signal_at"] = pd.to_datetime(signal, utc=True)
    v = _visits(plan_bucket(pages, _ctx()))
    assert v.url.tolist() == ["https://h/p19"]
    assert v.p_changed.iloc[0] == 1.0 and v.due_s.iloc[0] == W0 and bool(v.signal.iloc[0])


@pytest.mark.parametrize("policy,acted", [("optimal", ["https://h/p0"]),
                                           ("uniform", ["https://h/p0", "https://h/p1"])])
def test_a_signal_is_acted_on_only_when_a_visit_now_is_worth_the_price(policy, acted):
    # Both pages signaled a change since their fetch an hour ago. p0 changes every 20 days:
    # a visit now keeps it fresh for weeks. p1 changes 40 times a day: a visit keeps it
    # fresh for about 36 minutes, 1/40 of a day x its weight 1, below the price 0.2.
    pages = _host(2, lambda_hat=[0.05, 40.0], importance=[1.0, 1.0])
    pages["last_fetch_at"] = pd.to_datetime([W0 - 3600] * 2, unit="s", utc=True)
    pages["last_success_at"] = pages["last_fetch_at"]
    pages["pending_signal_at"] = pd.to_datetime([W0 - 60] * 2, unit="s", utc=True)
    ctx = _ctx()
    rates = get_policy(policy, f_min=ctx.f_min, f_max=ctx.f_max)
    out = plan_bucket(pages, _ctx(policy=rates, level=0.2 if policy == "optimal" else 30.0))
    v = _visits(out)
    now = v[v.signal.astype(bool)]
    assert sorted(now.url) == acted
    assert (now.due_s == W0).all() and (now.p_changed == 1.0).all()
    reason = out[out.reason.notna()].set_index("url").reason
    assert reason["https://h/p0"] == "push_signal"
    assert reason["https://h/p1"] == ("signal_not_worth" if policy == "optimal" else "push_signal")
    if policy == "optimal":
        # p1 keeps its rhythm (the floor rate, next due in 90 days); the budget the day
        # leaves unused may still take it, as backfill ranked by what the visit buys.
        extra = v[v.url == "https://h/p1"]
        assert extra.lane.tolist() == ["backfill"] and extra.due_s.tolist() == [W0]
        np.testing.assert_allclose(extra.priority, stale_visit_value(40.0, 1.0, 90.0), rtol=1e-9)
        off = _visits(plan_bucket(pages, _ctx(policy=rates, level=0.2, backfill_s=0.0)))
        assert "https://h/p1" not in set(off.url)
        # A page with a visit in the window already (here its audit) gets no second one.
        audited = _visits(plan_bucket(pages, _ctx(policy=rates, level=0.2, audit_rate=1.0)))
        assert audited[audited.url == "https://h/p1"].lane.tolist() == ["audit"]
    # metrics.signals_pending still counts every pending signal, acted on or not.
    assert out[out.url.isna()].signals.sum() == 2


def test_audit_sample_is_fetched_in_full_whatever_the_policy():
    ctx = _ctx(audit_rate=1.0)
    pages = _host(10, interval_s=30 * 86400.0)  # the policy wants none of them today
    pages["last_fetch_at"] = pd.to_datetime([W0 - 3600] * 10, unit="s", utc=True)
    v = _visits(plan_bucket(pages, ctx))
    assert len(v) == 10 and (v.lane == "audit").all() and (v.method == "full").all()
    assert v.due_s.between(W0, W1).all() and v.due_s.nunique() == 10  # hash-spread times


def test_overdue_pages_resume_their_rhythm_instead_of_piling_up():
    pages = pd.DataFrame({
        "url": ["slow", "quick", "never"], "rate": [0.5, 2.5, 0.5],
        "rhythm_from_s": [W0 - 3 * 86400, W0 - 1.1 * 86400, np.nan],
        "last_success_s": [W0 - 3 * 86400, W0 - 1.1 * 86400, np.nan],
        "lambda_hat": [0.1, 1.0, 0.1], "importance": [1.0, 1.0, 1.0],
        "lane": ["refresh", "refresh", "refresh"]})
    v = plan.due_visits(pages, W0, W1)
    # slow: grid W0-3d + 2d k -> next point W0+1d, tomorrow (catch-up would fetch it now).
    assert "slow" not in set(v.url)
    quick = v[v.url == "quick"].due_s.to_numpy()
    assert np.allclose(quick[0], W0 - 1.1 * 86400 + 3 * 0.4 * 86400)  # next grid point
    assert len(quick) == 3 and np.allclose(np.diff(quick), 0.4 * 86400)
    assert v[v.url == "never"].due_s.tolist() == [W0]  # no copy yet: due now
    old = plan.due_visits(pages, W0, W1, resume_rhythm=False)
    assert (old[old.url != "never"].groupby("url").due_s.min() == W0).all()


def test_resumed_rhythm_matches_the_planned_rates_on_average():
    rng = np.random.default_rng(0)
    n = 4000
    rate = np.exp(rng.uniform(np.log(0.05), np.log(6.0), n))
    last = W0 - rng.uniform(0, 20, n) * 86400.0  # many overdue by up to 20 days
    pages = pd.DataFrame({"url": [f"u{i}" for i in range(n)], "rate": rate,
                          "rhythm_from_s": last, "last_success_s": last,
                          "lambda_hat": 1.0, "importance": 1.0, "lane": "refresh"})
    due = len(plan.due_visits(pages, W0, W1))
    assert abs(due - rate.sum()) < 0.05 * rate.sum()
    assert len(plan.due_visits(pages, W0, W1, resume_rhythm=False)) > 1.3 * rate.sum()


def test_a_limited_host_is_spread_over_the_window_and_a_blocked_one_starts_after_its_wait():
    due = np.full(12, W0)  # all overdue: placed near their due time they would crowd 00:00
    near = plan.place_host_visits(due, 10.0, W0, W1)
    assert near.max() - W0 < 12 * 10.0 + 1e-6
    spread = np.sort(plan.place_host_visits(due, 10.0, W0, W1, spread=True))
    gaps = np.diff(spread)
    assert gaps.min() >= 86400 / 12 - 1e-3 and spread[-1] <= W1 - 86400 / 12 + 1e-3
    # Retry-After until 06:00: nothing before it, spread over the 18 hours left
    wait = W0 + 6 * 3600 + 0.3
    blocked = np.sort(plan.place_host_visits(due, 10.0, W0, W1, not_before=wait, spread=True))
    assert blocked[0] >= wait and blocked[-1] < W1
    assert np.diff(blocked).min() >= (W1 - wait) / 12 - 1e-3
    # a full host still fits exactly, spread or not, with whole-microsecond times
    n = plan.host_cap(7.0)
    full = plan.place_host_visits(np.full(int(n), W0), 7.0, W0, W1, spread=True)
    assert np.diff(np.sort(full)).min() >= 7.0 - 1e-9 and full.max() <= W1 - 7.0
    np.testing.assert_array_equal(full * 1e6, np.round(full * 1e6))
    # a wait past the window leaves no room: the allocator gave the host no visits
    assert len(plan.place_host_visits(np.array([]), 10.0, W0, W1, not_before=W1 + 5)) == 0


def test_a_failed_fetch_does_not_push_the_pages_rhythm_a_period_away():
    """Issue 15: a host answered 503 to a whole day of fetches. Anchored at those failed
    fetches its pages would all be due together a period later and almost none before; from
    their last success (spread over the last 10 days) about one tenth are due every day, and
    a page that never succeeded is due at once."""
    n = 100
    ctx = _ctx(backfill_s=0.0)  # due visits only: no next-day visit pulled forward
    pages = _host(n, interval_s=10 * 86400.0, delay=60.0)   # period 10 days, cap 1440
    pages["last_fetch_at"] = pd.to_datetime([W0 - 3600] * n, unit="s", utc=True)
    success = W0 - 86400.0 * (1 + np.arange(n) % 10) - 7200.0
    pages["last_success_at"] = pd.to_datetime(success, unit="s", utc=True)
    before = _visits(plan_bucket(pages, ctx))
    assert len(before) == 0                                   # no last_status: last fetch
    pages["last_status"] = pd.array([503] * n, dtype="Int32")
    after = _visits(plan_bucket(pages, ctx))
    assert len(after) == n // 10                              # the ones a period after success
    pages.loc[0, "last_success_at"] = pd.NaT
    assert len(_visits(plan_bucket(pages, ctx))) == n // 10 + 1
    ok = pages.assign(last_status=pd.array([200] * n, dtype="Int32"))
    assert len(_visits(plan_bucket(ok, ctx))) == 0        # a fetch that got an answer counts


@pytest.mark.parametrize("status, anchored_at", [
    (200, "fetch"), (304, "fetch"), (404, "fetch"), (410, "fetch"), (None, "fetch"),
    (0, "success"), (429, "success"), (500, "success"), (503, "success"), (599, "success")])
def test_rhythm_anchor_is_the_last_success_after_a_failed_fetch(status, anchored_at):
    from jobs.core.host_plan import rhythm_anchor
    pages = pd.DataFrame({"last_status": pd.array([status], dtype="Int32")})
    out = rhythm_anchor([W0 - 60.0], [W0 - 5000.0], pages)
    assert out[0] == (W0 - 60.0 if anchored_at == "fetch" else W0 - 5000.0)


def test_audits_the_cut_cannot_keep_do_not_take_a_limited_hosts_cap():
    """Issue 15: a host limited to 13 visits a day with 113 pages, a tenth of them in the
    day's audit sample. Every due audit claimed the cap first (12 of 13 slots) and the cut,
    keeping 15 audits of 300 across the web, dropped nearly all of them: the host got 1-4
    fetches a day under a limit of 13. With ``audit_keep`` only the audits the cut can keep
    claim a slot; refresh gets the rest of the cap."""
    n = 113
    pages = _host(n, interval_s=86400.0, delay=6400.0)    # cap 13, every page due
    full = plan_bucket(pages, _ctx(audit_rate=0.1))
    assert full.cap.dropna().iloc[0] == 13
    audits = (_visits(full).lane == "audit").sum()
    assert audits >= 8 and len(_visits(full)) == 13
    thinned = _visits(plan_bucket(pages, _ctx(audit_rate=0.1, audit_keep=0.08)))
    assert len(thinned) == 13 and (thinned.lane == "audit").sum() <= 3
    assert (thinned.lane == "refresh").sum() >= 10


def test_a_probe_due_hosts_capped_visits_are_marked_to_come_first_in_the_cut():
    """Issue 15: the budget cut keeps a probe-due host's visits first (jobs.budget_cut), or a
    budget-bound day never asks it for more than its ceiling. Every capped refresh visit of
    such a host is a probe; its audits are not (their hash keeps the sample uniform), and
    no other host's visits are."""
    pages = _host(113, interval_s=86400.0, delay=6400.0, cap_factor=0.5, probe_due=True)
    v = _visits(plan_bucket(pages, _ctx(audit_rate=0.1, audit_keep=0.3)))
    assert len(v) == 6 and (v.lane == "audit").any() and (v.lane == "refresh").any()
    assert v.probe.to_numpy(bool).tolist() == (v.lane != "audit").tolist()
    for plain in (pages.drop(columns="probe_due"), pages.assign(probe_due=False),
                  pages.assign(probe_due=pd.array([None] * 113, dtype="boolean"))):
        assert not _visits(plan_bucket(plain, _ctx())).probe.to_numpy(bool).any()


def test_a_probe_due_host_the_plan_wants_more_of_catches_up_its_overdue_pages():
    """Issue 15: visits on each page's rhythm came to 6-11 a day under a limit of 12.1 with a
    ceiling of 11, so no day tested the probe. 50 pages every 4 days, last fetched 5 days
    ago: each is overdue, its next grid point 3 days away. Probe-due with a cap of 10 below
    the 12.5 visits/day its rates want, every overdue page is due now and the cap's 10 go out
    as probes; without the flag, or when the cap does not bind (20), they wait."""
    pages = _host(50, interval_s=4 * 86400.0, delay=864.0, cap_factor=0.1, probe_due=True)
    five_days = pd.to_datetime([W0 - 5 * 86400] * 50, unit="s", utc=True)
    pages["last_fetch_at"] = pages["last_success_at"] = five_days
    probing = _visits(plan_bucket(pages, _ctx()))
    assert len(probing) == 10 and probing.probe.to_numpy(bool).all()
    assert (probing.due_s == W0).all()
    for waiting in (pages.assign(probe_due=False), pages.assign(cap_factor=0.2)):
        assert len(_visits(plan_bucket(waiting, _ctx()))) == 0


def _spread_host(n, delay):
    """n pages with a 2-day interval, last fetched at evenly spread instants over the last
    two days: about half are due in the window, the rest the day after."""
    pages = _host(n, interval_s=2 * 86400.0, delay=delay)
    last = W0 - 2 * 86400.0 + (np.arange(n) + 0.5) * (2 * 86400.0 / n)
    pages["last_fetch_at"] = pd.to_datetime(last, unit="s", utc=True)
    pages["last_success_at"] = pages["last_fetch_at"]
    return pages


def test_backfill_pulls_the_next_days_best_visits_into_the_hosts_spare_cap():
    """Issue 14 §2: 40 pages due every 2 days, 20 due in the window; the host allows 30
    (delay 2880 s). The 10 spare slots get the best of tomorrow's visits, pulled to the
    window's end; the due visits and the figures are those of a plan without backfill."""
    pages = _spread_host(40, delay=2880.0)
    off = plan_bucket(pages, _ctx(backfill_s=0.0))
    on = plan_bucket(pages, _ctx())
    due, v = _visits(off), _visits(on)
    fill = v[v.lane == "backfill"]
    assert len(due) == 20 and len(v) == 30 and len(fill) == 10
    assert (fill.due_s == W1 - 1.0).all()
    assert not set(fill.url) & set(due.url)          # tomorrow's visits, not today's again
    # Best first by the freshness a pull buys: P(changed) at the pull x w x the fresh time
    # until the visit would have come, (1 - e^(-λΔ))/λ. Importance falls with the page
    # number and Δ grows with it: the middle of tomorrow's pages, not its first ten.
    tomorrow = sorted(set(pages.url) - set(due.url), key=lambda u: int(u.split("p")[-1]))
    assert sorted(fill.url, key=lambda u: int(u.split("p")[-1])) == _best_pulls(pages, tomorrow)
    assert _best_pulls(pages, tomorrow) != tomorrow[:10]  # importance x P(changed)'s choice
    pd.testing.assert_frame_equal(off[off.url.isna()].reset_index(drop=True),
                                  on[on.url.isna()].reset_index(drop=True))
    # a full host has nothing to pull into
    full = _visits(plan_bucket(_spread_host(80, delay=2880.0), _ctx()))
    assert len(full) == 30 and not (full.lane == "backfill").any()


def _best_pulls(pages, urls, k=10):
    """The k of ``urls`` (pages of :func:`_spread_host`, λ̂ = 2, one visit every 2 days)
    whose next visit pulled to the window's last second buys most freshness."""
    p = pages.set_index("url").loc[urls]
    last = p.last_success_at.map(lambda t: t.timestamp()).to_numpy()
    pull, lam = W1 - 1.0, 2.0
    gained = (last + 2 * 86400.0 - pull) / 86400.0
    changed = 1 - np.exp(-lam * (pull - last) / 86400.0)
    value = changed * p.importance * -np.expm1(-lam * gained) / lam
    best = value.sort_values(ascending=False).index[:k]
    return sorted(best, key=lambda u: int(u.split("p")[-1]))


def test_backfill_leaves_timed_pages_alone():
    """A timed page's next visit waits for its change time: pulled to the end of today it
    would come before the change. Pages 20-29 (due tomorrow, the most important of
    tomorrow's) change every day at 05:00, so the 10 spare slots go to pages 30-39, the
    only others due tomorrow."""
    from jobs.core import timing

    pages = _spread_host(40, delay=2880.0)
    dated = timing.empty(40)
    days = W0 - 86400.0 * np.arange(1, 9) + 5 * 3600.0
    timing.add_changes(dated, np.repeat(np.arange(20, 30), 8), np.tile(days, 10), 1.0)
    v = _visits(plan_bucket(pages.assign(**dated), _ctx()))
    fill = v[v.lane == "backfill"]
    # (pages 20-29, visited every other day, are due at tomorrow's 05:10, the first change
    # time a day after their last visit: inside the window, so fewer slots are spare)
    assert (v[v.url.isin([f"https://h/p{i}" for i in range(20, 30)])].lane == "refresh").all()
    assert len(fill) == 30 - (v.lane != "backfill").sum() > 0
    assert {int(u.split("p")[-1]) for u in fill.url} <= set(range(30, 40))
    untimed = _visits(plan_bucket(pages, _ctx()))
    pulled = sorted(untimed[untimed.lane == "backfill"].url, key=lambda u: int(u.split("p")[-1]))
    assert pulled == _best_pulls(pages, [f"https://h/p{i}" for i in range(20, 40)])
    assert set(pulled) & {f"https://h/p{i}" for i in range(20, 30)}
