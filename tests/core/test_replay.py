"""jobs.core.replay without Spark: a rebuild bucket's day loop equals update_state's day by
day (fold_day over all URLs, update_hosts over all hosts), bucket by bucket."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobs.config import load_config
from jobs.core import observations, replay, state_update, trust
from jobs.params import trust_params, update_params

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"]
EV = list(observations.EVIDENCE_COLUMNS)
FLAGS = ["trust_etag", "trust_lm", "signal_trusted"]
LAMBDAS = ["lambda_hat", "lambda_lo", "lambda_hi", "lambda_prior"]


def _row(url, at, status=200, etag=None, lm=None, h=None, lane="refresh", elapsed=120):
    return {"url": url, "host": url.split("/")[2], "fetched_at": pd.Timestamp(at, tz="UTC"),
            "status": status, "conditional": status == 304, "etag": etag, "last_modified": lm,
            "content_hash": h, "lane": lane, "elapsed_ms": elapsed, "dt": at[:10]}


def _web(seed=7):
    """Hand-made cases plus a random web: honest ETags (304s trusted only from the day after
    trust is earned), a frozen Last-Modified, push signals, errors, audits, a stale row,
    hosts appearing late, latency nulls."""
    rng = np.random.default_rng(seed)
    rows, sigs = [], []
    a = [f"https://a.example/p{i}" for i in range(4)]
    lm0 = "Sun, 01 Nov 2026 00:00:00 GMT"
    rows += [_row(u, "2026-11-01T01:00", etag=f'"{i}1"', h=f"{u}-1") for i, u in enumerate(a)]
    rows += [_row(u, "2026-11-02T01:00", etag=f'"{i}2"', h=f"{u}-2") for i, u in enumerate(a[:2])]
    rows += [_row(u, "2026-11-02T01:00", status=304) for u in a[2:]]
    rows += [_row(u, "2026-11-03T01:00", status=304) for u in a]
    rows += [_row(a[0], "2026-11-03T05:00", etag='"zz"', h=f"{a[0]}-2", lane="audit")]
    # Stale: re-delivered on day 4, older than a/p1's day-3 fetch.
    rows += [_row(a[1], "2026-11-02T23:00", etag='"old"', h="old")]
    rows[-1]["dt"] = "2026-11-04"
    f = [f"https://f.example/p{i}" for i in range(3)]
    rows += [_row(u, f"2026-11-0{d}T02:00", lm=lm0, h=f"{u}-{d if d != 2 else 1}")
             for d in (1, 2, 3) for u in f]
    s = "https://s.example/x"
    rows += [_row(s, "2026-11-01T03:00", h="s1"), _row(s, "2026-11-02T12:00", h="s2"),
             _row(s, "2026-11-04T12:00", h="s3")]
    sigs += [{"url": s, "host": "s.example", "signaled_at": pd.Timestamp(t, tz="UTC"),
              "dt": t[:10]} for t in ("2026-11-02T06:00", "2026-11-03T05:00")]
    sigs += [{"url": "https://nobody.example/z", "host": "nobody.example",
              "signaled_at": pd.Timestamp("2026-11-02T07:00", tz="UTC"), "dt": "2026-11-02"}]
    rows += [_row("https://e.example/y", f"2026-11-02T0{k}:00", status=503, elapsed=None)
             for k in range(4)]
    # Random pages on five hosts, two of which first appear on day 3.
    for k in range(5):
        for i in range(12):
            url, hash_v = f"https://r{k}.example/page/{i}", 0
            for d, day in enumerate(DAYS):
                if (k >= 3 and d < 2) or rng.random() < 0.25:
                    continue
                for n in range(rng.integers(1, 3)):
                    at = f"{day}T{rng.integers(0, 24):02d}:{rng.integers(0, 60):02d}"
                    status = rng.choice([200, 200, 304, 404, 503, 0])
                    hash_v += rng.random() < 0.4
                    elapsed = None if rng.random() < 0.2 else int(rng.integers(50, 3000))
                    rows.append(_row(url, at, status=int(status),
                                     etag=f'"{hash_v}"' if status == 200 and k % 2 else None,
                                     lm=lm0 if status == 200 and k == 2 else None,
                                     h=f"{url}-{hash_v}" if status == 200 else None,
                                     lane="audit" if rng.random() < 0.1 else "refresh",
                                     elapsed=elapsed))
                if rng.random() < 0.3:
                    sigs.append({"url": url, "host": f"r{k}.example", "dt": day,
                                 "signaled_at": pd.Timestamp(f"{day}T{rng.integers(0, 24):02d}:00",
                                                             tz="UTC")})
    return pd.DataFrame(rows), pd.DataFrame(sigs)


@pytest.fixture(scope="module")
def params():
    cfg = load_config(None, ["signals.min_scored=1", "signals.min_accuracy=0.6",
                             "health.min_fetches=3", "trust.min_confirmations=2"])
    return update_params(cfg), trust_params(cfg)


def _daily(logs, signals, up, tp):
    """update_state's day loop written out: one fold_day over all URLs and one update_hosts
    over all hosts per day, stale rows and trust joined as the Spark job joins them."""
    state, hosts, out = state_update.empty_state(), pd.DataFrame(columns=trust.HOST_COLUMNS), {}
    for d in DAYS:
        day = logs[logs["dt"] == d]
        last = pd.to_datetime(state.set_index("url")["last_fetch_at"], utc=True)
        stale = (day["fetched_at"] < day["url"].map(last)).to_numpy(bool)
        clean = day[~stale]
        flags = hosts.set_index("host")[FLAGS]
        rows = clean.join(flags, on="host")
        sig = signals[signals["dt"] == d].join(flags, on="host")
        folded = state_update.fold_day(state, rows, d, up, signals=sig)
        ev = folded.groupby("host")[EV].sum().astype(float)
        ev["urls_known"] = folded.groupby("host").size()
        st = clean["status"]
        health = clean.assign(fetches=1, timeouts=st == 0, errors_5xx=st >= 500,
                              throttled_429=st == 429, throttled=st.isin([429, 503]),
                              latency_n=clean["elapsed_ms"].notna()
                              ).groupby("host").agg(
            fetches=("fetches", "sum"), timeouts=("timeouts", "sum"),
            errors_5xx=("errors_5xx", "sum"), throttled_429=("throttled_429", "sum"),
            throttled=("throttled", "sum"),
            latency_sum_ms=("elapsed_ms", lambda x: x.sum(min_count=1)),
            latency_n=("latency_n", "sum"))
        today = ev.join(health, how="outer").rename_axis("host").reset_index()
        hosts = trust.update_hosts(hosts, today, d, tp)
        out[d] = {"folded": folded, "hosts": hosts, "stale": day[stale]}
        state = folded[state_update.STATE_COLUMNS]
    return out


def _by_bucket(logs, signals, up, tp, n_buckets):
    """replay() per host bucket, outputs concatenated (as the Spark job's output is)."""
    bucket = {h: i % n_buckets for i, h in enumerate(sorted(set(logs["host"])
                                                            | set(signals["host"])))}
    results = [replay.replay(logs[logs["host"].map(bucket) == b],
                             signals[signals["host"].map(bucket) == b], DAYS, up, tp)
               for b in range(n_buckets)]
    return {f: pd.concat([getattr(r, f) for r in results if len(getattr(r, f))],
                         ignore_index=True) for f in ("state", "hosts", "figures", "stale")}


def _sorted(df, key):
    return df.sort_values(key).reset_index(drop=True)


@pytest.mark.parametrize("n_buckets", [1, 3])
def test_replay_equals_the_daily_loop(params, n_buckets):
    logs, signals = _web()
    up, tp = params
    daily = _daily(logs, signals, up, tp)
    got = _by_bucket(logs, signals, up, tp, n_buckets)
    # λ columns are not compared: the caller estimates with the group priors afterwards.
    want = daily[DAYS[-1]]["folded"].drop(columns=LAMBDAS)
    pd.testing.assert_frame_equal(_sorted(got["state"][want.columns], "url"),
                                  _sorted(want, "url"), check_dtype=False)
    for d in DAYS:
        h = got["hosts"][got["hosts"]["dt"] == d].drop(columns="dt")
        pd.testing.assert_frame_equal(_sorted(h, "host"), _sorted(daily[d]["hosts"], "host"),
                                      check_dtype=False)
        fig = got["figures"][got["figures"]["dt"] == d].drop(columns="dt").sum()
        folded = daily[d]["folded"]
        assert fig.to_dict() == {
            "urls_known": len(folded), "urls_gone": int(folded["gone"].sum()),
            "urls_pending_signal": int(folded["pending_signal_at"].notna().sum()),
            "audit_n": int(folded["ev_audit_n"].sum()),
            "audit_fresh": int(folded["ev_audit_fresh"].sum()),
            "stale_rows": len(daily[d]["stale"]),
            "fetches_folded": int(folded["ev_fetches"].sum()),
            "fetches_304": int(folded["ev_304"].sum()),
            "fetches_unchanged": int(folded["ev_unchanged"].sum()),
            "bytes_saved_304": int(folded["ev_bytes_saved"].sum()),
            "fetches_rebased": int(folded["ev_rebased"].sum())}, d
        stale = got["stale"][got["stale"]["dt"] == d]
        assert sorted(stale["url"]) == sorted(set(daily[d]["stale"]["url"])), d
    # The web exercises what makes days depend on each other.
    assert sum(len(daily[d]["stale"]) for d in DAYS) >= 1
    h2 = daily[DAYS[1]]["hosts"].set_index("host")
    assert h2.loc["a.example", "trust_etag"] and h2.loc["a.example", "ev_304_ignored"] == 2
    assert daily[DAYS[-1]]["folded"]["ev_audit_n"].sum() > 0


def test_a_stale_row_is_left_out_and_reported_with_the_previous_fetch(params):
    logs, signals = _web()
    r = replay.replay(logs[logs["host"] == "a.example"], signals.iloc[0:0], DAYS, *params)
    stale = r.stale.set_index(["dt", "url"])
    assert list(stale.index) == [("2026-11-04", "https://a.example/p1")]
    assert stale.iloc[0]["last_fetch_at"] == pd.Timestamp("2026-11-03T01:00", tz="UTC")
    assert stale.iloc[0]["rows"] == 1
    p1 = r.state.set_index("url").loc["https://a.example/p1"]
    assert p1["last_fetch_at"] == pd.Timestamp("2026-11-03T01:00", tz="UTC")  # not rewound
    assert p1["content_hash"] == "https://a.example/p1-2"
    assert r.figures.set_index("dt")["stale_rows"].tolist() == [0, 0, 0, 1]
    # The stale row is no fetch of the day: health counts skip it.
    h4 = r.hosts[r.hosts["dt"] == DAYS[-1]].set_index("host")
    assert h4.loc["a.example", "fetches_today"] == 0


def test_trust_of_a_day_comes_from_the_hosts_of_the_day_before(params):
    """Day 2's 304s of a.example come before its trust (earned from day 2's changed ETags):
    ignored; day 3's are observations."""
    logs, signals = _web()
    r = replay.replay(logs[logs["host"] == "a.example"], signals.iloc[0:0], DAYS[:3], *params)
    hosts = r.hosts.set_index(["dt", "host"])
    assert not hosts.loc[(DAYS[0], "a.example"), "trust_etag"]
    assert hosts.loc[(DAYS[1], "a.example"), "trust_etag"]
    assert hosts.loc[(DAYS[1], "a.example"), "ev_304_ignored"] == 2
    state = r.state.set_index("url")
    assert state.loc["https://a.example/p2", "n_observations"] == 1   # day 3's 304 only
    assert state.loc["https://a.example/p2", "n_changes"] == 0


def test_days_without_rows_still_decay_and_rewrite_the_bucket(params):
    logs, _ = _web()
    a = logs[(logs["host"] == "a.example") & (logs["dt"] == DAYS[0])]
    r = replay.replay(a, None, DAYS, *params)
    assert (r.state["updated_dt"] == pd.Timestamp(DAYS[-1]).date()).all()
    assert r.hosts.groupby("dt").size().to_dict() == dict.fromkeys(DAYS, 1)
    assert (r.hosts.set_index("dt").loc[DAYS[-1], "updated_dt"] == pd.Timestamp(DAYS[-1]).date())
    assert r.figures["urls_known"].tolist() == [4, 4, 4, 4]
    # Nothing at all: no rows, no hosts, zero figures.
    empty = replay.replay(a.iloc[0:0], None, DAYS, *params)
    assert len(empty.state) == 0 and len(empty.hosts) == 0 and len(empty.stale) == 0
    assert empty.figures.drop(columns="dt").to_numpy().sum() == 0


def test_rebuild_buckets_follow_the_log_rows_with_one_per_core_at_least():
    from jobs import rebuild_state

    cfg = load_config(None, ["spark.rebuild_rows_per_bucket=1000"])
    assert rebuild_state.buckets(cfg, log_rows=500, cores=2) == 2
    assert rebuild_state.buckets(cfg, log_rows=10_001, cores=2) == 11
    assert rebuild_state.buckets(cfg, log_rows=0, cores=0) == 1


def test_host_today_counts_throttles_politeness_and_the_retry_after_wait():
    t0 = pd.Timestamp("2026-11-02 10:00", tz="UTC")
    logs = pd.DataFrame({
        "url": [f"https://a.example/{i}" for i in range(4)] + ["https://b.example/x"],
        "host": ["a.example"] * 4 + ["b.example"],
        "fetched_at": [t0, t0 + pd.Timedelta(1, "h"), t0 + pd.Timedelta(2, "h"),
                       t0 + pd.Timedelta(3, "h"), t0],
        "status": [200, 503, 429, 429, 200], "elapsed_ms": [100.0, 50.0, 20.0, np.nan, 80.0],
        "retry_after": [None, None, "3600", "Mon, 02 Nov 2026 12:30:00 GMT", "60"],
        "crawl_delay_s": [432.0] * 4 + [10.0], "max_fetches_per_day": [np.nan] * 4 + [50.0]})
    folded = state_update.empty_state().assign(**{c: [] for c in observations.EVIDENCE_COLUMNS})
    today = replay.host_today(folded, logs, max_block_s=86400.0).set_index("host")
    a, b = today.loc["a.example"], today.loc["b.example"]
    assert (a.fetches, a.throttled_429, a.throttled, a.errors_5xx) == (4, 2, 3, 1)
    assert a.latency_sum_ms == 170.0 and a.latency_n == 3
    assert (a.crawl_delay_s, b.crawl_delay_s, b.max_fetches_per_day) == (432.0, 10.0, 50.0)
    # 12:00 + 3600 s = 13:00 beats the HTTP date 12:30; b's 200 asked for no wait
    assert a.blocked_until == (t0 + pd.Timedelta(3, "h")).timestamp()
    assert np.isnan(b.blocked_until)
    hosts = trust.update_hosts(pd.DataFrame(columns=list(trust.HOST_COLUMNS)),
                               today.reset_index(), "2026-11-02",
                               trust_params(load_config(None, []))).set_index("host")
    assert hosts.loc["a.example", "nominal_cap"] == 200  # 86400 / 432
    assert hosts.loc["b.example", "nominal_cap"] == 50   # its max_fetches_per_day
    # 4 fetches: fewer than health.min_fetches (5), so not judged; a new host starts at N
    assert hosts.loc["a.example", "health_verdict"] == "unjudged"
    assert hosts.loc["a.example", "rate_limit"] == 200
    assert pd.isna(hosts.loc["a.example", "blocked_until"])  # ends before the next window
