"""Lanes sharing one host capacity: fast rate, discovery threshold, auto split, audits."""
import numpy as np
import pytest

from jobs.core import lanes


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
