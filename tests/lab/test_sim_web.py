"""Synthetic web: determinism, shard independence and change-time queries."""
import numpy as np
import pytest

from lab.sim.params import WebParams
from lab.sim.web import SyntheticWeb

SMALL = WebParams(n_urls=3000, n_hosts=30, seed=7, hosts_per_shard=8, keep_days=5)


def test_same_seed_same_web_and_changes():
    a, b = SyntheticWeb(SMALL), SyntheticWeb(SMALL)
    a.advance_to(3)
    b.advance_to(3)
    assert list(a.pages.url) == list(b.pages.url)
    np.testing.assert_array_equal(a.window(3).times, b.window(3).times)
    c = SyntheticWeb(WebParams(**{**SMALL.__dict__, "seed": 8}))
    c.advance_to(3)
    assert not np.array_equal(a.pages.importance[:100], c.pages.importance[:100])


def test_shard_built_alone_matches_full_web():
    full, alone = SyntheticWeb(SMALL), SyntheticWeb(SMALL, shards=[1])
    full.advance_to(4)
    alone.advance_to(4)
    in_shard = np.flatnonzero(full.pages.shard == 1)
    assert list(full.pages.url[in_shard]) == list(alone.pages.url)
    t = 4.7
    np.testing.assert_array_equal(full.version_at(in_shard, t),
                                  alone.version_at(np.arange(alone.n_pages), t))


def test_queries_agree_with_raw_change_times():
    web = SyntheticWeb(SMALL)
    web.advance_to(2)
    w = web.window(2)
    pages = np.arange(web.n_pages)
    t = np.full(len(pages), 2.5)
    manual = np.array([(w.times[w.starts[p]:w.starts[p + 1]] <= 2.5).sum() for p in pages[:500]])
    np.testing.assert_array_equal(web.n_changes(pages[:500], 2.0, t[:500]), manual)
    born = web.pages.born <= 2.5
    pages, t = pages[born], t[born]
    last = web.last_change(pages, t)
    assert (last <= 2.5).all()
    assert np.isnan(web.last_change(np.flatnonzero(~born), 2.5)).all()
    changed = web.n_changes(pages, 2.0, t) > 0
    assert (last[changed] > 2.0).all()
    # Unchanged pages report their last earlier change, or their birth if born today.
    np.testing.assert_array_less(last[~changed], np.maximum(2.0, web.pages.born[pages][~changed]) + 1e-12)
    # Versions never decrease over time.
    assert (web.version_at(pages, 2.9) >= web.version_at(pages, 1.1)).all()


def test_poisson_rate_matches_lambda():
    p = WebParams(n_urls=5000, n_hosts=10, process_shares=(1.0, 0.0, 0.0), never_share=0.0,
                  lam_range=(3.0, 3.0), lam_front_range=(3.0, 3.0), section_lam_sigma=0.0,
                  death_rate=0.0, birth_rate=0.0)
    web = SyntheticWeb(p)
    counts = np.concatenate([web.window(d).counts for d in range(3)])
    # 15,000 page-days of Poisson(3): SE of the mean is 0.014.
    assert counts.mean() == pytest.approx(3.0, abs=0.06)
    assert counts.var() == pytest.approx(3.0, rel=0.1)


def test_heavy_tails_and_special_pages():
    web = SyntheticWeb(WebParams())
    sizes = web.hosts.size
    assert sizes.sum() == 20_000 and sizes.min() >= 2 and sizes.max() > 5 * np.median(sizes)
    assert web.hosts.crawl_delay_s.min() >= 1.0 and web.hosts.crawl_delay_s.max() <= 60.0
    front = web.pages.section == -1
    assert front.sum() == 200
    assert np.median(web.pages.importance[front]) > 5 * np.median(web.pages.importance[~front])
    assert web.pages.url[0] == "https://h0001.example.com/"
    assert web.pages.url[1] == "https://h0001.example.com/feed"


def test_dropped_window_and_bad_params_raise():
    web = SyntheticWeb(SMALL)
    web.advance_to(10)
    with pytest.raises(KeyError):
        web.version_at([0], 1.5)
    with pytest.raises(ValueError):
        WebParams(n_urls=10, n_hosts=10)
    with pytest.raises(ValueError):
        WebParams(validator_shares=(1.0, 0.5, 0, 0, 0))


def test_web_overrides_parse_literals_of_each_fields_type():
    from lab.backtest.loop import BacktestSpec
    from lab.sim.params import web_overrides

    got = web_overrides(["quota_host_share=0.1", "quota_per_page=(0.1, 0.2)",
                         "quota_recover_day=9", "error_rate=0"])
    assert got == {"quota_host_share": 0.1, "quota_per_page": (0.1, 0.2),
                   "quota_recover_day": 9, "error_rate": 0.0}
    assert isinstance(got["error_rate"], float)
    for bad in ("nope=1", "quota_host_share", "quota_host_share=__import__('os')",
                "quota_recover_day=1.5", "quota_per_page=0.1", "quota_host_share=True"):
        with pytest.raises(ValueError):
            web_overrides([bad])
    spec = BacktestSpec(urls=400, hosts=8, web=("quota_host_share=0.25",))
    assert spec.params().quota_host_share == 0.25
    with pytest.raises(ValueError):  # parsed, then refused by WebParams' own checks
        BacktestSpec(web=("quota_host_share=1.5",)).params()


def _web_digest(p: WebParams, days: int = 5) -> str:
    """sha256 of a web's page draws and of its change times on days 0..days-1; compared only
    with another digest computed on the same machine."""
    import hashlib

    web = SyntheticWeb(p)
    web.advance_to(days - 1)
    pg, h = web.pages, hashlib.sha256()
    for a in (pg.kind, pg.lam, pg.lam_eff, pg.hour, pg.importance, pg.born, pg.dies,
              pg.url_key, pg.burst_on, pg.last0, pg.discovered, pg.gone, pg.base_bytes):
        h.update(np.ascontiguousarray(a).tobytes())
    for d in range(days):
        h.update(web.window(d).times.tobytes())
        h.update(web.window(d).starts.tobytes())
    return h.hexdigest()


def test_weekly_share_zero_leaves_the_web_bit_for_bit_unchanged(monkeypatch):
    # A kind added with share 0 must not move a default web. Compared on this machine, never
    # against a digest recorded on another (exp/log differ in the last bit between SIMD levels):
    # the web as built, against the same web with the weekly kind's code paths taken away.
    from lab.sim import changes

    p = WebParams(**{**SMALL.__dict__, "birth_rate": 0.05})
    assert p.process_shares == (0.7, 0.15, 0.15, 0.0)
    with_kind = _web_digest(p)
    # The weekly kind's own draws come from a hash, not from the web's generator: changing
    # them leaves the web as it is while no page is weekly.
    assert _web_digest(WebParams(**{**p.__dict__, "weekly_publish_prob": (0.1, 0.2)})) == with_kind
    # The kind's publish step, skipped when it selects no page, changes nothing either (an
    # empty draw must not advance the generator).
    real = changes._publish_at_hour
    calls = []

    def skip_empty(sel, *args, **kwargs):
        calls.append(int(np.sum(sel)))
        if np.any(sel):
            real(sel, *args, **kwargs)

    monkeypatch.setattr(changes, "_publish_at_hour", skip_empty)
    assert _web_digest(p) == with_kind
    assert 0 in calls and any(calls)  # the weekly step ran empty; the daily one did not
    monkeypatch.undo()
    # The kind draw with a trailing zero share is the three-kind draw and leaves the generator
    # where the three-kind draw leaves it.
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    np.testing.assert_array_equal(a.choice(3, 5000, p=(0.7, 0.15, 0.15)),
                                  b.choice(4, 5000, p=(0.7, 0.15, 0.15, 0.0)))
    assert a.bit_generator.state == b.bit_generator.state
    # Old callers' 3-tuples are padded with a zero weekly share: the same web.
    old = WebParams(**{**p.__dict__, "process_shares": (0.7, 0.15, 0.15)})
    assert old == p and _web_digest(old) == with_kind
    # A web with weekly pages is another web (the digest sees the kind).
    assert _web_digest(WebParams(**{**p.__dict__, "process_shares": (0.6, 0.15, 0.15, 0.1)})) != with_kind
    with pytest.raises(ValueError, match="process_shares must be 4"):
        WebParams(process_shares=(0.5, 0.5))


def test_weekly_pages_publish_once_a_week_on_their_weekday_at_their_hour():
    p = WebParams(n_urls=6000, n_hosts=20, seed=3, process_shares=(0.0, 0.0, 0.0, 1.0),
                  weekly_publish_prob=(0.5, 1.0), death_rate=0.0, birth_rate=0.0, keep_days=30,
                  start="2024-01-03")  # a Wednesday: weekdays are calendar weekdays
    web = SyntheticWeb(p)
    pg = web.pages
    weekly = np.flatnonzero(pg.kind == 3)
    assert len(weekly) == 6000 - 2 * 20 and (pg.section[weekly] >= 0).all()
    assert (pg.weekday[pg.kind != 3] == -1).all()
    assert set(pg.weekday[weekly]) == set(range(7))
    np.testing.assert_allclose(pg.lam_eff[weekly], pg.lam[weekly] / 7)
    assert pg.lam[weekly].min() >= 0.5 and pg.lam[weekly].max() <= 1.0
    n_days = 28
    web.advance_to(n_days - 1)
    counts = np.zeros((n_days, len(weekly)), np.int64)
    for d in range(n_days):
        w = web.window(d)
        counts[d] = w.counts[weekly]
        ids = np.repeat(np.arange(w.n_pages), w.counts)
        mine = pg.kind[ids] == 3
        t, pid = w.times[mine], ids[mine]
        weekday = (web.params.start_date.weekday() + d) % 7
        assert (pg.weekday[pid] == weekday).all(), f"day {d}: a change off the page's weekday"
        # Jitter is N(0, 5 min) as for daily pages: 18k changes reach ~4 sd (20 min), 6 sd never.
        off = np.abs(t - d - pg.hour[pid]) * 1440  # minutes from the page's hour
        assert off.max() < 30, f"day {d}: {off.max():.1f} min from the hour"
    assert counts.max() <= 1
    weeks = counts.reshape(4, 7, -1).sum(axis=1)  # calendar-agnostic: any 7 consecutive days
    assert weeks.max() <= 1
    # Long-run frequency: 23,840 page-weeks of Bernoulli(p), sd of the total <= sqrt(n)/2.
    n = weeks.size
    expected = 4 * pg.lam[weekly].sum()
    assert abs(weeks.sum() - expected) < 4 * np.sqrt(n) / 2
    assert counts.mean() == pytest.approx(pg.lam_eff[weekly].mean(), rel=0.02)


def test_process_shares_override_takes_four_kinds():
    from lab.sim.params import web_overrides

    from lab.backtest.loop import BacktestSpec

    got = web_overrides(["process_shares=(0.7, 0.1, 0.1, 0.1)"])
    assert WebParams(**got).process_shares == (0.7, 0.1, 0.1, 0.1)
    # The backtest's web has a weekly share by default; an override replaces it.
    assert BacktestSpec(urls=400, hosts=8).params().process_shares == (0.6, 0.15, 0.15, 0.1)
    spec = BacktestSpec(urls=400, hosts=8, web=("process_shares=(0.7, 0.15, 0.15, 0.0)",))
    assert spec.params().process_shares == (0.7, 0.15, 0.15, 0.0)


def test_sim_prehistory_last_change_follows_each_pages_process():
    """What a page's first Last-Modified says (``last0``, its last change before day 0)
    follows its own process: a Poisson page's age is Exp(λ) (truncated at its birth), a daily
    publisher's falls at its hour, a weekly one's on its weekday; a page that never changes
    shows its birth. (Every page once read as unchanged since its birth.)"""
    from lab.sim.population import DAILY, POISSON, WEEKLY

    p = WebParams(n_urls=20000, n_hosts=40, seed=5, process_shares=(0.5, 0.25, 0.0, 0.25),
                  birth_rate=0.0, death_rate=0.0)
    pg = SyntheticWeb(p).pages
    old = pg.born < -200.0
    poisson = old & (pg.kind == POISSON) & (pg.lam_eff > 0.05)
    assert poisson.sum() > 2000
    lam_age = pg.lam_eff[poisson] * -pg.last0[poisson]
    assert lam_age.mean() == pytest.approx(1.0, rel=0.05)         # Exp(1) in units of 1/λ
    assert np.median(lam_age) == pytest.approx(np.log(2), rel=0.08)
    never = (pg.lam_eff == 0) & (pg.born < 0)
    assert never.sum() > 100 and (pg.last0[never] == pg.born[never]).all()
    for kind in (DAILY, WEEKLY):
        sel = old & (pg.kind == kind)
        day = np.floor(pg.last0[sel])
        np.testing.assert_allclose(pg.last0[sel] - day, pg.hour[sel], atol=1e-9)
        assert (pg.last0[sel] < 0).all()
    weekly = old & (pg.kind == WEEKLY)
    weekday = (p.start_date.weekday() + np.floor(pg.last0[weekly]).astype(int)) % 7
    np.testing.assert_array_equal(weekday, pg.weekday[weekly])
    # Publishing with probability q a day: the days back are Geometric(q), mean 1/q.
    daily = old & (pg.kind == DAILY)
    days_back = np.ceil(-pg.last0[daily])
    assert days_back.mean() == pytest.approx((1.0 / pg.lam[daily]).mean(), rel=0.05)
