from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config
from jobs.core import adaptive, state_update
from jobs.core.estimators_stats import STATS_COLUMNS
from jobs.core.state_update import empty_state
from jobs.params import update_params

P = update_params(Config())  # the config's defaults: the params carry none of their own


def fold_day(state, logs, run_date, params=P, signals=None):
    return state_update.fold_day(state, logs, run_date, params, signals)

H = 3600.0
D = "2026-11-0"


def logs(rows, trust=True, host="h.example"):
    df = pd.DataFrame(rows, columns=["url", "fetched_at", "status", "etag", "last_modified",
                                     "content_hash"])
    df["host"] = host
    df["fetched_at"] = pd.to_datetime(df["fetched_at"], utc=True)
    df["trust_etag"] = trust
    df["trust_lm"] = trust
    return df


def test_seed_trace_backoff_and_advance():
    # The seed's four pages: floor holds, 304 doubles, a real change halves.
    iv = np.array([H, 7 * 86400, 30 * 86400, 30 * 86400])
    out = adaptive.next_interval(iv, [True] * 4, [True, False, False, True], H, 90 * 86400)
    assert out.tolist() == [H, 14 * 86400, 60 * 86400, 15 * 86400]
    again = adaptive.next_interval(out[3:], [True], [True], H, 90 * 86400)
    assert again[0] == 7.5 * 86400
    assert adaptive.next_interval([80 * 86400], [True], [False], H, 90 * 86400)[0] == 90 * 86400
    assert adaptive.next_interval([5.0], [False], [False], H, 90 * 86400)[0] == 5.0


def test_changed_means_hash_differs_and_trusted_304_is_unchanged():
    day1 = logs([("u", "2026-11-01T00:00Z", 200, '"a"', None, "h1")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    assert s1.n_observations[0] == 0 and s1.interval_s[0] == 86400  # baseline only
    day2 = logs([("u", "2026-11-02T00:00Z", 200, '"b"', None, "h1"),   # same hash: unchanged
                 ("u", "2026-11-02T06:00Z", 304, None, None, None),    # trusted 304: unchanged
                 ("u", "2026-11-02T12:00Z", 200, '"c"', None, "h2")])  # changed
    s2 = fold_day(s1, day2, "2026-11-02")
    row = s2.iloc[0]
    assert row.n_observations == 3 and row.n_changes == 1
    assert row.exposure_days == pytest.approx(1.5)
    assert row.interval_s == 86400 * 2 * 2 / 2
    assert row.etag == '"c"' and row.content_hash == "h2"
    assert row.last_change_at == pd.Timestamp("2026-11-02T12:00Z")
    assert row.n_fetches == 4
    # Sufficient statistics: 2 unchanged (1 d + 0.25 d), one change after 0.25 d.
    # The change carries no Last-Modified, so it is censored even on a trusted-LM host.
    assert row.lm_n == 2 and row.lm_exposure == pytest.approx(1.25) and row.lm_changes == 0
    assert sum(row[f"chg_n_{k:02d}"] for k in range(16)) == 1
    assert row.ev_etag_volatile == 1 and row.ev_etag_agree_chg == 1 and row.ev_compared == 2


def test_the_stored_size_prices_what_each_304_saved():
    """A 2xx with a hash stores its size; a 304 (trusted or not: it was not downloaded)
    saves that size less its own bytes; fetches that found the page unchanged are counted."""
    def with_bytes(frame, sizes, trust=True):
        return frame.assign(bytes=sizes)

    day1 = logs([("u", "2026-11-01T00:00Z", 200, '"a"', None, "h1"),
                 ("v", "2026-11-01T00:00Z", 200, '"x"', None, "g1")])
    s1 = fold_day(empty_state(), with_bytes(day1, [10_000, 4_000]), "2026-11-01")
    assert s1.set_index("url")["content_bytes"].to_dict() == {"u": 10_000, "v": 4_000}
    assert s1.ev_bytes_saved.sum() == 0 and s1.ev_unchanged.sum() == 0  # baselines only
    day2 = logs([("u", "2026-11-02T00:00Z", 304, None, None, None),    # saves 10,000 - 300
                 ("u", "2026-11-02T06:00Z", 200, '"a"', None, "h1"),   # unchanged, now 12,000
                 ("u", "2026-11-02T12:00Z", 304, None, None, None),    # saves 12,000 - 200
                 ("v", "2026-11-02T00:00Z", 200, '"y"', None, "g2")])  # changed
    s2 = fold_day(s1, with_bytes(day2, [300, 12_000, 200, 5_000]), "2026-11-02").set_index("url")
    assert s2.loc["u", "ev_bytes_saved"] == 9_700 + 11_800 and s2.loc["v", "ev_bytes_saved"] == 0
    assert s2.loc["u", "ev_unchanged"] == 3 and s2.loc["v", "ev_unchanged"] == 0
    assert s2.loc["u", "ev_304"] == 2 and s2.loc["u", "ev_fetches"] == 3
    assert s2["content_bytes"].to_dict() == {"u": 12_000, "v": 5_000}
    # an untrusted 304 is no observation, but it still saved the download
    s3 = fold_day(s2.reset_index(), with_bytes(logs([("u", "2026-11-03T00:00Z", 304, None,
                                                      None, None)], trust=False), [100]),
                  "2026-11-03").set_index("url")
    assert s3.loc["u", "ev_bytes_saved"] == 11_900 and s3.loc["u", "ev_unchanged"] == 0
    # logs and state from before the size existed: no size, nothing counted as saved
    old = fold_day(empty_state().drop(columns="content_bytes"), day1, "2026-11-01")
    assert old["content_bytes"].isna().all() and old.ev_bytes_saved.sum() == 0


def test_untrusted_304_is_not_evidence_and_keeps_the_interval_start():
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00Z", 200, '"a"', None, "h1")]),
                  "2026-11-01")
    s2 = fold_day(s1, logs([("u", "2026-11-02T00:00Z", 304, None, None, None)], trust=False),
                  "2026-11-02")
    r = s2.iloc[0]
    assert r.n_observations == 0 and r.ev_304_ignored == 1 and r.interval_s == 86400
    assert r.last_known_at == pd.Timestamp("2026-11-01T00:00Z")
    s3 = fold_day(s2, logs([("u", "2026-11-03T00:00Z", 200, '"b"', None, "h2")], trust=False),
                  "2026-11-03")
    r = s3.iloc[0]
    # The full fetch covers the whole 2 days since the last confirmed copy.
    assert r.n_changes == 1 and r.chg_n_06 == 1 and r.chg_t_06 == pytest.approx(2.0)


def test_redirects_and_other_4xx_are_no_observation():
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00Z", 200, None, None, "h1")]),
                  "2026-11-01")
    s2 = fold_day(s1, logs([("u", "2026-11-02T00:00Z", 301, None, None, None),
                            ("u", "2026-11-02T01:00Z", 403, None, None, None),
                            ("v", "2026-11-02T02:00Z", 200, None, None, "hv")]), "2026-11-02")
    u = s2.set_index("url").loc["u"]
    assert u.n_observations == 0 and u.n_errors == 0 and not u.gone and u.n_fetches == 3
    assert u.content_hash == "h1" and u.last_status == 403
    # The fleet logs the redirect target as its own row: a new URL with its own baseline.
    assert s2.set_index("url").loc["v"].content_hash == "hv"


def test_errors_gone_and_order_independence():
    day1 = logs([("u", "2026-11-01T00:00Z", 200, None, None, "x"),
                 ("v", "2026-11-01T00:00Z", 200, None, None, "y")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    day2 = logs([("u", "2026-11-02T03:00Z", 404, None, None, None),
                 ("u", "2026-11-02T01:00Z", 503, None, None, None),
                 ("u", "2026-11-02T05:00Z", 410, None, None, None),
                 ("v", "2026-11-02T01:00Z", 0, None, None, None)])
    s2 = fold_day(s1, day2.sample(frac=1, random_state=3), "2026-11-02", replace(P, gone_after=2))
    u = s2.set_index("url").loc["u"]
    assert u.gone and u.consecutive_gone == 2 and u.n_errors == 1 and u.n_observations == 0
    assert u.last_status == 410
    v = s2.set_index("url").loc["v"]
    assert not v.gone and v.n_errors == 1 and v.content_hash == "y"
    day3 = logs([("u", "2026-11-03T00:00Z", 200, None, None, "x")])
    s3 = fold_day(s2, day3, "2026-11-03")
    assert not s3.set_index("url").loc["u"].gone


def test_trusted_last_modified_dates_the_change():
    lm0, lm1 = "Sun, 01 Nov 2026 00:00:00 GMT", "Mon, 02 Nov 2026 18:00:00 GMT"
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00Z", 200, None, lm0, "a")]),
                  "2026-11-01")
    s2 = fold_day(s1, logs([("u", "2026-11-03T00:00Z", 200, None, lm1, "b")]), "2026-11-03")
    r = s2.iloc[0]
    assert r.lm_changes == 1 and r.lm_exposure == pytest.approx(0.25)  # 6 h since modification
    untrusted = fold_day(s1, logs([("u", "2026-11-03T00:00Z", 200, None, lm1, "b")], trust=False),
                         "2026-11-03").iloc[0]
    assert untrusted.lm_n == 0 and untrusted[[c for c in STATS_COLUMNS if c.startswith("chg_n")]].sum() == 1


def test_last_modified_in_any_http_date_form_dates_the_change_and_is_kept_as_imf():
    # The same two dates as above, received as asctime and RFC 850 (RFC 9110 §5.6.7).
    lm0, lm1 = "Sun Nov  1 00:00:00 2026", "Monday, 02-Nov-26 18:00:00 GMT"
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00Z", 200, None, lm0, "a")]),
                  "2026-11-01")
    assert s1.iloc[0].last_modified == "Sun, 01 Nov 2026 00:00:00 GMT"
    s2 = fold_day(s1, logs([("u", "2026-11-03T00:00Z", 200, None, lm1, "b")]), "2026-11-03")
    r = s2.iloc[0]
    assert r.lm_changes == 1 and r.lm_exposure == pytest.approx(0.25)  # 6 h since modification
    assert r.last_modified == "Mon, 02 Nov 2026 18:00:00 GMT"  # what If-Modified-Since sends
    # The same instant in another form is the same validator (not a volatile one); a value
    # that is no HTTP-date is kept as received (and never sent).
    s3 = fold_day(s2, logs([("u", "2026-11-04T00:00Z", 200, None, "Mon Nov  2 18:00:00 2026",
                             "b")]), "2026-11-04").iloc[0]
    assert s3.ev_lm_agree_same == 1 and s3.ev_lm_volatile == 0
    s4 = fold_day(s2, logs([("u", "2026-11-04T00:00Z", 200, None, "Mon Nov 2 18:00:00 2026",
                             "b")]), "2026-11-04").iloc[0]
    assert s4.last_modified == "Mon Nov 2 18:00:00 2026" and s4.ev_lm_volatile == 1


def test_statistics_decay_with_the_half_life():
    p = replace(P, half_life_days=10.0)
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00Z", 200, None, None, "a")]),
                  "2026-11-01", p)
    s2 = fold_day(s1, logs([("u", "2026-11-02T00:00Z", 200, None, None, "a")], trust=False),
                  "2026-11-02", p)
    assert s2.unch_n[0] == 1.0
    s3 = fold_day(s2, logs([], trust=False), "2026-11-12", p)   # 10 days later, no fetch
    assert s3.unch_n[0] == pytest.approx(0.5, abs=1e-12) and s3.n_observations[0] == 1


def test_signal_claims_are_scored_and_trusted_ones_pend():
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00Z", 200, None, None, "a"),
                                       ("w", "2026-11-01T00:00Z", 200, None, None, "a")]),
                  "2026-11-01")
    sig = pd.DataFrame({"url": ["u", "w", "zz"], "signal_trusted": [True, False, True],
                        "signaled_at": pd.to_datetime(["2026-11-02T03:00Z"] * 3, utc=True)})
    s2 = fold_day(s1, logs([("u", "2026-11-02T06:00Z", 200, None, None, "b"),
                            ("w", "2026-11-02T06:00Z", 200, None, None, "a")], trust=False),
                  "2026-11-02", signals=sig).set_index("url")
    assert "zz" not in s2.index                      # signals do not create URLs
    assert s2.loc["u", "ev_sig_correct"] == 1 and s2.loc["w", "ev_sig_wrong"] == 1
    # A trusted, confirmed claim dates the change (for the rhythm) but is no modification
    # age: it does not say the page stayed unchanged from the claim to the fetch.
    assert s2.loc["u", "lm_n"] == 0 and s2.loc["u", "tod_n"] == 1.0
    assert s2.loc["w", "lm_n"] == 0 and pd.isna(s2.loc["u", "pending_signal_at"])
    sig3 = sig.assign(signaled_at=pd.to_datetime(["2026-11-03T09:00Z"] * 3, utc=True))
    s3 = fold_day(s2.reset_index(), logs([]), "2026-11-03", signals=sig3).set_index("url")
    assert s3.loc["u", "pending_signal_at"] == pd.Timestamp("2026-11-03T09:00Z")
    assert pd.isna(s3.loc["w", "pending_signal_at"])  # untrusted: ignored, still armed
    assert s3.loc["w", "signal_claim_at"] == pd.Timestamp("2026-11-03T09:00Z")


def test_last_modified_now_is_the_servers_clock_not_a_change_instant():
    """Dynamic pages send ``Last-Modified: <now>``. A host trusted early (its first changed
    fetches agreed with the validator) turned one such header into an age of 0.5 s: λ̂ of a
    page changing 7 times a day read as 2,076 in [12.6, 108,836] for weeks (the backtest,
    seed 1). An instant within the HTTP-date resolution of the fetch neither dates a change
    nor is an age; one ten minutes back still is both."""
    t1, t2 = "2026-11-01T06:00:00.400Z", "2026-11-02T06:00:00.500Z"
    now = lambda t: pd.Timestamp(t).strftime("%a, %d %b %Y %H:%M:%S GMT")  # noqa: E731
    day1 = logs([("u", t1, 200, None, now(t1), "a"),
                 ("v", t1, 200, None, now(t1), "a")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    ten_min_back = now(pd.Timestamp(t2) - pd.Timedelta(minutes=10))
    day2 = logs([("u", t2, 200, None, now(t2), "b"),             # Last-Modified: now
                 ("v", t2, 200, None, ten_min_back, "b")])       # a real modification
    s2 = fold_day(s1, day2, "2026-11-02").set_index("url")
    assert s2.loc["u", "n_changes"] == 1 and s2.loc["u", "lm_n"] == 0
    assert s2.loc["u", "tod_n"] == 0                               # no change instant either
    assert s2.loc["v", "lm_changes"] == 1 and s2.loc["v", "tod_n"] == 1.0
    assert s2.loc["v", "lm_exposure"] == pytest.approx(600.5 / 86400, rel=1e-6)


def test_a_fast_page_announced_once_a_day_is_not_read_as_slow():
    """A sitemap's lastmod (and the simulator's push sources) announce a page's *last* change
    of the day. For a page that changes 30 times a day the claim lies hours before the next
    fetch while the page changed many times since: read as a modification age (no change
    from the claim to the fetch) it biased λ̂ low (the backtest's fast front pages on hosts
    without validators: true λ 28-46, λ̂ 5-13). Fetched every 4 h, nearly every fetch changed."""
    rng = np.random.default_rng(3)
    lam, days = 30.0, 20
    change_t = np.sort(rng.uniform(0, days, rng.poisson(lam * days)))  # in days from Nov 1
    start = pd.Timestamp("2026-11-01T00:00Z")
    state = empty_state()
    for d in range(days):
        fetches = [(("u", str(start + pd.Timedelta(days=d, hours=h)), 200, None, None,
                     f"v{np.searchsorted(change_t, d + h / 24)}")) for h in (2, 6, 10, 14, 18, 22)]
        before = change_t[(change_t >= d - 1) & (change_t < d)]  # yesterday's last change
        sig = pd.DataFrame({"url": ["u"] * min(len(before), 1), "signal_trusted": True,
                            "signaled_at": [start + pd.Timedelta(days=float(before[-1]))]
                            if len(before) else []})
        run = str((start + pd.Timedelta(days=d)).date())
        state = state_update.fold_day(state, logs(fetches, trust=False), run, P,
                                      sig if d else None, estimate=True)
    row = state.iloc[0]
    assert row.n_observations == 6 * days - 1 and row.n_changes >= row.n_observations - 2
    assert row.lm_n == 0
    # With each claim read as the page's age: 16.1 in [13.2, 19.6], the truth outside.
    assert row.lambda_lo <= lam <= row.lambda_hi and row.lambda_hat > 20.0


def test_incremental_equals_one_shot_fold():
    rng = np.random.default_rng(5)
    rows = []
    for day in range(1, 6):
        for u in range(20):
            for _ in range(rng.integers(0, 3)):
                t = f"2026-11-0{day}T{rng.integers(0, 24):02d}:{rng.integers(0, 60):02d}Z"
                rows.append((f"u{u}", t, int(rng.choice([200, 200, 304, 503])), None, None,
                             f"h{rng.integers(0, 2)}"))
    all_logs = logs(rows)
    state = empty_state()
    no_decay = replace(P, half_life_days=np.inf)
    for day in range(1, 6):
        part = all_logs[all_logs.fetched_at.dt.day == day]
        state = fold_day(state, part, f"2026-11-0{day}", no_decay)
    one_shot = fold_day(empty_state(), all_logs, "2026-11-05", no_decay)
    cols = ["url", "n_fetches", "n_observations", "n_changes", "exposure_days", "interval_s",
            "content_hash", "n_errors", "lambda_hat", *STATS_COLUMNS]
    a = state[cols].sort_values("url").reset_index(drop=True)
    b = one_shot[cols].sort_values("url").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=1e-10)


def test_a_url_nobody_fetched_keeps_its_row_bit_for_bit_but_decay_and_estimates():
    # Timestamps with microseconds (as the fleet logs them) on the first day; a third of the
    # URLs fetched again on the second; then days with no fetch at all. An unfetched URL's
    # row may move only in what a day moves: the decayed statistics and the estimates made
    # from them, the day's evidence counters and updated_dt.
    from jobs.core import observations, timing

    rng = np.random.default_rng(1)
    t0 = pd.Timestamp("2026-11-01", tz="UTC")
    rows = []
    for k in range(300):
        t = t0 + pd.Timedelta(microseconds=int(rng.integers(0, 86_400_000_000)))
        rows.append((f"https://h.example/{k}", t.isoformat(), 200, f'"e{k}"',
                     "Sun, 01 Nov 2026 00:00:00 GMT", f"h{k}"))
    s1 = fold_day(empty_state(), logs(rows), "2026-11-01")
    again = [(u, (pd.Timestamp(t) + pd.Timedelta(days=1, microseconds=7)).isoformat(), 200, e,
              lm, h + "x") for u, t, _, e, lm, h in rows[:100]]
    prev = fold_day(s1, logs(again), "2026-11-02")
    moving = set(STATS_COLUMNS) | set(timing.TIMING_COLUMNS) | set(observations.EVIDENCE_COLUMNS) \
        | {"lambda_hat", "lambda_lo", "lambda_hi", "updated_dt"}
    for day in ("2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06"):
        nxt = fold_day(prev, logs([]), day)
        a, b = prev.set_index("url"), nxt.set_index("url")
        for col in a.columns.difference(sorted(moving)):
            pd.testing.assert_series_equal(a[col], b[col], check_exact=True, obj=f"{day} {col}")
        assert (b["updated_dt"] == pd.Timestamp(day).date()).all()
        prev = nxt
    # The timestamps are those the fleet logged, to the microsecond.
    got = prev.set_index("url")["last_fetch_at"]
    for u, t, *_ in rows[100:]:
        assert got[u] == pd.Timestamp(t)


def test_a_day_half_the_fleet_upgrades_its_fingerprint_is_no_day_of_changes():
    """Twenty pages, all hashed with version 1 on day 1. On day 2 the even pages are fetched
    by upgraded fetchers (version 2: every hash differs), the odd ones by old fetchers.
    Pages 0-3 changed for real on day 2; pages 0 and 1 are on a host whose ETag is trusted
    (it moves with the content), the others on a host that trusts nothing."""
    n = 20
    urls = [f"https://h{i % 2}.example/p{i}" for i in range(n)]
    trusted = np.array([i in (0, 1) or i >= 4 and i < 8 for i in range(n)])  # host of 0,1,4-7
    real_change = np.arange(n) < 4
    day1 = pd.DataFrame({
        "url": urls, "host": "h.example", "fetched_at": pd.Timestamp("2026-11-01T00:00Z"),
        "status": 200, "etag": [f'"e{i}"' for i in range(n)], "last_modified": None,
        "content_hash": [f"v1-{i}" for i in range(n)], "trust_etag": trusted,
        "trust_lm": False})
    s1 = fold_day(empty_state(), day1.drop(columns=[]), "2026-11-01")
    assert (s1["fingerprint_version"] == 1).all()  # absent in the logs: the legacy version
    upgraded = np.arange(n) % 2 == 0
    content = [f"c{i}" + ("-new" if real_change[i] else "") for i in range(n)]
    day2 = day1.assign(
        fetched_at=pd.Timestamp("2026-11-02T00:00Z"),
        fingerprint_version=np.where(upgraded, 2, 1).astype(np.int32),
        content_hash=[(f"v2-{c}" if up else (f"v1-{i}" + ("-new" if real_change[i] else "")))
                      for i, (c, up) in enumerate(zip(content, upgraded))],
        etag=[f'"e{i}"' + ("-new" if real_change[i] else "") for i in range(n)])
    s2 = fold_day(s1, day2, "2026-11-02").set_index("url")
    up = pd.Series(upgraded, index=urls)
    chg = pd.Series(real_change, index=urls)
    tr = pd.Series(trusted, index=urls)
    # Upgraded pages: the hash re-based (stored with its version), no false change.
    assert (s2.loc[up, "fingerprint_version"] == 2).all()
    assert (s2.loc[~up, "fingerprint_version"] == 1).all()
    assert (s2.loc[up, "content_hash"].str.startswith("v2-")).all()
    assert s2.loc[up & ~chg, "n_changes"].sum() == 0
    assert s2["ev_rebased"].sum() == int(upgraded.sum())
    # An upgraded page on an untrusted host: neither a change nor a no-change, but its copy
    # is confirmed now (the next observation's interval starts here).
    blind = up & ~tr
    assert (s2.loc[blind, "n_observations"] == 0).all()
    assert (s2.loc[blind, "last_known_at"] == pd.Timestamp("2026-11-02T00:00Z")).all()
    assert (s2.loc[blind, "interval_s"] == s1.set_index("url").loc[blind, "interval_s"]).all()
    # An upgraded page on a trusted-ETag host is judged by its validator: the one that
    # changed for real (page 0) is a change, the unchanged ones (4, 6) are not.
    judged = up & tr
    assert s2.loc[judged, "n_observations"].tolist() == [1] * int(judged.sum())
    assert s2.loc[judged & chg].index.tolist() == [urls[0]]
    assert s2.loc[judged & chg, "n_changes"].tolist() == [1]
    assert s2.loc[judged & ~chg, "n_changes"].sum() == 0
    # Not-upgraded pages compare hashes as before: pages 1 and 3 changed, the rest did not.
    assert s2.loc[~up, "n_observations"].tolist() == [1] * int((~up).sum())
    assert sorted(s2.index[~up & (s2["n_changes"] == 1)]) == sorted([urls[1], urls[3]])
    # Re-based fetches are no validator evidence (hashes were not compared).
    assert s2.loc[up, "ev_compared"].sum() == 0
    assert s2.loc[~up, "ev_compared"].sum() == int((~up).sum())
    # The next day, version 2 against version 2: hashes compare again.
    day3 = day2.assign(fetched_at=pd.Timestamp("2026-11-03T00:00Z"),
                       fingerprint_version=np.int32(2),
                       content_hash=[f"v2-{c}" for c in content])
    s3 = fold_day(s2.reset_index(), day3, "2026-11-03").set_index("url")
    # Odd pages re-base today (their fetchers upgraded), even ones compare and are unchanged.
    assert (s3.loc[up, "n_changes"] == s2.loc[up, "n_changes"]).all()
    assert (s3.loc[up, "ev_compared"] == 1).all() and (s3.loc[~up, "ev_rebased"] == 1).all()
    assert (s3["fingerprint_version"] == 2).all()


def test_a_state_written_before_the_fingerprint_version_reads_as_version_one():
    day1 = logs([("u", "2026-11-01T00:00Z", 200, '"a"', None, "h1")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    old = s1.drop(columns="fingerprint_version").assign(fingerprint_version=None)
    same = logs([("u", "2026-11-02T00:00Z", 200, '"a"', None, "h1")]).assign(
        fingerprint_version=1)
    s2 = fold_day(old, same, "2026-11-02")
    assert s2.n_observations[0] == 1 and s2.n_changes[0] == 0 and s2.ev_rebased[0] == 0
    bumped = same.assign(fingerprint_version=2, content_hash="h1-v2")
    s2b = fold_day(old, bumped, "2026-11-02")
    assert s2b.n_observations[0] == 1 and s2b.n_changes[0] == 0  # the trusted ETag says same
    assert s2b.ev_rebased[0] == 1 and s2b.fingerprint_version[0] == 2


def test_an_audit_of_another_fingerprint_version_is_not_scored():
    day1 = logs([("u", "2026-11-01T00:00Z", 200, '"a"', None, "h1")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    audit = logs([("u", "2026-11-02T00:00Z", 200, '"a"', None, "h1-v2")]).assign(
        lane="audit", fingerprint_version=2)
    s2 = fold_day(s1, audit, "2026-11-02")
    assert s2.ev_audit_n[0] == 0 and s2.content_hash[0] == "h1"
    same = audit.assign(fingerprint_version=1, content_hash="h1")
    assert fold_day(s1, same, "2026-11-02").ev_audit_fresh[0] == 1


def _lm_sums(state, url):
    row = state.set_index("url").loc[url]
    return row["lm_n"], row["lm_changes"], row["lm_exposure"]


def test_the_first_copys_last_modified_is_read_once_as_its_age():
    """A page found on 1 Nov with a trusted Last-Modified of 2 Oct had not changed for 30 days:
    at its first trusted observation (the next fetch) that age joins its statistics, decayed
    like them, once."""
    h = P.half_life_days
    first, lm = "2026-11-01T00:00Z", "Fri, 02 Oct 2026 00:00:00 GMT"
    s1 = fold_day(empty_state(), logs([("u", first, 200, None, lm, "a")]), "2026-11-01")
    assert _lm_sums(s1, "u") == (0, 0, 0)                       # a first copy: no interval yet
    s2 = fold_day(s1, logs([("u", "2026-11-02T00:00Z", 200, None, lm, "a")]), "2026-11-02")
    n, changes, exposure = _lm_sums(s2, "u")
    since, age = 1.0, 30.0
    assert changes == pytest.approx(2 ** (-(since + age) / h), rel=1e-9)
    assert n == pytest.approx(1 + changes, rel=1e-9)             # + the unchanged day
    aged = 2 ** (-since / h) * h / np.log(2) * (1 - 2 ** (-age / h))
    assert exposure == pytest.approx(1.0 + aged, rel=1e-9)
    assert s2.lambda_hat.iloc[0] < fold_day(s1, logs([("u", "2026-11-02T00:00Z", 200, None, lm,
                                                          "a")]), "2026-11-02",
                                            replace(P, age_at_first_fetch=False)
                                            ).lambda_hat.iloc[0]
    # Once: the next trusted observations add their own intervals only.
    s3 = fold_day(s2, logs([("u", "2026-11-03T00:00Z", 200, None, lm, "a")]), "2026-11-03")
    d = 2 ** (-1 / h)
    assert _lm_sums(s3, "u") == pytest.approx((n * d + 1, changes * d, exposure * d + 1),
                                               rel=1e-9)


def test_a_page_first_trusted_later_reads_the_age_of_its_first_copy():
    """Found on a host whose Last-Modified is not trusted yet: the age is read at the page's
    first trusted observation, from the day it was found (the observed days are already
    counted); a page that changed since it was found has no age before it to read."""
    lm = "Fri, 02 Oct 2026 00:00:00 GMT"
    day1 = logs([("u", "2026-11-01T00:00Z", 200, None, lm, "a"),
                 ("v", "2026-11-01T00:00Z", 200, None, lm, "a")], trust=False)
    day2 = logs([("u", "2026-11-02T00:00Z", 200, None, lm, "a"),
                 ("v", "2026-11-02T00:00Z", 200, None, "Mon, 02 Nov 2026 00:00:00 GMT", "b")],
                trust=False)
    s2 = fold_day(fold_day(empty_state(), day1, "2026-11-01"), day2, "2026-11-02")
    assert _lm_sums(s2, "u") == (0, 0, 0) and _lm_sums(s2, "v") == (0, 0, 0)
    day3 = logs([("u", "2026-11-03T00:00Z", 200, None, lm, "a"),
                 ("v", "2026-11-03T00:00Z", 200, None, "Mon, 02 Nov 2026 00:00:00 GMT", "b")])
    s3 = fold_day(s2, day3, "2026-11-03")
    h = P.half_life_days
    assert _lm_sums(s3, "u")[1] == pytest.approx(2 ** (-(2 + 30) / h), rel=1e-9)
    assert _lm_sums(s3, "v") == (1, 0, 1)                        # its unchanged day only


@pytest.mark.parametrize("lm, trust", [
    ("Sun, 01 Nov 2026 00:00:00 GMT", True),     # the server's clock at the first fetch
    ("Mon, 02 Nov 2026 00:00:00 GMT", True),     # after the first fetch: no age
    ("yesterday", True),                         # not an HTTP-date
    (None, True),                                # none sent
    ("Fri, 02 Oct 2026 00:00:00 GMT", False)])   # a host whose Last-Modified is not trusted
def test_no_age_without_a_trusted_last_modified_before_the_first_fetch(lm, trust):
    s1 = fold_day(empty_state(), logs([("u", "2026-11-01T00:00:00.3Z", 200, None, lm, "a")],
                                      trust=trust), "2026-11-01")
    s2 = fold_day(s1, logs([("u", "2026-11-03T00:00Z", 200, None, lm, "a")], trust=trust),
                  "2026-11-03")
    assert _lm_sums(s2, "u")[1] == 0
