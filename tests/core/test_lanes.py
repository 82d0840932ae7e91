"""Lanes sharing one host capacity: fast rate, discovery threshold, auto split, audits, and
the lane budgets (shares, reservation order, split) of :func:`jobs.core.lanes.lane_budgets`."""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config
from jobs.core import lanes, plan_work
from jobs.params import budget_params, plan_context


def test_fast_rate_fills_the_lane_budget_under_host_caps():
    # Host 0 caps at 10, so 5 pages there get 2 each; host 1's 5 pages take the rest.
    r = lanes.fast_rate([5, 5], [10, 1000], 30.0, 1 / 90, 24.0)
    assert r == pytest.approx(4.0, rel=1e-9)
    assert float(np.minimum([10, 1000], np.array([5, 5]) * r).sum()) <= 30.0 + 1e-9
    assert lanes.fast_rate([5, 5], [1e9, 1e9], 1e6, 1 / 90, 24.0) == 24.0  # 1 h floor
    assert lanes.fast_rate([5, 5], [1e9, 1e9], 0.01, 1 / 90, 24.0) == pytest.approx(1 / 90)


@pytest.mark.parametrize("budget, expected", [(3, 2), (4, 2), (5, 1), (1, 3), (6, None)])
def test_importance_threshold_reaches_the_budget(budget, expected):
    assert lanes.importance_threshold([3, 2, 1], [2, 2, 2], budget) == expected


@pytest.mark.parametrize("n_urls, expected", [(50, 50), (200, 74)])
def test_auto_split_equalises_marginal_values(n_urls, expected):
    # Refresh demand D(mu) = 100/mu, so mu(B_r) = 100/B_r; discovery URLs are worth ~3.91.
    grid = np.geomspace(1e-3, 1e3, 200)
    demand = 100.0 / grid
    b = 31
    value = 2 ** ((b + 0.5) / 16)
    out = lanes.auto_split(grid, demand, 100.0, [b], [n_urls], value_days=1.0)
    assert out["discovery_budget"] == expected
    assert out["discovery_value"] == pytest.approx(value)
    assert out["refresh_value"] == pytest.approx(100.0 / (100.0 - expected), rel=1e-6)
    assert out["refresh_value"] <= value + 1e-12  # discovery still worth its last fetch
    if expected < n_urls:  # one more discovery fetch would be worth less than refresh's
        assert 100.0 / (100.0 - expected - 1) > value


def test_auto_split_gives_nothing_to_worthless_discovery():
    grid = np.geomspace(1e-3, 1e3, 100)
    out = lanes.auto_split(grid, 100.0 / grid, 100.0, [-64], [500], value_days=1.0)
    assert out["discovery_budget"] == 0 and out["refresh_budget"] == 100.0


def test_host_capacity_health_only_lowers_politeness():
    cap = lanes.host_capacity([10.0, 10.0, 10.0, 10.0], [None, 100, None, 100],
                              [0.5, 0.5, np.nan, 2.0])
    assert cap.tolist() == [4320, 50, 8640, 100]


def test_audit_sample_is_spread_over_its_cadence():
    urls = [f"https://a.example/p{i}" for i in range(4000)]
    days = [lanes.audit_due(urls, 0.25, 3, d) for d in (100, 101, 102, 103)]
    hits = np.array([d[0] for d in days[:3]])
    member = hits.any(axis=0)
    assert abs(member.mean() - 0.25) < 0.03
    assert (hits.sum(axis=0)[member] == 1).all()  # once per cadence, never twice
    assert (days[3][0] == days[0][0]).all()        # the same slot three days later
    offsets = days[0][1][days[0][0]]
    assert offsets.min() >= 0 and offsets.max() < 86400 and offsets.std() > 20000


def test_fast_lane_takes_thresholds_and_patterns_only_for_known_pages():
    pat = lanes.compile_patterns(r"^https?://[^/]+/?$,/(feed|rss|atom)(\.xml)?/?$")
    urls = ["https://n.example/", "https://n.example/feed", "https://n.example/a/b",
            "https://n.example/hot", "https://n.example/"]
    fast = lanes.fast_mask(urls, [0.1, 0.1, 0.1, 9.0, 0.1], [1, 1, 1, 9, 1],
                           [True, True, True, True, False], 4.0, 5.0, pat)
    assert fast.tolist() == [True, True, False, True, False]


def test_host_prior_fills_missing_frontier_importance():
    w = lanes.fill_importance([2.0, 4.0, np.nan, 7.0], [False, False, True, True],
                              [True, True, False, False], 1.0)
    assert w.tolist() == [2.0, 4.0, 3.0, 7.0]


# --- lane budgets: shares, reservation order, auto split (jobs.core.lanes.lane_budgets) ---

F_MIN, F_MAX, GONE = 1 / 90, 24.0, 1 / 30


def _params(**changes):
    return replace(budget_params(Config()), **changes)


def _hosts(rows):
    return pd.DataFrame(rows, columns=["cap", "n_fast", "n_audit", "n_discovery", "n_gone",
                                       "n_refresh"])


def _budgets(params, hosts, bins, counts, fast_floor=False, demand=None):
    return lanes.lane_budgets(params, hosts, bins, counts, f_min=F_MIN, f_max=F_MAX,
                              gone_rate=GONE, fast_floor=fast_floor, demand=demand)


def test_share_targets_are_floors_of_the_shares():
    p = _params(daily_fetches=999, fast_share=0.1, audit_share=0.02, discovery_share=0.1)
    assert lanes.share_targets(p) == {"fast": 99, "audit": 19, "discovery": 99}


def test_lane_budgets_known_answer():
    # Host 0 (cap 10) is filled by its fast pages; host 1 has room for everything.
    p = _params(daily_fetches=1000, fast_share=0.1, audit_share=0.02, discovery_share=0.1,
                split="fixed")
    hosts = _hosts([(10, 5, 3, 4, 30, 100), (1000, 5, 3, 100, 30, 100)])
    lb = _budgets(p, hosts, [10, 20], [54, 50])
    # r_f: min(10, 5r) + min(1000, 5r) = 100  ->  r = 18; B_f = 100
    assert lb.fast_rate == pytest.approx(18.0) and lb.fast == 100
    assert lb.audit == 3                       # host 0 has no cap left for its 3 audits
    assert lb.discovery == 100                 # min(104 frontier URLs, 100, 897)
    assert lb.discovery_min_bin == 10          # bin 20 (50) + part of bin 10
    assert lb.gone == pytest.approx(1.0)       # host 1: 30 gone pages at 1/30
    assert lb.refresh_solve == pytest.approx(1000 - 100 - 3 - 100 - 1.0) and lb.joint == 0
    assert lb.floor_need == pytest.approx(100 * F_MIN)  # host 0 has no refresh cap left
    assert lb.planned() == {"fast": 100, "audit": 3, "discovery": 100, "refresh": 797}
    # fast_floor: fast pages are priced with refresh, the fast lane may draw on the pool.
    joint = _budgets(p, hosts, [10, 20], [54, 50], fast_floor=True)
    assert joint.joint == pytest.approx(100.0) and joint.refresh_solve == pytest.approx(896.0)
    assert joint.refresh == pytest.approx(796.0)
    assert joint.planned() == {"fast": 896, "audit": 3, "discovery": 100, "refresh": 797}


def test_lane_budgets_auto_split_moves_budget_to_discovery():
    # Refresh demand D(mu) = 100/mu; 200 frontier URLs in bin 31 worth ~3.91 each
    # (see test_auto_split_equalises_marginal_values): 74 of the 100 go to discovery.
    grid = np.geomspace(1e-3, 1e3, 200)
    hosts = _hosts([(10_000, 0, 0, 200, 0, 50)])
    p = _params(daily_fetches=100, fast_share=0.0, audit_share=0.0, discovery_share=0.1,
                split="auto")
    before = _budgets(p, hosts, [31], [200])          # before pass 2: the share
    assert before.discovery == 10 and before.discovery_value is None
    lb = _budgets(p, hosts, [31], [200], demand=(grid, 100.0 / grid))
    assert lb.discovery == 74 and lb.refresh_solve == pytest.approx(26.0)
    assert lb.discovery_value == pytest.approx(2 ** (31.5 / 16))
    assert lb.planned()["refresh"] == 26
    fixed = _budgets(replace(p, split="fixed"), hosts, [31], [200], demand=(grid, 100.0 / grid))
    assert fixed.discovery == 10 and fixed.refresh_solve == pytest.approx(90.0)
    assert fixed.discovery_value == pytest.approx(2 ** (31.5 / 16))


def test_lane_budgets_without_a_frontier():
    grid = np.geomspace(1e-3, 1e3, 50)
    p = _params(daily_fetches=100, fast_share=0.0, audit_share=0.0, discovery_share=0.3,
                split="auto")
    lb = _budgets(p, _hosts([(1000, 0, 0, 0, 0, 10)]), [], [], demand=(grid, 100.0 / grid))
    assert lb.discovery == 0 and lb.discovery_min_bin is None and lb.discovery_value is None
    assert lb.refresh_solve == 100.0 and lb.planned()["refresh"] == 100


def test_lane_budgets_when_the_budget_is_smaller_than_the_reservations():
    # 10 fetches; the fast and discovery shares take all of them and the gone re-checks
    # alone would want 10 more: refresh gets nothing, never a negative budget.
    p = _params(daily_fetches=10, fast_share=0.5, audit_share=0.0, discovery_share=0.5)
    lb = _budgets(p, _hosts([(100, 10, 0, 20, 300, 50)]), [0], [20])
    assert lb.fast_rate == pytest.approx(0.5) and lb.fast == 5 and lb.discovery == 5
    assert lb.gone == pytest.approx(10.0) and lb.refresh_solve == 0.0
    assert lb.planned() == {"fast": 5, "audit": 0, "discovery": 5, "refresh": 0}
    zero = _budgets(replace(p, daily_fetches=0), _hosts([(100, 10, 5, 20, 300, 50)]), [0], [20])
    assert (zero.fast, zero.audit, zero.discovery, zero.refresh_solve) == (0, 0, 0, 0.0)
    assert sum(zero.planned().values()) == 0


def test_reservation_order_fast_audit_discovery_gone_then_refresh():
    r = lanes.reserve([10, 10, 10], [2, 0, 0], 3.0, [5, 5, 0], [3, 8, 4], [60, 60, 60], 0.5)
    assert r.fast.tolist() == [6, 0, 0]
    assert r.audit.tolist() == [4, 5, 0]
    assert r.discovery.tolist() == [0, 5, 4]
    assert r.gone.tolist() == [0, 0, 6]
    assert r.refresh_cap.tolist() == [0, 0, 0]


def host_plan_context():
    return replace(plan_context(Config(), 1.8e9, 1.8e9 + 86400), policy=None,
                   fast_patterns="", fast_min_lambda=np.inf, audit_rate=0.0)


def _one_host(n_refresh, n_frontier, n_gone, cap):
    n = n_refresh + n_frontier + n_gone
    return pd.DataFrame({
        "host": "h", "url": [f"https://h/p{i}" for i in range(n)],
        "lane": ["refresh"] * (n_refresh + n_gone) + ["discovery"] * n_frontier,
        "gone": [False] * n_refresh + [True] * n_gone + [False] * n_frontier,
        "importance": 1.0, "lambda_hat": 0.5, "interval_s": 86400.0,
        "crawl_delay_s": 86400.0 / cap, "max_fetches_per_day": None, "cap_factor": 1.0})


def test_driver_and_host_count_the_discovery_claim_alike():
    # A host whose frontier fills its cap (a long crawl delay): the host plan gives its 10
    # visits to discovery, so it has no refresh cap and no room for gone re-checks. On
    # a0a3a53 the driver (policy_rates) reserved fast, audit and gone but not discovery,
    # so it counted this host's 10 visits as refresh cap: its floor need and gone claims
    # were too high, and the floors of the other hosts were judged unaffordable.
    pages = _one_host(n_refresh=900, n_frontier=10, n_gone=60, cap=10)
    ctx = replace(host_plan_context(), discovery_min_bin=None)
    bucket = plan_work.load(pages, ctx)
    cap, r = int(bucket.cap[0]), plan_work.reservations(bucket, ctx).hosts
    res = {"discovery": r.discovery[0], "gone": r.gone[0], "refresh_cap": r.refresh_cap[0]}
    assert cap == 10 and res["discovery"] == 10 and res["gone"] == 0 and res["refresh_cap"] == 0
    big = (100_000, 0, 0, 0, 0, 450)           # another host: 450 pages, floor need 5
    hosts = _hosts([(cap, 0, 0, 10, 60, 900), big])
    p = _params(daily_fetches=20, fast_share=0.0, audit_share=0.0, discovery_share=0.5)
    lb = _budgets(p, hosts, [0], [10])
    assert lb.gone == res["gone"] + 0.0
    assert lb.floor_need == pytest.approx(min(res["refresh_cap"], 900 * F_MIN) + 450 * F_MIN)
    assert lb.floor_need <= lb.refresh_solve   # 5 <= 10: the floors are affordable
    # The old order (no discovery term) on the same numbers: gone 2/day, refresh cap 8,
    # floor need 8 + 5 = 13 > 20 - 10 - 2 = 8, so floors were dropped.
    old_gone = min(10, 60 * GONE)
    old_need = min(10 - old_gone, 900 * F_MIN) + 450 * F_MIN
    assert old_need > 20 - 10 - old_gone


@pytest.mark.parametrize("target, due, keep", [
    (15, 10, 1.0), (15, 15, 1.0), (0, 0, 1.0), (0, 50, 0.0),
    (15, 300, (15 + 2 * 15 ** 0.5 + 1) / 300), (100, 110, 1.0)])
def test_audit_keep_is_the_share_the_cut_can_keep_with_a_margin(target, due, keep):
    assert lanes.audit_keep(target, due) == pytest.approx(keep)


def test_thinned_audits_rarely_fall_short_of_the_audit_budget():
    """300 due audits for a budget of 15 (the backtest's sample): thinned by the audit
    priority hash, the day keeps >= 15 on >= 95 % of days, and ~ 15 + 2 sqrt(15) + 1 on
    average (not 300 claiming host capacity)."""
    from jobs.core.plan_work import audit_priority

    urls = np.array([f"https://h{i % 40}.example/p{i}" for i in range(300)], dtype=object)
    q = lanes.audit_keep(15, len(urls))
    kept = np.array([(audit_priority(urls, day) > 1 - q).sum() for day in range(400)])
    assert (kept >= 15).mean() >= 0.95
    assert kept.mean() == pytest.approx(15 + 2 * 15 ** 0.5 + 1, rel=0.08)


def test_fast_mask_takes_a_precomputed_pattern_match_for_the_pages_the_thresholds_leave():
    pat = lanes.compile_patterns(r"^https?://[^/]+/?$")
    urls = ["https://n.example/", "https://n.example/a", "https://n.example/hot",
            "https://n.example/"]
    matched = lanes.pattern_match(urls, pat)
    assert matched.tolist() == [True, False, False, True]
    args = (urls, [0.1, 0.1, 9.0, 0.1], [1, 1, 9, 1], [True, True, True, False], 4.0, 5.0, pat)
    assert (lanes.fast_mask(*args, matched=matched).tolist()
            == lanes.fast_mask(*args).tolist() == [True, False, True, False])
    # The match is what decides: a caller's column is used as given, not recomputed.
    assert lanes.fast_mask(*args, matched=~matched).tolist() == [False, True, True, False]
