"""A burst in progress is rechecked after it, not at the page's long-run rhythm (jobs.core.bursts)."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config, ConfigError, load_config
from jobs.core import bursts, host_plan, http_fields, plan, policies
from jobs.core.state_update import LAST_MODIFIED_NOW_S
from jobs.params import plan_context

DAY_S = 86400.0
HOUR = 3600.0
W0 = 1_800_000_000.0   # a window start (midnight UTC)


def test_a_change_far_more_recent_than_the_rate_explains_is_a_burst():
    fetched = np.full(6, W0 - 6 * HOUR)
    modified = fetched - np.array([HOUR, HOUR, 1.0, HOUR, 3 * DAY_S, HOUR])
    lam = np.array([0.2, 30.0, 0.2, 0.2, 0.2, np.nan])   # changes/day
    eligible = np.array([True, True, True, False, True, True])
    at, p = bursts.burst_recheck(fetched, modified, lam, eligible, 0.02, 12 * HOUR)
    # λ̂ = 0.2/day and a one-hour-old change: P(age <= 1 h) = 1 - exp(-0.2/24) = 0.0083 <= 0.02.
    assert at[0] == fetched[0] + 12 * HOUR
    assert p[0] == pytest.approx(-np.expm1(-12.0), rel=1e-12)   # the burst's rate: 1/age
    # A fast page (P = 0.71), a Last-Modified that is the server's clock (1 s <= 2 s), a page
    # not eligible, an old change and no λ̂: not mid-burst.
    assert np.isnan(at[1:]).all() and np.isnan(p[1:]).all()
    assert LAST_MODIFIED_NOW_S >= 1.0


def test_the_threshold_is_the_poisson_probability_of_so_short_an_age():
    lam, age = 0.5, 0.04 * DAY_S          # P = 1 - exp(-0.02) = 0.0198
    at, _ = bursts.burst_recheck([W0], [W0 - age], [lam], [True], 0.0199, HOUR)
    assert np.isfinite(at[0])
    at, _ = bursts.burst_recheck([W0], [W0 - age], [lam], [True], 0.0197, HOUR)
    assert np.isnan(at[0])
    at, _ = bursts.burst_recheck([W0], [W0 - age], [lam], [True], 0.0, HOUR)  # 0: off
    assert np.isnan(at[0])
    # A Last-Modified after the response (a clock ahead, or a lie) is no age at all.
    at, _ = bursts.burst_recheck([W0], [W0 + HOUR], [lam], [True], 0.0199, HOUR)
    assert np.isnan(at[0])


@pytest.mark.parametrize("prob,recheck", [(-0.1, HOUR), (1.0, HOUR), (0.02, 0.0), (0.02, np.nan)])
def test_bad_parameters_are_refused(prob, recheck):
    with pytest.raises(ValueError):
        bursts.burst_recheck([W0], [W0 - HOUR], [0.2], [True], prob, recheck)


@pytest.mark.parametrize("key,value", [("burst_max_poisson_prob", "1.0"),
                                       ("burst_max_poisson_prob", "-0.01"),
                                       ("burst_recheck_s", "0"), ("burst_recheck_s", "1e9")])
def test_config_refuses_bad_burst_settings(key, value):
    with pytest.raises(ConfigError):
        load_config(None, [f"timing.{key}={value}"])


def _due(**cols):
    pages = pd.DataFrame({"url": ["a"], "rate": [0.2], "rhythm_from_s": [W0 - 6 * HOUR],
                          "last_success_s": [W0 - 6 * HOUR], "lambda_hat": [0.2],
                          "importance": [1.0], "lane": ["refresh"], **cols})
    return plan.due_visits(pages, W0, W0 + DAY_S)


def test_due_visits_moves_the_next_visit_to_the_recheck():
    assert len(_due()) == 0                       # rhythm: 5 days after the last fetch
    v = _due(recheck_s=[W0 + 6 * HOUR], recheck_p=[0.99])
    assert list(v["due_s"]) == [W0 + 6 * HOUR] and v["p_changed"].iloc[0] == 0.99
    # A recheck that has passed is due at the window start.
    assert list(_due(recheck_s=[W0 - HOUR], recheck_p=[0.9])["due_s"]) == [W0]
    # A timed page keeps its phase (one visit period after its last: not today); a recheck
    # later than the rhythm changes nothing.
    assert _due(recheck_s=[W0 + 6 * HOUR], recheck_p=[0.99], period_s=[DAY_S],
                phase_s=[20 * HOUR], spread_s=[0.0]).empty
    late = plan.due_visits(pd.DataFrame({
        "url": ["a"], "rate": [4.0], "rhythm_from_s": [W0 - HOUR], "last_success_s": [W0 - HOUR],
        "lambda_hat": [0.2], "importance": [1.0], "lane": ["refresh"],
        "recheck_s": [W0 + 11 * HOUR], "recheck_p": [0.99]}), W0, W0 + DAY_S)
    assert late["due_s"].iloc[0] == W0 + 5 * HOUR


def _plan(trust_lm: bool, age_s: float, timing_on: bool = True, lam: float = 0.2,
          changed_at=None, observations=None):
    cfg = Config()
    ctx = plan_context(cfg, W0, W0 + DAY_S)
    if not timing_on:
        ctx = dataclasses.replace(ctx, timing=dataclasses.replace(ctx.timing, enabled=False))
    ctx = dataclasses.replace(
        ctx, policy=policies.get_policy("uniform", f_min=ctx.f_min, f_max=ctx.f_max), level=5.0,
        fast_rate=1.0, audit_rate=0.0, discovery_min_bin=-8, fast_floor=False, backfill_s=0.0)
    success = W0 - 4 * HOUR
    at = pd.Timestamp(success, unit="s", tz="UTC")
    pages = pd.DataFrame({
        "host": ["h.example"], "url": ["https://h.example/live"], "lane": ["refresh"],
        "lambda_hat": [lam], "importance": [1.0], "interval_s": [5 * DAY_S], "gone": [False],
        "last_fetch_at": [at], "last_success_at": [at], "pending_signal_at": [pd.NaT],
        "etag": [None], "last_modified": [http_fields.imf_fixdate(int(success - age_s))],
        "method_hint": ["conditional"], "crawl_delay_s": [10.0], "max_fetches_per_day": [np.nan],
        "trust_lm": [trust_lm]})
    if changed_at is not None:  # state's last_change_at: the fetch that last saw a change
        pages[host_plan.CHANGE_COLUMN] = [pd.NaT if np.isnan(changed_at) else
                                          pd.Timestamp(success + changed_at, unit="s", tz="UTC")]
    if observations is not None:
        pages["n_observations"] = [float(observations)]
    out = host_plan.plan_bucket(pages, ctx)
    return out[out.url.notna() & out.reason.isna()]


def test_the_planner_rechecks_a_page_caught_mid_burst_twelve_hours_later():
    v = _plan(trust_lm=True, age_s=20 * 60)   # changed 20 minutes before its last fetch
    assert list(v["due_s"]) == [W0 + 8 * HOUR]               # 4 h ago + 12 h
    assert v["p_changed"].iloc[0] == pytest.approx(-np.expm1(-12 * HOUR / (20 * 60)))
    assert v["method"].iloc[0] == "conditional"              # If-Modified-Since still goes out
    # An untrusted Last-Modified, an old change, or timing off: the rhythm (uniform's 0.2 a
    # day, 5 days after the last fetch: nothing due today).
    assert _plan(trust_lm=False, age_s=20 * 60).empty
    assert _plan(trust_lm=True, age_s=3 * DAY_S).empty
    assert _plan(trust_lm=True, age_s=20 * 60, timing_on=False).empty


def test_a_recheck_that_found_no_new_change_ends_the_burst():
    """A page that changes once a season (λ̂ 0.004 a day) changed 3 days before a fetch: to
    its λ̂ that age is a burst (P = 1.2 %). Rechecked, it shows the same Last-Modified: the
    burst is over, and the page returns to its rhythm. Judged on the age alone, that one
    change stays "recent" for 5 days and is rechecked every 12 hours (10 visits)."""
    slow = dict(trust_lm=True, age_s=3 * DAY_S, lam=0.004)
    found = _plan(**slow, changed_at=0.0)              # the last fetch found the change
    assert list(found["due_s"]) == [W0 + 8 * HOUR]
    assert _plan(**slow, changed_at=-12 * HOUR).empty  # the recheck before it did, not this one
    assert _plan(**slow, changed_at=-30 * DAY_S).empty
    assert list(_plan(**slow)["due_s"]) == [W0 + 8 * HOUR]  # state without the column: age alone
    # a fast burst whose recheck found a new change is rechecked again
    assert list(_plan(trust_lm=True, age_s=20 * 60, changed_at=0.0)["due_s"]) == [W0 + 8 * HOUR]
    # never seen changed: a page fetched once found its Last-Modified then (a burst caught at
    # its first fetch); one compared before and found unchanged every time did not
    first = dict(trust_lm=True, age_s=20 * 60, changed_at=np.nan)
    assert list(_plan(**first, observations=0)["due_s"]) == [W0 + 8 * HOUR]
    assert list(_plan(**first)["due_s"]) == [W0 + 8 * HOUR]
    assert _plan(**{**slow, "changed_at": np.nan}, observations=3).empty


def test_garbage_last_modified_values_never_mark_a_burst():
    ctx = plan_context(Config(), W0, W0 + DAY_S)
    ctx = dataclasses.replace(
        ctx, policy=policies.get_policy("uniform", f_min=ctx.f_min, f_max=ctx.f_max), level=5.0,
        fast_rate=1.0, audit_rate=0.0, discovery_min_bin=-8, fast_floor=False, backfill_s=0.0)
    at = pd.Timestamp(W0 - 4 * HOUR, unit="s", tz="UTC")
    bad = ["not a date", "", "Sun, 06 Nov 1994 08:49:37 GMT\r\nX-Evil: 1", "9" * 300,
           "Fri, 31 Dec 9999 23:59:59 GMT", None]
    n = len(bad)
    pages = pd.DataFrame({
        "host": ["h.example"] * n, "url": [f"https://h.example/{i}" for i in range(n)],
        "lane": ["refresh"] * n, "lambda_hat": [0.2] * n, "importance": [1.0] * n,
        "interval_s": [5 * DAY_S] * n, "gone": [False] * n, "last_fetch_at": [at] * n,
        "last_success_at": [at] * n, "pending_signal_at": [pd.NaT] * n, "etag": [None] * n,
        "last_modified": bad, "method_hint": ["conditional"] * n, "crawl_delay_s": [10.0] * n,
        "max_fetches_per_day": [np.nan] * n, "trust_lm": [True] * n})
    out = host_plan.plan_bucket(pages, ctx)
    assert out[out.url.notna() & out.reason.isna()].empty   # the rhythm only: nothing today
