"""Simulated fetcher and exact truth accounting."""
import numpy as np
import pandas as pd
import pytest

from jobs.core.freshness import age, freshness
from lab.sim import Simulation, WebParams
from lab.sim.params import VALIDATOR_CLASSES

START = pd.Timestamp("2024-01-01", tz="UTC")


def _params(validator="honest", **kw):
    shares = tuple(1.0 if v == validator else 0.0 for v in VALIDATOR_CLASSES)
    base = dict(n_urls=400, n_hosts=4, seed=3, validator_shares=shares, error_rate=0.0,
                death_rate=0.0, birth_rate=0.0, max_fetches_share=0.0,
                crawl_delay_range=(0.0, 0.0), signal_shares=(1.0, 0.0, 0.0), keep_days=10)
    base.update(kw)
    return WebParams(**base)


def _schedule(urls, times_days, method="full", inm=None, ims=None, lane="refresh"):
    n = len(urls)
    return pd.DataFrame({
        "host": [u.split("/")[2] for u in urls], "url": list(urls),
        "not_before": START + pd.to_timedelta(np.asarray(times_days, float), unit="D"),
        "lane": lane, "method": method,
        "if_none_match": inm if inm is not None else [None] * n,
        "if_modified_since": ims if ims is not None else [None] * n,
        "priority": 1.0, "p_changed": 0.5})


@pytest.mark.parametrize("lam,f", [(1.0, 1.0), (2.0, 4.0)])
def test_even_refresh_matches_closed_form(lam, f):
    p = _params(n_urls=3000, n_hosts=6, process_shares=(1.0, 0.0, 0.0), never_share=0.0,
                lam_range=(lam, lam), lam_front_range=(lam, lam), section_lam_sigma=0.0)
    sim = Simulation(p)
    urls = sim.web.pages.url
    phase = np.random.default_rng(0).random(len(urls)) / f
    days = 8
    for d in range(days):
        k = np.arange(int(np.ceil(f)) + 1)
        t = (phase[:, None] + (d * f + k[None, :]) / f).ravel()
        u = np.repeat(urls, len(k))
        m = (t >= d) & (t < d + 1)
        order = np.argsort(t[m], kind="stable")
        sim.step(d, _schedule(u[m][order], t[m][order]))
    m = sim.metrics(first_day=2)  # day 0-1 include the uncopied start
    # 3000 pages x 6 days: standard error < 0.005; allow 0.02.
    assert m["freshness"] == pytest.approx(float(freshness(lam, f)), abs=0.02)
    assert m["age_days"] == pytest.approx(float(age(lam, f)), rel=0.1)
    assert m["fetches"] > 0 and m["politeness_gap_violations"] == 0


def _first_changed_page(sim, t0, t1):
    pages = np.arange(sim.web.n_pages)
    changed = sim.web.n_changes(pages, t0, t1) > 0
    return int(np.flatnonzero(changed & (sim.web.pages.section >= 0))[0])


def test_frozen_lm_answers_304_after_change():
    sim = Simulation(_params("frozen_lm"))
    sim.web.advance_to(1)
    page = _first_changed_page(sim, 0.1, 0.9)
    url = [sim.web.pages.url[page]]
    first = sim.step(0, _schedule(url, [0.1])).fetch_log.to_pandas()
    assert first.status[0] == 200 and first.etag.isna()[0]
    lm = first.last_modified[0]
    second = sim.step(1, _schedule(url, [1.5 - 0.6], method="conditional", ims=[lm])).fetch_log
    row = second.to_pandas().iloc[0]
    assert row.status == 304 and row.conditional and row.bytes < 1000
    # The server lied: the copy is stale and truth accounting knows it.
    assert sim.copies.version[page] < sim.web.version_at([page], 1.0)[0]


def test_honest_304_only_when_unchanged_and_volatile_never_304():
    sim = Simulation(_params("volatile_etag", never_share=1.0, process_shares=(1.0, 0.0, 0.0)))
    page = 5
    url = [sim.web.pages.url[page]]
    a = sim.step(0, _schedule(url, [0.2])).fetch_log.to_pandas().iloc[0]
    b = sim.step(1, _schedule(url, [1.2], "conditional", [a.etag], [a.last_modified])
                 ).fetch_log.to_pandas().iloc[0]
    assert a.status == b.status == 200
    assert a.etag != b.etag and a.content_hash == b.content_hash  # same content, new ETag

    sim = Simulation(_params("honest"))
    sim.web.advance_to(2)
    page = _first_changed_page(sim, 0.3, 1.5)
    url = [sim.web.pages.url[page]]
    a = sim.step(0, _schedule(url, [0.3])).fetch_log.to_pandas().iloc[0]
    b = sim.step(1, _schedule(url, [1.5], "conditional", [a.etag], [a.last_modified])
                 ).fetch_log.to_pandas().iloc[0]
    assert b.status == 200 and b.content_hash != a.content_hash


def test_host_over_capacity_answers_503_and_is_counted():
    p = _params(crawl_delay_range=(10.0, 10.0), max_fetches_share=1.0,
                max_fetches_per_page=(0.0, 0.0))  # cap = 10 fetches a day
    sim = Simulation(p)
    host = sim.web.pages.host == 0
    urls = sim.web.pages.url[host][:12]
    gaps = np.array([0, 1, 1, 11, 12, 13, 14, 15, 16, 17, 18, 19]) * 20.0 / 86400
    gaps[1] = gaps[0] + 2 / 86400  # 2 s after the first: too close
    res = sim.step(0, _schedule(urls, 0.5 + gaps))
    status = res.fetch_log.column("status").to_pylist()
    assert status[1] == 503 and status[0] == 200
    assert status[10:] == [503, 503]  # 11th and 12th request exceed the cap of 10
    assert res.record["gap_violations"] >= 1 and res.record["cap_violations"] == 2
    m = sim.metrics(budget=5)
    assert m["budget_overrun"] == 7 and m["status_503"] == res.record["status_503"]


def test_dead_unknown_and_lanes():
    p = _params(death_rate=5.0, gone_share=1.0)
    sim = Simulation(p)
    pg = sim.web.pages
    dead = int(np.flatnonzero((pg.dies < 0.5) & (pg.section >= 0))[0])
    urls = [pg.url[dead], "https://h0001.example.com/nope/never-1"]
    log = sim.step(0, _schedule(urls, [0.6, 0.7], lane="fast")).fetch_log.to_pandas()
    assert list(log.status) == [410, 404] and list(log.lane) == ["fast", "fast"]
    assert sim.copies.known_dead[dead]


def test_contract_types_and_not_issued():
    sim = Simulation(_params())
    urls = sim.web.pages.url[:3]
    res = sim.step("2024-01-01", _schedule(urls, [-0.5, 0.5, 1.5]))
    assert res.not_issued == 1 and res.fetch_log.num_rows == 2
    assert str(res.fetch_log.schema.field("fetched_at").type) == "timestamp[us, tz=UTC]"
    assert res.fetch_log.column("fetched_at")[0].as_py() == START.to_pydatetime()
    with pytest.raises(ValueError):
        sim.step(0, _schedule(urls, [0.5]))  # day already simulated
    with pytest.raises(ValueError):
        sim.step(1, _schedule(urls, [1.5], method="head"))


def test_audit_lane_is_a_full_get_that_leaves_the_copy_alone():
    # Production semantics: an `audit` row is fetched in full and logged with lane audit,
    # but it is measurement-only: the crawler's copy (truth) keeps the version it had.
    sim = Simulation(_params())
    sim.web.advance_to(1)
    page = _first_changed_page(sim, 0.1, 0.9)
    url = [sim.web.pages.url[page]]
    sim.step(0, _schedule(url, [0.1]))
    held = sim.copies.version[page]
    visits = sim.copies.visits[page]
    log = sim.step(1, _schedule(url, [1.5 - 0.6], lane="audit")).fetch_log.to_pandas()
    row = log.iloc[0]
    assert row.status == 200 and row.lane == "audit" and not row.conditional
    assert row.content_hash is not None
    assert sim.copies.version[page] == held < sim.web.version_at([page], 1.0)[0]
    assert sim.copies.visits[page] == visits
    # The same row in lane refresh does replace the copy.
    sim.step(2, _schedule(url, [2.5], lane="refresh"))
    assert sim.copies.version[page] == sim.web.version_at([page], 2.5)[0]


def _health_params(**kw):
    return _params(**{"n_urls": 2000, "n_hosts": 4, "health_min_pages": 50, **kw})


def test_health_draws_leave_every_other_attribute_of_the_web_alone():
    plain, sick = Simulation(_health_params()).web, Simulation(_health_params(
        quota_host_share=0.5, throttle_host_share=0.5)).web
    for name in ("size", "crawl_delay_s", "max_fetches", "validator", "publish_hour"):
        np.testing.assert_array_equal(getattr(plain.hosts, name), getattr(sick.hosts, name))
    np.testing.assert_array_equal(plain.pages.lam, sick.pages.lam)
    assert (plain.hosts.quota == -1).all() and (plain.hosts.throttle_s == 0).all()
    big = sick.hosts.size >= 50
    # every eligible host is one or the other, never both, and small ones are neither
    assert ((sick.hosts.quota >= 0) ^ (sick.hosts.throttle_s > 0))[big].all()
    assert (sick.hosts.quota[~big] == -1).all() and (sick.hosts.throttle_s[~big] == 0).all()


def test_quota_host_answers_503_beyond_its_hidden_quota_and_slows_down_before():
    sim = Simulation(_health_params(quota_host_share=1.0, quota_per_page=(0.05, 0.05)))
    hs, pg = sim.web.hosts, sim.web.pages
    h = int(np.argmax(hs.size))
    quota = int(hs.quota[h])
    assert quota == max(5, round(hs.size[h] * 0.05)) and quota >= 20
    urls = pg.url[pg.host == h][:quota + 4]
    times = 0.2 + np.arange(len(urls)) * 60.0 / 86400
    res = sim.step(0, _schedule(urls, times))
    log = res.fetch_log.to_pandas()
    assert (log.status.iloc[:quota] == 200).all() and (log.status.iloc[quota:] == 503).all()
    assert log.retry_after.isna().all()  # silent: no Retry-After
    assert res.record["over_quota"] == 4 and res.record["status_503"] == 4
    served = log.elapsed_ms.iloc[:quota].to_numpy(float)
    quarter = quota // 4
    # slower near the quota (x1 at the start, up to x4 at the quota)
    assert np.median(served[-quarter:]) > 2.0 * np.median(served[:quarter])
    # the next day the count starts again
    log2 = sim.step(1, _schedule(urls[:quota], 1.2 + np.arange(quota) * 60.0 / 86400)).fetch_log
    assert set(log2.column("status").to_pylist()) == {200}


def test_a_recovered_host_lifts_its_quota_from_its_day():
    sim = Simulation(_health_params(quota_host_share=1.0, quota_per_page=(0.01, 0.01),
                                    quota_recover_share=1.0, quota_recover_day=2))
    hs, pg = sim.web.hosts, sim.web.pages
    h = int(np.argmax(hs.size))
    urls = pg.url[pg.host == h][:int(hs.quota[h]) + 5]
    spaced = np.arange(len(urls)) * 60.0 / 86400
    statuses = [set(sim.step(d, _schedule(urls, d + 0.2 + spaced)).fetch_log
                    .column("status").to_pylist()) for d in range(3)]
    assert 503 in statuses[0] and 503 in statuses[1] and statuses[2] == {200}


def test_throttle_host_answers_429_with_retry_after_seconds():
    sim = Simulation(_health_params(throttle_host_share=1.0, throttle_interval_s=(300.0, 300.0)))
    hs, pg = sim.web.hosts, sim.web.pages
    h = int(np.argmax(hs.size))
    assert hs.throttle_s[h] == 300.0 and hs.quota[h] == -1
    urls = pg.url[pg.host == h][:4]
    offsets = np.array([0.0, 100.0, 420.0, 1000.0]) / 86400  # gaps 100 s, 320 s, 580 s
    log = sim.step(0, _schedule(urls, 0.3 + offsets)).fetch_log.to_pandas()
    assert list(log.status) == [200, 429, 200, 200]
    assert list(log.retry_after) == [None, "200", None, None]
    assert sim.metrics()["status_429"] == 1


def test_health_params_are_validated():
    for bad in (dict(quota_host_share=0.7, throttle_host_share=0.5),
                dict(quota_per_page=(0.0, 0.1)), dict(throttle_interval_s=(10.0, 5.0)),
                dict(quota_recover_day=-2), dict(health_min_pages=1),
                dict(quota_recover_share=1.5)):
        with pytest.raises(ValueError):
            _health_params(**bad)
