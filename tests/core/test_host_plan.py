"""A bucket of hosts is planned exactly as its hosts are one by one (jobs.core.host_plan).

The per-host behaviour is tested on buckets of one host (tests/core/test_plan.py,
tests/core/test_lanes.py); here every pass on a bucket of many hosts -- caps that bind and caps
that do not, gone pages, frontier pages with and without importance, push signals, fast
patterns, audits, untrusted validators -- must equal the same pass host by host.
"""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config
from jobs.core import host_plan
from jobs.core.allocation_grid import MultiplierSolution, multiplier_grid
from jobs.core.host_groups import HostGroups
from jobs.core.policies import get_policy
from jobs.params import plan_context

W0 = 1_800_000_000.0


def _bucket(seed=0, n_hosts=7, per_host=60):
    rng = np.random.default_rng(seed)
    n = n_hosts * per_host
    h = rng.integers(0, n_hosts, n)
    host = np.array([f"h{i}.example" for i in range(n_hosts)])[h]
    url = np.array([f"https://{x}/p{i}" for i, x in enumerate(host)], dtype=object)
    url[rng.random(n) < 0.03] = None  # placeholder, replaced by front pages below
    front = pd.isna(url)
    url[front] = [f"https://{x}/{i}/feed" for i, x in zip(np.flatnonzero(front), host[front])]
    frontier = rng.random(n) < 0.15
    last = W0 - rng.uniform(0, 5, n) * 86400
    signal = np.where(rng.random(n) < 0.05, W0 - 600, np.nan)
    return pd.DataFrame({
        "host": host, "url": url, "lane": np.where(frontier, "discovery", "refresh"),
        "lambda_hat": np.where(frontier, np.nan, rng.lognormal(np.log(0.5), 1.5, n)),
        "importance": np.where(frontier & (rng.random(n) < 0.4), np.nan, rng.lognormal(0, 1, n)),
        "interval_s": np.where(frontier, np.nan, rng.uniform(3600, 10 * 86400, n)),
        "gone": ~frontier & (rng.random(n) < 0.05),
        "last_fetch_at": ts(np.where(frontier, np.nan, last)),
        "last_success_at": ts(np.where(frontier, np.nan, last - 3600)),
        "pending_signal_at": ts(signal),
        "etag": np.where(rng.random(n) < 0.8, '"e"', 'bad"'),
        "last_modified": np.where(rng.random(n) < 0.5, "Sun, 06 Nov 1994 08:49:37 GMT", None),
        "method_hint": np.where(frontier, "full", "conditional"),
        "crawl_delay_s": np.array([2880.0, 600.0, 60.0, 30.0, 10.0, 1728.0, 5.0])[h % 7],
        "max_fetches_per_day": np.where(h == 3, 25.0, np.nan),
        "cap_factor": np.where(h == 1, 0.5, 1.0), "trust_etag": h % 2 == 0,
        "trust_lm": h % 3 != 1, "audit_wanted": h % 2 == 1,
    })


def ts(seconds):
    """UTC timestamps, NaT where NaN. Built from whole microseconds: pandas 2.3's
    to_datetime(float seconds with NaN, unit="s") reads uninitialised memory at the NaN
    positions and now and then raises FloatingPointError."""
    us = np.where(np.isnan(seconds), 0, np.round(seconds * 1e6)).astype(np.int64)
    return pd.Series(pd.to_datetime(us, unit="us", utc=True)).where(~np.isnan(seconds))


def _ctx(name="optimal", **changes):
    ctx = plan_context(Config(), W0, W0 + 86400)
    policy = get_policy(name, f_min=ctx.f_min, f_max=ctx.f_max) if name else None
    base = {"policy": policy, "fast_rate": 1.5, "audit_rate": 0.3, "discovery_min_bin": -8,
            "fast_floor": bool(policy is not None and policy.budget_aware)}
    return replace(ctx, **{**base, **changes})


def _by_host(pages, fn):
    return [fn(g) for _, g in pages.groupby("host", sort=False)]


LEVELS = [0.05, MultiplierSolution(0.05, 0.03, 0.4, 0.0, 0.0, 0.04, (0.03, 0.05), True, True, "")]


@pytest.mark.parametrize("name,level", [("optimal", LEVELS[0]), ("optimal", LEVELS[1]),
                                        ("uniform", 2.0), ("proportional", 0.5),
                                        ("adaptive", 1.0), (None, None)])
def test_plan_of_a_bucket_is_the_plans_of_its_hosts(name, level):
    pages = _bucket()
    ctx = _ctx(name, level=level)
    whole = host_plan.plan_bucket(pages, ctx)
    parts = pd.concat(_by_host(pages, lambda g: host_plan.plan_bucket(g, ctx)), ignore_index=True)
    key = ["host", "url", "lane", "due_s"]
    got, want = (x[x.url.notna() & x.reason.isna()].sort_values(key).reset_index(drop=True)
                 for x in (whole, parts))
    assert len(got) == len(want) > 0
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12)
    figs = [x[x.url.isna()].set_index("host").sort_index()[host_plan.HOST_FIGURES]
            for x in (whole, parts)]
    pd.testing.assert_frame_equal(*figs, check_exact=False, rtol=1e-12)
    assert set(got.lane) >= {"refresh", "audit", "discovery"}
    assert figs[0]["carried"].sum() > 0 and (figs[0]["carried"] == 0).any()  # binding or not


@pytest.mark.parametrize("name", ["optimal", "uniform", "proportional"])
def test_summary_and_demand_of_a_bucket_are_those_of_its_hosts(name):
    pages = _bucket(seed=1)
    ctx = _ctx(name)
    whole = host_plan.bucket_summary(pages, ctx, ctx.f_min, 500.0)
    parts = pd.concat(_by_host(pages, lambda g: host_plan.bucket_summary(g, ctx, ctx.f_min, 500.0)))
    hosts = [x[x["bin"].isna()].set_index("host").sort_index() for x in (whole, parts)]
    pd.testing.assert_frame_equal(*hosts)
    bins = [x[x["bin"].notna()].groupby("bin")["bin_count"].sum() for x in (whole, parts)]
    pd.testing.assert_series_equal(*bins)
    grid = multiplier_grid(hosts[0]["lo"].min(), hosts[0]["hi"].max(), 64)
    demand = host_plan.bucket_demand(pages, ctx, grid)
    np.testing.assert_allclose(demand, sum(_by_host(pages, lambda g: host_plan.bucket_demand(
        g, ctx, grid))), rtol=1e-12)
    assert np.all(np.diff(demand) <= 1e-9) and demand[0] > demand[-1]


def test_host_groups_reduce_per_host():
    rng = np.random.default_rng(2)
    hosts = rng.choice(["c", "a", "b", "d"], 500)
    v = rng.normal(size=500)
    mask = rng.random(500) < 0.5
    mask[hosts == "d"] = False
    g = HostGroups.of(hosts)
    assert g.labels.tolist() == list(dict.fromkeys(hosts))  # order of first appearance
    for i, h in enumerate(g.labels):
        on = hosts == h
        assert g.first[i] == np.flatnonzero(on)[0] and g.counts[i] == on.sum()
        assert g.sum(v, mask)[i] == pytest.approx(v[on & mask].sum(), rel=1e-12, abs=1e-12)
        if h == "d":
            assert np.isnan(g.median(v, mask)[i]) and g.min(v, mask)[i] == np.inf
        else:
            assert g.median(v, mask)[i] == np.median(v[on & mask])
            assert g.min(v, mask)[i] == v[on & mask].min()
            assert g.max(v, mask)[i] == v[on & mask].max()
    order, rank = g.rank({"v": v}, ascending=[False])
    expect = (pd.DataFrame({"h": g.codes, "v": v}).sort_values(["h", "v"], ascending=[True, False])
              .groupby("h").cumcount())
    np.testing.assert_array_equal(order, expect.index.to_numpy())
    np.testing.assert_array_equal(rank, expect.to_numpy())


def test_times_may_come_as_epoch_seconds():
    # allocate sends the timestamp columns as doubles (Arrow moves those far faster).
    from jobs.core.plan_work import seconds
    pages = _bucket(seed=3)
    ctx = _ctx(level=0.05)
    as_seconds = pages.assign(**{c: seconds(pages, c) for c in host_plan.TIME_COLUMNS})
    assert as_seconds["last_fetch_at"].dtype == float
    pd.testing.assert_frame_equal(host_plan.plan_bucket(as_seconds, ctx),
                                  host_plan.plan_bucket(pages, ctx))


def test_health_withheld_is_what_the_health_cut_took_at_the_days_level():
    """A host whose cap_factor < 1 reports the rates its pages would get under the politeness
    cap alone, minus those they got (the budget moved to other hosts); other hosts report 0."""
    pages = _bucket()
    ctx = _ctx("optimal", level=LEVELS[0])
    cut = host_plan.plan_bucket(pages, ctx)
    uncut = host_plan.plan_bucket(pages.assign(cap_factor=1.0), ctx)

    def rates(plan):
        return plan[plan.reason.notna()].groupby("host")["planned_rate"].sum()

    withheld = cut[cut.url.isna()].set_index("host")["health_withheld"]
    moved = rates(uncut) - rates(cut)
    assert moved["h1.example"] > 1.0  # h1's cap (factor 0.5) binds
    assert withheld["h1.example"] == pytest.approx(moved["h1.example"], rel=1e-9)
    assert (withheld.drop("h1.example") == 0).all()
    assert (uncut[uncut.url.isna()]["health_withheld"] == 0).all()
