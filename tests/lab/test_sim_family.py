"""The family of webs: each rhythm knob moves what it says, and at its default the web is the
web without it (compared on this machine, never with a recorded constant)."""
import hashlib

import numpy as np
import pytest

from lab.sim import changes
from lab.sim.params import WEB_FAMILY, WebParams, family_web, web_overrides
from lab.sim.population import DAILY, WEEKLY
from lab.sim.web import SyntheticWeb

BASE = WebParams(n_urls=2000, n_hosts=20, seed=3, hosts_per_shard=8, keep_days=30,
                 process_shares=(0.4, 0.4, 0.1, 0.1), birth_rate=0.02)


def _web(days: int = 6, **knobs) -> SyntheticWeb:
    web = SyntheticWeb(WebParams(**{**BASE.__dict__, **knobs}))
    web.advance_to(days - 1)
    return web


def _digest(web: SyntheticWeb, days: int = 6) -> str:
    pg, h = web.pages, hashlib.sha256()
    for a in (pg.kind, pg.lam, pg.lam_eff, pg.hour, pg.importance, pg.born, pg.dies,
              pg.url_key, pg.burst_on, pg.last0, pg.discovered, pg.gone, pg.base_bytes):
        h.update(np.ascontiguousarray(a).tobytes())
    for d in range(days):
        h.update(web.window(d).times.tobytes())
        h.update(web.window(d).starts.tobytes())
    return h.hexdigest()


def _changes(web: SyntheticWeb, days: int):
    """(page, time) of every change on days 0..days-1."""
    ids, ts = [], []
    for d in range(days):
        w = web.window(d)
        ids.append(np.repeat(np.arange(w.n_pages), w.counts))
        ts.append(w.times)
    return np.concatenate(ids), np.concatenate(ts)


def _todays_publish_at_hour(sel, pages, ids, lam, live, a, b, day, rng, out_ids, out_t,
                            *unused, **unused_kw):
    """The publish step as it was before the rhythm knobs: hour ± 5 min, every day."""
    publish = rng.random(sel.sum()) < lam[sel]
    jitter = rng.normal(0.0, 5.0 / 1440.0, sel.sum())
    t = day + np.clip(pages.hour[ids[sel]] + jitter, 0.0, 1.0 - 1e-6)
    keep = publish & live[sel] & (t >= a[sel]) & (t < b[sel])
    out_ids.append(ids[sel][keep])
    out_t.append(t[keep])


def test_knobs_at_default_leave_the_web_as_todays_code_path_draws_it(monkeypatch):
    web = _web()
    now = _digest(web)
    # The knobs' own ranges draw from a hash stream: changed while their shares are 0, the web
    # stays as it is.
    assert _digest(_web(hour_move_day=(1.0, 2.0), edition_gap_h=(1.0, 2.0))) == now
    # Today's publish step in place of the new one: the same change times, array for array.
    monkeypatch.setattr(changes, "_publish_at_hour", _todays_publish_at_hour)
    old = _web()
    assert _digest(old) == now
    for d in range(6):
        np.testing.assert_array_equal(old.window(d).times, web.window(d).times)
    monkeypatch.undo()
    assert (web.pages.editions == 1).all() and not web.pages.weekdays_only.any()
    assert np.isinf(web.pages.move_day).all()


def _circ_sd_hours(hours_frac):
    z = np.exp(2j * np.pi * hours_frac).mean()
    return np.sqrt(-2 * np.log(max(abs(z), 1e-12))) * 24 / (2 * np.pi)


def test_own_hour_share_spreads_the_hours_of_one_hosts_publishers():
    def spreads(web):
        pg = web.pages
        pub = (pg.kind == DAILY) | (pg.kind == WEEKLY)
        return [_circ_sd_hours(pg.hour[pub & (pg.host == h)]) for h in np.unique(pg.host[pub])
                if (pub & (pg.host == h)).sum() >= 5]

    pooled, own = spreads(_web(1)), spreads(_web(1, own_hour_share=1.0))
    assert max(pooled) < 0.5                # the host's hour ± 15 min
    assert np.median(own) > 3.0             # U(5 h, 20 h) per page: sd about 4.3 h
    half = _web(1, own_hour_share=0.5).pages
    pub = (half.kind == DAILY) | (half.kind == WEEKLY)
    moved = pub & (half.hour != _web(1).pages.hour)
    assert 0.4 < moved.sum() / pub.sum() < 0.6
    # Only publishers' hours move; other pages' changes stay as they were.
    a, b = _web(3), _web(3, own_hour_share=1.0)
    np.testing.assert_array_equal(a.pages.lam_eff, b.pages.lam_eff)


@pytest.mark.parametrize("jitter", [5.0, 60.0])
def test_publish_jitter_sets_the_spread_of_publish_times(jitter):
    web = _web(6, publish_jitter_min=jitter)
    pid, t = _changes(web, 6)
    daily = web.pages.kind[pid] == DAILY
    off = (t[daily] - np.floor(t[daily]) - web.pages.hour[pid[daily]]) * 1440
    inner = off[np.abs(off) < 6 * jitter]  # clipped at midnight: none of these
    assert np.std(inner) == pytest.approx(jitter, rel=0.1)


def test_daily_publish_probability_is_the_share_of_days_with_a_change():
    for prob in (0.3, 1.0):
        web = _web(10, daily_publish_prob=(prob, prob))
        pid, t = _changes(web, 10)
        pg = web.pages
        daily = np.flatnonzero((pg.kind == DAILY) & (pg.born < 0) & (pg.dies > 10))
        days_with = np.zeros(len(pg))
        np.add.at(days_with, pid, 1.0)
        assert days_with[daily].mean() / 10 == pytest.approx(prob, abs=0.03)


def test_a_moving_publisher_changes_its_hour_once_on_its_day():
    web = _web(8, hour_move_share=1.0, hour_move_day=(4.0, 4.0))
    pg = web.pages
    pid, t = _changes(web, 8)
    daily = pg.kind[pid] == DAILY
    pid, t = pid[daily], t[daily]
    want = np.where(np.floor(t) >= 4, pg.hour2[pid], pg.hour[pid])
    assert np.all(np.abs(t - np.floor(t) - want) * 1440 < 40)  # 8 sd of 5 min
    assert (pg.move_day[pg.kind == DAILY] == 4.0).all()
    assert np.isinf(pg.move_day[pg.kind != DAILY]).all()


def test_editions_publish_two_or_three_times_a_day_at_fixed_gaps():
    web = _web(4, editions_share=1.0, daily_publish_prob=(1.0, 1.0))
    pg = web.pages
    pid, t = _changes(web, 4)
    daily = np.flatnonzero((pg.kind == DAILY) & (pg.born < 0) & (pg.dies > 4))
    per_page = np.bincount(pid, minlength=len(pg))[daily] / 4
    edition_counts = pg.editions[daily]
    assert set(np.unique(edition_counts)) == {2, 3}
    # Most editions fall inside the day (a late hour plus gaps may pass midnight: clipped).
    assert np.mean(np.abs(per_page - edition_counts) < 0.01) > 0.6
    np.testing.assert_allclose(pg.lam_eff[pg.kind == DAILY],
                               pg.lam[pg.kind == DAILY] * pg.editions[pg.kind == DAILY])
    assert (pg.edition_gap[daily] * 24 >= 3.0).all() and (pg.edition_gap[daily] * 24 <= 8.0).all()


def test_weekday_only_publishers_skip_the_weekend():
    web = _web(14, weekday_only_share=1.0, daily_publish_prob=(1.0, 1.0))
    pg, p = web.pages, web.params
    pid, t = _changes(web, 14)
    daily = pg.kind[pid] == DAILY
    weekday = p.weekday_of(np.floor(t[daily]).astype(int))
    assert daily.sum() > 100 and (weekday < 5).all()
    np.testing.assert_allclose(pg.lam_eff[pg.kind == DAILY], pg.lam[pg.kind == DAILY] * 5 / 7)
    # The weekly publishers are not weekday-only publishers.
    assert not pg.weekdays_only[pg.kind == WEEKLY].any()


def test_the_family_is_named_settings_every_one_a_valid_web():
    beyond_today = [n for n, v in WEB_FAMILY.items() if v]
    assert WEB_FAMILY["r20"] == () and len(beyond_today) >= 4
    for name in WEB_FAMILY:
        WebParams(**{**BASE.__dict__, **web_overrides(family_web(name))})
    with pytest.raises(ValueError, match="web family"):
        family_web("nope")
    for bad in ("own_hour_share=1.5", "edition_gap_h=(3.0, 13.0)", "publish_jitter_min=-1.0"):
        with pytest.raises(ValueError):
            WebParams(**{**BASE.__dict__, **web_overrides([bad])})


def test_the_backtest_cli_takes_a_family_web_and_lets_web_settings_override_it():
    from lab.backtest.__main__ import parse_args

    args = parse_args(["--web-family", "own-sparse", "--web", "publish_jitter_min=7.0"])
    got = web_overrides(args.web)
    assert got["own_hour_share"] == 1.0 and got["publish_jitter_min"] == 7.0
    with pytest.raises(SystemExit):
        parse_args(["--web-family", "nope"])
