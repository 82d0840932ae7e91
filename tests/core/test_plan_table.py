"""The per-page plan rows of allocate's third pass (jobs.core.plan_table, the plan/dt=D table)."""
import numpy as np
import pandas as pd
import pytest

from jobs.core import host_plan, plan_table
from jobs.core.allocation_kkt import stale_visit_value
from jobs.core.freshness import freshness
from tests.core.test_host_plan import LEVELS, W0, _bucket, _by_host, _ctx


def _split(out):
    visits = out[out.url.notna() & out.reason.isna()]
    plan = out[out.reason.notna()].infer_objects().set_index("url")
    return visits, plan


@pytest.fixture(scope="module")
def planned():
    pages = _bucket(seed=3)
    ctx = _ctx("optimal", level=LEVELS[0])
    return pages, ctx, host_plan.plan_bucket(pages, ctx)


def test_one_plan_row_per_page_and_its_visits_are_the_candidates(planned):
    pages, _, out = planned
    visits, plan = _split(planned[2])
    assert sorted(plan.index) == sorted(pages.url)
    assert plan.host.to_dict() == pages.set_index("url").host.to_dict()
    counts = visits.groupby("url").size()
    assert (plan.visits.reindex(counts.index) == counts).all()
    assert (plan.visits.drop(counts.index) == 0).all()
    # The visits of a page carry its planned rate (audit visits too: the page's own rate).
    rate = visits.groupby("url").rate.first()
    np.testing.assert_allclose(plan.planned_rate.reindex(rate.index), rate, rtol=1e-12)
    audited = visits[visits.lane == "audit"].url.unique()
    assert len(audited) and plan.audit[audited].all()
    assert not plan.audit.drop(audited).any()


def test_reasons_follow_gone_discovery_signal_and_the_host_cap(planned):
    pages, ctx, out = planned
    _, plan = _split(out)
    p = pages.set_index("url")
    gone = p.index[p.gone & (p.lane != "discovery")]
    assert len(gone) and (plan.reason[gone] == "gone_recheck").all()
    frontier = p.index[p.lane == "discovery"]
    assert set(plan.reason[frontier]) <= {"discovery", "discovery_deferred"}
    signal = p.index[p.pending_signal_at.notna() & ~p.gone & (p.lane != "discovery")]
    # A signal is acted on when a visit now buys at least the day's multiplier (the level).
    s = plan.loc[signal]
    assert not (s.reason == "timed").any()  # no timing gain in this bucket: the weight is w
    worth = stale_visit_value(s.lambda_hat, s.importance, 1.0 / s.planned_rate) >= LEVELS[0]
    assert worth.any() and not worth.all()
    assert (s.reason[worth] == "push_signal").all()
    assert (s.reason[~worth] == "signal_not_worth").all()
    # h3.example allows 25 fetches a day for ~60 pages: its cap binds; h4 (10 s delay) not.
    assert plan.cap_binds[plan.host == "h3.example"].all()
    assert (plan.host_cap[plan.host == "h3.example"] == 25).all()
    capped = plan[(plan.host == "h3.example") & (plan.lane == "refresh")]
    assert len(capped) and set(capped.reason) <= {"host_cap", "push_signal", "signal_not_worth",
                                                  "gone_recheck"}
    assert "host_cap" in set(capped.reason)
    free = plan[(plan.host == "h4.example") & (plan.lane == "refresh")]
    assert not free.cap_binds.any()
    assert set(free.reason) <= {"multiplier", "min_rate", "max_rate", "push_signal",
                                "signal_not_worth", "gone_recheck", "fast_lane"}
    assert set(plan.reason) <= set(plan_table.REASONS)


def test_marginal_value_is_the_slope_of_weighted_freshness(planned):
    _, _, out = planned
    _, plan = _split(out)
    priced = plan[plan.marginal_value.notna() & (plan.planned_rate > 0)
                  & (plan.lambda_hat > 0)]
    assert len(priced) > 20
    lam, w, f = (priced[c].to_numpy(float) for c in ("lambda_hat", "importance", "planned_rate"))
    h = 1e-6 * f
    slope = w * (freshness(lam, f + h) - freshness(lam, f - h)) / (2 * h)
    np.testing.assert_allclose(priced.marginal_value, slope, rtol=1e-4)
    # Interior pages of an uncapped host meet the multiplier (0.05) exactly.
    interior = plan[(plan.reason == "multiplier")]
    assert len(interior)
    np.testing.assert_allclose(interior.marginal_value, 0.05, rtol=1e-6)


def test_p_stale_now_is_one_minus_exp_of_lambda_times_age(planned):
    pages, _, out = planned
    _, plan = _split(out)
    p = pages.set_index("url").reindex(plan.index)
    age = (W0 - p.last_success_at.map(lambda t: t.timestamp() if pd.notna(t) else np.nan)) / 86400
    want = np.where(age.isna(), 1.0, 1 - np.exp(-np.nan_to_num(p.lambda_hat) * age.fillna(0)))
    np.testing.assert_allclose(plan.p_stale_now, want, rtol=1e-9)  # us timestamps
    assert plan.p_stale_now.between(0, 1).all()
    assert (plan.p_stale_now[p.lane == "discovery"] == 1.0).all()  # no copy yet


def test_p_stale_now_counts_from_the_last_confirmed_copy_unless_the_hosts_304s_are_trusted():
    """A host that answers 304 without its validators being trusted: its 304s move
    last_success_at but not last_known_at, and P(changed) runs from the latter; a trusted
    host's 304s are confirmations, so it counts from its last success. The candidate visits'
    P(changed) follows the same clock."""
    from tests.core.test_host_plan import ts

    pages = _bucket(seed=3)
    success = pages.last_success_at.map(lambda t: t.timestamp() if pd.notna(t) else np.nan)
    known = success - 6 * 86400.0  # the untrusted 304s of the last six days
    pages["last_known_at"] = ts(known.to_numpy())
    pages["trust_etag"] = pages.host.isin(["h0.example", "h2.example"])
    pages["trust_lm"] = False
    ctx = _ctx("optimal", level=LEVELS[0])
    out = host_plan.plan_bucket(pages, ctx)
    visits, plan = _split(out)
    p = pages.set_index("url").reindex(plan.index)
    trusted = p.trust_etag.to_numpy(bool)
    since = np.where(trusted, success.reindex(range(len(pages))).to_numpy(), known.to_numpy())
    since = pd.Series(since, index=pages.url).reindex(plan.index).to_numpy(float)
    np.testing.assert_allclose(plan.stale_since_s.to_numpy(float), since, rtol=0, atol=1e-6,
                               equal_nan=True)
    age = (W0 - since) / 86400
    want = np.where(np.isnan(age), 1.0, 1 - np.exp(-np.nan_to_num(p.lambda_hat) * np.nan_to_num(age)))
    np.testing.assert_allclose(plan.p_stale_now, want, rtol=1e-9)
    # Untrusted hosts are staler than their last success says; trusted ones unchanged.
    base = host_plan.plan_bucket(pages.drop(columns="last_known_at"), ctx)
    _, before = _split(base)
    live = (p.lane != "discovery").to_numpy() & (p.lambda_hat.fillna(0) > 0).to_numpy()
    after, prior = plan.p_stale_now[live & ~trusted], before.p_stale_now[live & ~trusted]
    assert (after >= prior).all() and (after[prior < 0.999] > prior[prior < 0.999]).all()
    np.testing.assert_allclose(plan.p_stale_now[trusted], before.p_stale_now[trusted], rtol=1e-12)
    # A refresh visit's P(changed) at its due time counts from the same instant.
    first = visits[visits.lane == "refresh"].sort_values("due_s").drop_duplicates("url")
    f = first.set_index("url")
    t0 = plan.stale_since_s.reindex(f.index).to_numpy(float)
    lam = plan.lambda_hat.reindex(f.index).to_numpy(float)
    sig = p.pending_signal_at.reindex(f.index).notna().to_numpy()
    ok = ~np.isnan(t0) & ~sig
    np.testing.assert_allclose(f.p_changed.to_numpy(float)[ok],
                               -np.expm1(-lam[ok] * np.maximum(f.due_s.to_numpy(float)[ok] - t0[ok], 0)
                                         / 86400), rtol=1e-9, atol=1e-12)


def test_plan_rows_of_a_bucket_are_those_of_its_hosts(planned):
    pages, ctx, whole = planned
    parts = pd.concat(_by_host(pages, lambda g: host_plan.plan_bucket(g, ctx)), ignore_index=True)
    cols = ["host", "lane", *plan_table.PLAN_ROW_COLUMNS]
    got, want = (_split(x)[1].sort_index()[cols] for x in (whole, parts))
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12)


def test_other_policies_say_policy_and_floors_say_min_rate():
    pages = _bucket(seed=5)
    out = host_plan.plan_bucket(pages, _ctx("adaptive", level=1.0))
    _, plan = _split(out)
    refresh = plan[(plan.lane == "refresh") & ~plan.cap_binds]
    assert "policy" in set(refresh.reason) and "multiplier" not in set(plan.reason)
    assert plan.marginal_value.isna().all()
    # A policy that does not price visits acts on every signal.
    p = pages.set_index("url")
    signal = p.index[p.pending_signal_at.notna() & ~p.gone & (p.lane != "discovery")]
    assert len(signal) and (plan.reason[signal] == "push_signal").all()
    # optimal at a very high price: every uncapped refresh page sits at the lowest rate.
    _, dear = _split(host_plan.plan_bucket(pages, _ctx("optimal", level=1e6)))
    free = dear[(dear.lane == "refresh") & ~dear.cap_binds
                & ~dear.reason.isin(["signal_not_worth", "gone_recheck"])]
    assert len(free) and (free.reason == "min_rate").all()
    # ... and no visit is worth that price: every signal is left to the page's rhythm.
    assert not (dear.reason == "push_signal").any()
    assert (dear.reason == "signal_not_worth").sum() == len(signal)
