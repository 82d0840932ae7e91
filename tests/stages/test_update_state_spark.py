"""update_state in a real local Spark session: trust, signals, health, audit, rebuild."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest

from jobs import metrics, rebuild_state, update_state
from jobs.runlog import read_stage_record
from tests.conftest import make_config
from tests.tiny_web import fetch, write

D1, D2, D3 = "2026-11-01", "2026-11-02", "2026-11-03"
LM0 = "Sun, 01 Nov 2026 00:00:00 GMT"


def _build(root):
    a = [f"https://a.example/p{i}" for i in range(4)]          # honest ETag
    f = [f"https://f.example/p{i}" for i in range(3)]          # frozen Last-Modified
    s, e = "https://s.example/x", "https://e.example/y"       # push signals; errors
    day1 = [fetch(u, "2026-11-01T01:00", etag=f'"{u[-2:]}1"', h=f"{u}-1") for u in a]
    day1 += [fetch(u, "2026-11-01T02:00", lm=LM0, h=f"{u}-1") for u in f]
    day1 += [fetch(s, "2026-11-01T03:00", h="s1"), fetch(e, "2026-11-01T04:00", h="e1")]
    write(root, "fetch_logs", day1, dt=D1)
    day2 = [fetch(u, "2026-11-02T01:00", etag=f'"{u[-2:]}2"', h=f"{u}-2", conditional=True)
            for u in a[:2]]
    day2 += [fetch(u, "2026-11-02T01:00", status=304, conditional=True) for u in a[2:]]
    day2 += [fetch(u, "2026-11-02T02:00", status=304, lm=LM0, conditional=True) for u in f]
    day2 += [fetch(s, "2026-11-02T12:00", h="s2")]
    day2 += [fetch(e, f"2026-11-02T0{k}:00", status=503, nbytes=0) for k in range(4)]
    write(root, "fetch_logs", day2, dt=D2)
    day3 = [fetch(a[2], "2026-11-03T01:00", status=304, conditional=True),
            fetch(a[3], "2026-11-03T01:00", etag='"p33"', h=f"{a[3]}-3", conditional=True)]
    # Validator audits (lane refresh): full fetches of the frozen host find new content under
    # the same Last-Modified. They are not freshness audits.
    day3 += [fetch(u, "2026-11-03T02:00", lm=LM0, h=f"{u}-3") for u in f]
    day3 += [fetch(e, f"2026-11-03T0{k}:00", h="e1") for k in range(1, 4)]
    # Freshness audits (lane audit), measurement-only. Stored hashes before day 3: a/p0 and
    # a/p1 "-2" (day 2), a/p3 "-1" (day-2 304). a/p0 fresh; a/p1 stale; a/p3 stale at 00:30
    # (before the policy's 01:00 fetch got "-3"), fresh at 05:00 (after it).
    audit = lambda u, at, h: {**fetch(u, at, etag='"zz"', h=h), "lane": "audit"}  # noqa: E731
    day3 += [audit(a[0], "2026-11-03T03:00", f"{a[0]}-2"), audit(a[1], "2026-11-03T03:00", f"{a[1]}-3"),
             audit(a[3], "2026-11-03T00:30", f"{a[3]}-3"), audit(a[3], "2026-11-03T05:00", f"{a[3]}-3")]
    write(root, "fetch_logs", day3, dt=D3)
    ts = lambda x: pd.Timestamp(x, tz="UTC")  # noqa: E731
    write(root, "signals", [{"url": s, "signaled_at": ts("2026-11-02T06:00"), "source": "feed"},
                            {"url": s, "signaled_at": ts("2026-11-02T07:00"), "source": "telepathy"},
                            {"url": "https://unknown.example/z", "signaled_at": ts("2026-11-02T07:00"),
                             "source": "sitemap"}], dt=D2)
    write(root, "signals", [{"url": s, "signaled_at": ts("2026-11-03T05:00"), "source": "feed"}],
          dt=D3)


def _utc(ts):
    ts = pd.Timestamp(ts)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts


@pytest.fixture(scope="module")
def three_days(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("upd"))
    _build(root)
    cfg = make_config(root, "signals.min_scored=1", "signals.min_accuracy=0.6",
                      "health.min_fetches=3", "audit.sample_rate=1.0")
    records = {d: update_state.run(cfg, d, spark, bootstrap=(d == D1)) for d in (D1, D2, D3)}
    read = lambda t, d: pd.read_parquet(os.path.join(root, t, f"dt={d}"))  # noqa: E731
    return {"cfg": cfg, "root": root, "records": records, "read": read}


def test_304s_count_only_once_the_host_has_earned_trust(three_days):
    read = three_days["read"]
    h2 = read("hosts", D2).set_index("host")
    assert h2.loc["a.example", "validator_class"] == "honest_etag"
    assert h2.loc["a.example", "trust_etag"] and h2.loc["a.example", "audit_wanted"]
    assert h2.loc["a.example", "ev_304_ignored"] == 2   # day-2 304s came before trust
    s2 = read("state", D2).set_index("url")
    assert s2.loc["https://a.example/p2", "n_observations"] == 0
    s3 = read("state", D3).set_index("url")
    p2 = s3.loc["https://a.example/p2"]
    assert p2.n_observations == 1 and p2.n_changes == 0   # trusted 304 on day 3
    assert p2.unch_t == pytest.approx(2.0, abs=1e-9)      # interval from the day-1 copy
    assert s3.loc["https://a.example/p3", "n_changes"] == 1


def test_frozen_last_modified_is_caught_by_full_fetches(three_days):
    read = three_days["read"]
    h2, h3 = read("hosts", D2).set_index("host"), read("hosts", D3).set_index("host")
    assert h2.loc["f.example", "validator_class"] == "unverified"
    assert not h2.loc["f.example", "trust_lm"] and h2.loc["f.example", "ev_304_ignored"] == 3
    f = h3.loc["f.example"]
    assert f.validator_class == "frozen_lm" and not f.trust_lm and not f.audit_wanted
    assert f.ev_lm_frozen == pytest.approx(3 * 2 ** (-0.0), abs=1e-9)
    s3 = read("state", D3).set_index("url")
    assert (s3.loc[[u for u in s3.index if "f.example" in u], "n_changes"] == 1).all()


def test_signals_are_scored_trusted_and_set_pending(three_days):
    read, recs = three_days["read"], three_days["records"]
    h2 = read("hosts", D2).set_index("host").loc["s.example"]
    assert h2.ev_sig_received == 1 and h2.ev_sig_correct == 1 and h2.signal_trusted
    assert h2.signal_accuracy == pytest.approx(2 / 3)
    q = pd.read_parquet(os.path.join(three_days["root"], "quarantine", f"dt={D2}",
                                     "source=signals"))
    assert q.reason.tolist() == ["bad_source"] and recs[D2]["quarantined_signals"] == 1
    s2 = read("state", D2).set_index("url").loc["https://s.example/x"]
    assert pd.isna(s2.pending_signal_at) and s2.n_changes == 1
    s3 = read("state", D3).set_index("url").loc["https://s.example/x"]
    assert _utc(s3.pending_signal_at) == pd.Timestamp("2026-11-03T05:00", tz="UTC")
    assert recs[D3]["urls_pending_signal"] == 1
    assert "https://unknown.example/z" not in read("state", D2).url.tolist()


def test_served_rate_limit_is_cut_then_probes_back_up(three_days):
    """e.example answers 503 to all 4 fetches of day 2 and serves all 3 of day 3; its
    politeness cap is the default delay's 86400 / 10 = 8640 a day (jobs.core.host_health)."""
    read = three_days["read"]
    e2 = read("hosts", D2).set_index("host").loc["e.example"]
    assert (e2.fetches_today, e2.errors_5xx_today, e2.throttled_today) == (4, 4, 4)
    assert e2.nominal_cap == 8640 and e2.health_verdict == "bad"
    assert e2.rate_limit == 1.0 and e2.served_ceiling == 0  # 0.9 x 0 served, the floor
    assert e2.cap_factor == pytest.approx(1 / 8640)
    e3 = read("hosts", D3).set_index("host").loc["e.example"]
    assert e3.errors_5xx_today == 0 and e3.health_verdict == "grown"
    # Its limit after the bad day was the floor, 1 visit (the first probe: 10 % of what it
    # served, at least 1 visit, not 2 % of the cap: 173 visits to a host that served none).
    # Day 3 served 3 above its ceiling of 0: the next limit is 3 + rate_probe_growth x 3.
    assert e3.rate_limit == pytest.approx(3 + 4 * 3) and e3.probe_step == pytest.approx(12.0)
    assert e3.cap_factor == pytest.approx(e3.rate_limit / 8640)
    a3 = read("hosts", D3).set_index("host").loc["a.example"]
    assert a3.cap_factor == 1.0 and a3.rate_limit == a3.nominal_cap == 8640
    rec = three_days["records"][D2]
    assert rec["hosts_limited"] >= 1 and rec["host_throttled"] == 4


def test_audit_freshness_in_run_record(three_days):
    rec = read_stage_record(three_days["cfg"], D3, "update_state")
    # Only lane-audit rows are scored (the policy's own full fetches of a/p3, f/*, e/y are
    # not), each against the stored hash as of its fetch time: 4 scored, 2 fresh.
    assert rec["audit_n"] == 4 and rec["audit_fresh"] == 2
    assert rec["audit_freshness"] == pytest.approx(2 / 4)
    assert rec["audit_freshness_lo"] < 2 / 4 < rec["audit_freshness_hi"]
    assert rec["hosts_by_class"]["frozen_lm"] == 1
    # No audit on days 1 and 2 (sample_rate 1.0 does not make policy fetches audits).
    assert three_days["records"][D2]["audit_n"] == 0


def test_audit_rows_are_measurement_only(three_days):
    read = three_days["read"]
    s2, s3 = read("state", D2).set_index("url"), read("state", D3).set_index("url")
    cols = ["content_hash", "etag", "last_fetch_at", "last_status", "n_fetches",
            "n_observations", "n_changes", "interval_s", "unch_t"]
    # a/p0, a/p1: audited only on day 3; nothing the policy sees moved (their stats are
    # only decayed by one day, which is ~1 at a 90-day half-life).
    for u in ("https://a.example/p0", "https://a.example/p1"):
        before, after = s2.loc[u, cols], s3.loc[u, cols]
        for c in cols:
            if c == "unch_t":
                assert after[c] == pytest.approx(before[c], rel=1e-2)
            else:
                assert after[c] == before[c], (u, c)
    # a/p3: the policy's 01:00 fetch counts; the 05:00 audit does not move last_fetch_at.
    p3 = s3.loc["https://a.example/p3"]
    assert p3.content_hash == "https://a.example/p3-3" and p3.etag == '"p33"'
    assert _utc(p3.last_fetch_at) == pd.Timestamp("2026-11-03T01:00", tz="UTC")
    assert p3.n_fetches == s2.loc["https://a.example/p3", "n_fetches"] + 1


GEN_DAYS = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]


def _add_stale_row(root, day_before, day):
    """Re-deliver one fetch of ``day_before`` in ``day``'s logs an hour earlier: older than
    its URL's last fetch, so both the daily run and the rebuild quarantine it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    before = pq.read_table(os.path.join(root, "fetch_logs", f"dt={day_before}"))
    pdf = before.to_pandas()
    row = pdf[pdf["status"] == 200].sort_values(["url", "fetched_at"]).tail(1).copy()
    row["fetched_at"] = row["fetched_at"] - pd.Timedelta(hours=1)
    pq.write_table(pa.Table.from_pandas(row, schema=before.schema, preserve_index=False),
                   os.path.join(root, "fetch_logs", f"dt={day}", "part-stale.parquet"))
    return row["url"].iloc[0]


def _add_importance_duplicates(root):
    """Two more weights of one listed URL, one below and one above its own: the daily fold
    (pandas) and the rebuild (a Spark aggregate) must both keep the largest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    imp = pd.read_parquet(os.path.join(root, "importance"))
    url, w = imp["url"].iloc[0], float(imp["importance"].iloc[0])
    pq.write_table(pa.table({"url": [url, url], "importance": [w / 2, w * 2 + 1]}),
                   os.path.join(root, "importance", "part-dup.parquet"))
    return url, w * 2 + 1


def _quarantine(root, day):
    """{source: sorted rows} of quarantine/dt=day (None: no directory)."""
    out = {}
    for source in ("fetch_logs", "importance", "signals"):
        path = os.path.join(root, "quarantine", f"dt={day}", f"source={source}")
        out[source] = (None if not os.path.isdir(path) else
                       sorted(map(tuple, pd.read_parquet(path)[["reason", "url", "row_json"]]
                                  .itertuples(index=False))))
    return out


@pytest.fixture(scope="module")
def rebuilt(spark, tmp_path_factory):
    """Four generated days with a stale row on the last, run daily, then rebuilt in place."""
    from lab.tools.generate_sample import generate_sample

    root = str(tmp_path_factory.mktemp("gen"))
    generate_sample(root, urls=240, hosts=8, days=4, end_date=GEN_DAYS[-1], seed=3,
                    signal_days=3)
    stale_url = _add_stale_row(root, GEN_DAYS[-2], GEN_DAYS[-1])
    dup_url = _add_importance_duplicates(root)
    cfg = make_config(root, "spark.rebuild_rows_per_bucket=400")  # several buckets
    daily = {d: update_state.run(cfg, d, spark, bootstrap=(d == GEN_DAYS[0])) for d in GEN_DAYS}
    read = lambda t, d: pd.read_parquet(os.path.join(root, t, f"dt={d}"))  # noqa: E731
    inc = {"state": read("state", GEN_DAYS[-1]),
           "hosts": {d: read("hosts", d) for d in GEN_DAYS},
           "quarantine": {d: _quarantine(root, d) for d in GEN_DAYS}}
    # A rebuild must ignore whatever state/hosts precede its first day.
    for t in ("state", "hosts"):
        shutil.copytree(os.path.join(root, t, f"dt={GEN_DAYS[-1]}"),
                        os.path.join(root, t, "dt=2024-01-01"))
    # ... and rewrite every day's quarantine, records and hosts, but only the last state.
    shutil.rmtree(os.path.join(root, "quarantine"))
    for d in GEN_DAYS:
        shutil.rmtree(os.path.join(root, "hosts", f"dt={d}"))
        os.remove(os.path.join(root, "_runs", f"dt={d}", "update_state.json"))
    for d in GEN_DAYS[:-1]:
        shutil.rmtree(os.path.join(root, "state", f"dt={d}"))
    # The second day was planned and published: its metrics row holds a plan to keep.
    planned = metrics.plan_columns(cfg, {"due_total": 60, "expected_freshness": 0.7},
                                   {"planned_total": 50, "planned_refresh": 50, "planned_fast": 0,
                                    "planned_discovery": 0, "hosts": 8}, 50, "fixed")
    metrics.write(cfg, GEN_DAYS[1], metrics.metrics_row(cfg, GEN_DAYS[1], daily[GEN_DAYS[1]],
                                                        None, planned, "build_schedule"))
    records = rebuild_state.run(cfg, GEN_DAYS[0], GEN_DAYS[-1], spark)
    return {"cfg": cfg, "root": root, "daily": daily, "inc": inc, "read": read,
            "records": dict(zip(GEN_DAYS, records)), "stale_url": stale_url,
            "dup_url": dup_url}


def _same(a, b, key):
    a = a.sort_values(key).reset_index(drop=True)
    b = b.sort_values(key).reset_index(drop=True)[a.columns]
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9)


def test_rebuild_equals_incremental_on_generated_data(rebuilt):
    read, inc = rebuilt["read"], rebuilt["inc"]
    _same(inc["state"], read("state", GEN_DAYS[-1]), "url")
    for d in GEN_DAYS:
        _same(inc["hosts"][d], read("hosts", d), "host")
        assert rebuilt["records"][d] == rebuilt["daily"][d], d
        assert read_stage_record(rebuilt["cfg"], d, "update_state") == rebuilt["daily"][d], d
    state = inc["state"]
    assert len(state) > 100 and np.isfinite(state.lambda_hat).all()
    assert (state.lambda_lo <= state.lambda_hat + 1e-12).all()
    assert state.lambda_prior.notna().mean() > 0.5   # host priors were fitted and applied
    dup_url, dup_weight = rebuilt["dup_url"]
    assert state.set_index("url").loc[dup_url, "importance"] == dup_weight
    # Only the last day's state is written; the hosts of a day are its own.
    assert [p for p in sorted(os.listdir(os.path.join(rebuilt["root"], "state")))
            if p.startswith("dt=")] == ["dt=2024-01-01", f"dt={GEN_DAYS[-1]}"]
    assert {str(u) for u in read("hosts", GEN_DAYS[1])["updated_dt"]} == {GEN_DAYS[1]}


def test_rebuild_writes_metrics_for_every_day(rebuilt):
    cfg = rebuilt["cfg"]
    for d in GEN_DAYS:
        row, rec = metrics.read(cfg, d), rebuilt["records"][d]
        assert row["written_by"] == "rebuild_state", d
        assert {c: row[c] for c in metrics.STATE_COLUMNS} == {
            c: rec[c] for c in metrics.STATE_COLUMNS}, d
        kept = d == GEN_DAYS[1]
        assert (row["planned_total"], row["expected_freshness"]) == (
            (50, 0.7) if kept else (None, None)), d
    assert metrics.read(cfg, GEN_DAYS[-1])["audit_n"] == rebuilt["daily"][GEN_DAYS[-1]]["audit_n"]
    # What the day's fetches bought (the same figures daily and rebuilt, above).
    last = rebuilt["daily"][GEN_DAYS[-1]]
    assert 0 < last["fetches_unchanged"] <= last["fetches_folded"]
    assert 0 < last["fetches_304"] <= last["fetches_folded"] and last["bytes_saved_304"] > 0
    assert rebuilt["read"]("state", GEN_DAYS[-1])["content_bytes"].notna().mean() > 0.5


def test_rebuild_quarantines_a_stale_row_like_the_daily_run(rebuilt):
    root, last = rebuilt["root"], GEN_DAYS[-1]
    for d in GEN_DAYS:
        assert _quarantine(root, d) == rebuilt["inc"]["quarantine"][d], d
    stale = [r for r in _quarantine(root, last)["fetch_logs"] if r[0] == "stale_fetched_at"]
    assert [r[1] for r in stale] == [rebuilt["stale_url"]]
    assert rebuilt["records"][last]["quarantined_fetch_logs"] >= 1
    # Folding it would have rewound the URL's last fetch.
    row = rebuilt["read"]("state", last).set_index("url").loc[rebuilt["stale_url"]]
    assert _utc(row.last_fetch_at) > pd.Timestamp(GEN_DAYS[-2], tz="UTC")


def test_hierarchical_priors_pick_template_then_class_then_host(spark, tmp_path):
    """A template with enough observed URLs keeps its own EM prior; a lone feed borrows the
    prior of every site's feed (its class), not its host's; the Spark group keys equal
    group_key_from_url's."""
    from jobs.core.estimators_shrinkage import fit_group_priors, group_key_from_url
    from jobs.core.estimators_stats import STATS_COLUMNS

    def page(url, host, changed, unchanged, interval):
        row = dict.fromkeys(STATS_COLUMNS, 0.0)
        row.update(url=url, host=host, chg_n_05=float(changed), chg_t_05=changed * interval,
                   unch_n=float(unchanged), unch_t=unchanged * interval)
        return row

    rows = [page(f"https://a.example/news/story-{i}", "a.example", 2 + i % 3, 8, 1.0)
            for i in range(6)]                                        # slow news on a
    rows += [page(f"https://{h}.example/feed", f"{h}.example", 9 + k, 1, 0.5)
             for k, h in enumerate("abcde")]                          # fast feeds everywhere
    rows += [page(f"https://{h}.example/shop/item-{i}", f"{h}.example", 1, 12, 2.0)
             for h in "bcde" for i in range(3)]                       # slow shops elsewhere
    pdf = pd.DataFrame(rows)
    cfg = make_config(str(tmp_path), "estimation.prior_level=hierarchical")
    keyed = update_state.with_group_keys(cfg, spark.createDataFrame(pdf))
    got = (update_state.with_group_priors(cfg, keyed)
           .select("url", "prior_shape", "prior_rate").toPandas().set_index("url"))

    stats = pdf[list(STATS_COLUMNS)]
    for level, url in (("template", "https://a.example/news/story-0"),
                       ("class", "https://a.example/feed")):
        keys = group_key_from_url(pdf["url"], level)
        priors = fit_group_priors(stats, keys.to_numpy(object), min_urls=3)
        want = priors.loc[keys[pdf["url"] == url].iloc[0]]
        assert want["method"] == "em"
        np.testing.assert_allclose(got.loc[url, ["prior_shape", "prior_rate"]].to_numpy(float),
                                   want[["prior_shape", "prior_rate"]].to_numpy(float), rtol=1e-9)
    # The feed's class prior is a fast one; a's host prior (mostly slow news) is not.
    feed = got.loc["https://a.example/feed"]
    host = fit_group_priors(stats, pdf["host"].to_numpy(object), min_urls=3).loc["a.example"]
    assert feed.prior_shape / feed.prior_rate > 3 * host.prior_mean

    keyed = spark.createDataFrame(pdf[["url", "host"]]).select(
        "url", *[k.alias(f"k{i}") for i, k in enumerate(update_state._group_keys(cfg))])
    keyed = keyed.toPandas().set_index("url").loc[pdf["url"]]
    pure_class = group_key_from_url(pdf["url"], "class").to_numpy(object)
    assert (keyed["k1"].to_numpy(object) == pure_class).all()
    assert sorted(set(pure_class)) == ["*/feed", "*/news", "*/shop"]


def test_a_large_group_is_fitted_on_its_hash_sample_and_a_small_one_whole(spark, tmp_path):
    """A group above estimation.prior_fit_max_urls is fitted on the URLs whose sample unit
    is below max / size (drawn in Spark before the shuffle); a smaller group on all of its
    URLs. The fits equal fit_group_priors on exactly those rows."""
    from jobs.core.estimators_shrinkage import fit_group_priors
    from jobs.core.estimators_stats import STATS_COLUMNS

    rng = np.random.default_rng(5)
    hosts = ["big.example"] * 400 + ["small.example"] * 30
    rows = []
    for i, host in enumerate(hosts):
        row = dict.fromkeys(STATS_COLUMNS, 0.0)
        changed = int(rng.integers(0, 10))
        # big.example's rates drift with i, so a sample's fit differs from the whole's
        interval = 0.2 + (i % 400) / 100.0 if host == "big.example" else 1.0
        row.update(url=f"https://{host}/p{i}", host=host, chg_n_05=float(changed),
                   chg_t_05=changed * interval, unch_n=float(10 - changed),
                   unch_t=(10 - changed) * interval)
        rows.append(row)
    # URLs never observed: they count in their group's size but are left out of the fit
    # (a group of only such URLs gets no prior), with the same fits as the pure function's.
    for i in range(50):
        rows.append({**dict.fromkeys(STATS_COLUMNS, 0.0), "url": f"https://big.example/u{i}",
                     "host": "big.example"})
    rows += [{**dict.fromkeys(STATS_COLUMNS, 0.0), "url": f"https://idle.example/u{i}",
              "host": "idle.example"} for i in range(5)]
    pdf = pd.DataFrame(rows)
    sdf = spark.createDataFrame(pdf)
    cfg = make_config(str(tmp_path), "estimation.prior_level=host",
                      "estimation.prior_fit_max_urls=100")
    got = (update_state.with_group_priors(cfg, update_state.with_group_keys(cfg, sdf))
           .groupBy("host")
           .agg({"prior_shape": "max", "prior_rate": "max"}).toPandas().set_index("host"))
    unit = (sdf.select("url", update_state.prior_sample_unit().alias("u")).toPandas()
            .set_index("url")["u"])
    size = pdf.groupby("host")["url"].transform("size").to_numpy(float)
    kept = pdf[unit.loc[pdf["url"]].to_numpy() < 100.0 / size]
    assert 60 <= (kept["host"] == "big.example").sum() <= 140
    assert (kept["host"] == "small.example").sum() == 30
    assert ((kept["host"] == "big.example") & kept["url"].str.contains("/u")).any()
    assert got.loc["idle.example"].isna().all()  # no observation: no prior
    for host in ("big.example", "small.example"):
        mine = kept[kept["host"] == host].sort_values("url")
        want = fit_group_priors(mine[list(STATS_COLUMNS)].astype(float),
                                mine["host"].to_numpy(object), min_urls=3).loc[host]
        assert want["method"] == "em"
        np.testing.assert_allclose(got.loc[host, ["max(prior_shape)", "max(prior_rate)"]]
                                   .to_numpy(float),
                                   want[["prior_shape", "prior_rate"]].to_numpy(float),
                                   rtol=1e-9)
    whole = fit_group_priors(pdf[list(STATS_COLUMNS)], pdf["host"].to_numpy(object),
                             min_urls=3).loc["big.example"]
    assert not np.isclose(whole["prior_rate"], got.loc["big.example", "max(prior_rate)"],
                          rtol=1e-3)  # the sample mattered


def test_spark_group_keys_equal_the_pure_ones_on_tricky_urls(spark, tmp_path):
    """update_state's Spark group keys are built from the one URL_PATTERN and ID_PATTERN of
    jobs.core.estimators_shrinkage and agree with group_key_from_url, including the front
    page spelled https://h, https://h/ and https://h/?q (one template: Spark used to file the
    bare form apart)."""
    from jobs.core.estimators_shrinkage import group_key_from_url
    from tests.core.test_estimators import GROUP_KEY_CASES

    pdf = pd.DataFrame([(u, h) for u, h, *_ in GROUP_KEY_CASES], columns=["url", "host"])
    cfg = make_config(str(tmp_path), "estimation.prior_level=hierarchical")
    got = spark.createDataFrame(pdf).select(
        *[k.alias(f"k{i}") for i, k in enumerate(update_state._group_keys(cfg))]).toPandas()
    for i, level in enumerate(("template", "class", "host")):
        want = group_key_from_url(pdf["url"], level, hosts=pdf["host"]).tolist()
        assert got[f"k{i}"].tolist() == want, level
        assert want == [case[1 + ("host", "template", "class").index(level)]
                        for case in GROUP_KEY_CASES]


@pytest.mark.parametrize("level", ["hierarchical", "template", "class", "host"])
def test_update_state_and_the_study_choose_the_same_prior(spark, tmp_path, level):
    """One prior choice (jobs.core.estimators_shrinkage.choose_prior) in both engines: Spark's
    joined fits and the study's pandas fits give every URL the same prior, over templates with
    an EM fit, pooled-only and no prior at all (a group that has no prior must not hide a
    pooled prior further down the chain)."""
    from jobs.core.estimators_stats import STATS_COLUMNS
    from lab.studies.study_priors import priors_for

    def page(url, changed, unchanged, interval):
        row = dict.fromkeys(STATS_COLUMNS, 0.0)
        row.update(url=url, host=url.split("/")[2], chg_n_05=float(changed),
                   chg_t_05=changed * interval, unch_n=float(unchanged),
                   unch_t=unchanged * interval)
        return row

    rows = [page(f"https://a.example/news/s-{i}", 2 + i % 3, 8, 1.0) for i in range(6)]
    rows += [page(f"https://{h}.example/feed", 9 + k, 1, 0.5) for k, h in enumerate("abcde")]
    rows += [page(f"https://{h}.example/shop/i-{i}", 1, 12, 2.0) for h in "bcd" for i in range(3)]
    rows += [page("https://a.example/about", 0, 2, 1.0),           # seen, never changed: pooled
             page("https://a.example/", 3, 3, 1.0), page("https://b.example", 1, 0, 1.0),
             page("https://b.example/?p=2", 2, 2, 1.0),            # front pages: one template
             page("https://z.example/lone", 0, 0, 0.0),            # unseen, alone: no prior
             page("https://y.example/once", 1, 0, 0.3),            # one observation: none
             page("https://q.example/wiki/1", 1, 1, 1.0),          # template and host: none,
             page("https://r.example/wiki/2", 2, 2, 1.0)]          # class */wiki: pooled
    pdf = pd.DataFrame(rows)
    cfg = make_config(str(tmp_path), f"estimation.prior_level={level}")
    keyed = update_state.with_group_keys(cfg, spark.createDataFrame(pdf))
    got = (update_state.with_group_priors(cfg, keyed)
           .select("url", "prior_shape", "prior_rate").toPandas().set_index("url").loc[pdf["url"]])
    shape, rate = priors_for(pdf, level, min_urls=cfg.estimation.prior_min_urls)
    np.testing.assert_allclose(got["prior_shape"].to_numpy(float), shape, rtol=1e-9)
    np.testing.assert_allclose(got["prior_rate"].to_numpy(float), rate, rtol=1e-9)
    assert np.isnan(shape).any() and not np.isnan(shape).all()


def test_a_day_half_the_fleet_upgrades_its_fingerprint_through_update_state(spark, tmp_path):
    """Day 1: logs written before fingerprint_version existed (no column). Day 2: one
    fetcher upgraded (version 2, every hash it computes differs), the other did not; the day
    mixes versions and is folded, each fetch against the stored hash of its own version:
    the upgraded fetcher's pages re-base (no change counted), the old fetcher's real changes
    are still seen."""
    from jobs import validate_logs

    root = str(tmp_path)
    urls = [f"https://h{i % 2}.example/p{i}" for i in range(8)]
    write(root, "fetch_logs", [fetch(u, "2026-11-01T01:00", h=f"{u}-v1") for u in urls], dt=D1)
    changed = {urls[1], urls[2]}  # changed for real on day 2
    new = [{**fetch(u, "2026-11-02T01:00", h=f"{u}-v2" + ("-new" if u in changed else "")),
            "fingerprint_version": 2} for u in urls[0::2]]
    old = [{**fetch(u, "2026-11-02T01:00", h=f"{u}-v1" + ("-new" if u in changed else "")),
            "fingerprint_version": 1} for u in urls[1::2]]
    write(root, "fetch_logs", new, dt=D2, name="part-upgraded.parquet")
    write(root, "fetch_logs", old, dt=D2, name="part-old.parquet")
    cfg = make_config(root)
    validate_logs.run(cfg, D2)  # a mixed day is accepted
    update_state.run(cfg, D1, spark, bootstrap=True)
    rec = update_state.run(cfg, D2, spark)
    s2 = pd.read_parquet(os.path.join(root, "state", f"dt={D2}")).set_index("url")
    assert rec["fetches_rebased"] == 4 and rec["fetches_folded"] == 8
    assert s2.loc[urls[0::2], "fingerprint_version"].tolist() == [2] * 4
    assert s2.loc[urls[1::2], "fingerprint_version"].tolist() == [1] * 4
    # No false change for the upgraded pages (urls[2] changed for real, but no trusted
    # validator could tell: no evidence either way); the old fetcher's pages compare.
    assert s2.loc[urls[0::2], "n_changes"].tolist() == [0] * 4
    assert s2.loc[urls[0::2], "n_observations"].tolist() == [0] * 4
    assert s2.loc[urls[1::2], "n_observations"].tolist() == [1] * 4
    assert sorted(s2.index[s2["n_changes"] == 1]) == [urls[1]]
    assert (s2.loc[urls[0::2], "content_hash"].str.endswith(("-v2", "-v2-new"))).all()
    m = metrics.read(cfg, D2)
    assert m["fetches_rebased"] == 4
