"""Hostile and malformed input: a named error or quarantine, never a silently wrong plan.

Issue 9 §2 (integer widths, late and stale fetch times, non-finite importance, host
normalisation, crawl-delay bounds, empty partitions, long and credentialed URLs), each
through the real Spark reading path on generated Parquet files.
"""
from __future__ import annotations

import datetime
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import ingest, schemas, update_state, validate_logs
from jobs.core.urls import canonical_url
from tests.conftest import make_config
from tests.tiny_web import fetch, write

D1, D2 = "2026-11-01", "2026-11-02"
A = [f"https://a.example/k{i}" for i in range(4)]
IDN = "https://bücher.example/straße"
LONG = "https://a.example/" + "x" * 3000


def ts(x):
    return pd.Timestamp(x, tz="UTC")


def write_cast(root, table, rows, dt=None, name="part-1.parquet", **casts):
    """Write rows in the contract format, then retype columns (another producer's widths)."""
    path = write(root, table, rows, dt=dt, name=name)
    t = pq.read_table(path)
    for col, typ in casts.items():
        t = t.set_column(t.schema.get_field_index(col), col, t[col].cast(typ))
    pq.write_table(t, path)
    return path


def write_arrow(root, table, columns: dict, dt=None, name="part-0.parquet"):
    """Write columns as given (pandas would turn NaN into null)."""
    path = os.path.join(root, table, f"dt={dt}") if dt else os.path.join(root, table)
    os.makedirs(path, exist_ok=True)
    pq.write_table(pa.table(columns), os.path.join(path, name))


def quarantine(root, day, source):
    path = os.path.join(root, "quarantine", f"dt={day}", f"source={source}")
    return pd.read_parquet(path) if os.path.exists(path) else pd.DataFrame(columns=["reason"])


def state(root, day):
    return pd.read_parquet(os.path.join(root, "state", f"dt={day}")).set_index("url")


# -- a. integer widths -----------------------------------------------------------------------

def test_mixed_integer_widths_are_cast_per_contract(spark, tmp_path):
    root = str(tmp_path)
    write(root, "fetch_logs", [fetch(A[0], f"{D1}T01:00", h="a")], dt=D1, name="part-0.parquet")
    write_cast(root, "fetch_logs", [fetch(A[1], f"{D1}T02:00", h="b")], dt=D1,
               status=pa.int64(), bytes=pa.int32())
    write(root, "importance", [{"url": A[0], "importance": 2.5}], name="part-0.parquet")
    write_cast(root, "importance", [{"url": A[1], "importance": 7.0}], importance=pa.int64())
    update_state.run(make_config(root), D1, spark, from_empty=True)
    s = state(root, D1)
    assert s.loc[A[0], "last_status"] == 200 and s.loc[A[1], "last_status"] == 200
    assert s.loc[A[0], "importance"] == 2.5 and s.loc[A[1], "importance"] == 7.0


def test_same_widths_share_one_read(spark, tmp_path):
    root = str(tmp_path)
    for i in range(3):
        write(root, "fetch_logs", [fetch(A[i], f"{D1}T01:00", h="a")], dt=D1,
              name=f"part-{i}.parquet")
    write_cast(root, "fetch_logs", [fetch(A[3], f"{D1}T01:00", h="a")], dt=D1,
               name="part-9.parquet", status=pa.int16())
    footers = ingest.checked_footers(schemas.FETCH_LOG, f"{root}/fetch_logs/dt={D1}", True)
    keys = {ingest._physical_key(schemas.FETCH_LOG, f.schema) for f in footers}
    assert len(keys) == 2  # three agreeing files in one read, the int16 one in another
    df = ingest._read(spark, schemas.FETCH_LOG, footers)
    assert dict(df.dtypes)["status"] == "int" and sorted(r.url for r in df.collect()) == A


# -- b, c, d, f: one hostile day ---------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hostile"))
    day1 = [fetch(u, f"{D1}T10:00", h=f"{u}-1") for u in A]
    day1 += [fetch(IDN, f"{D1}T10:00", h="idn-1")]
    write(root, "fetch_logs", day1, dt=D1)
    day2 = [fetch(A[0], f"{D2}T01:00", h=f"{A[0]}-2"),
            fetch(A[1], "1970-01-01T00:00", h=f"{A[1]}-2"),          # late_fetched_at
            fetch("https://a.example/new", "1990-01-01T00:00", h="n"),  # late, unknown URL
            fetch(A[2], f"{D1}T05:00", h=f"{A[2]}-0"),                 # stale_fetched_at
            {**fetch(A[3], f"{D2}T02:00", h=f"{A[3]}-2"), "host": "other.example"},  # mismatch
            {**fetch(A[3], f"{D2}T03:00", h=f"{A[3]}-2"), "host": " A.Example. "},   # same host
            fetch("https://user:pw@a.example/s", f"{D2}T01:00", h="s"),  # url_userinfo
            fetch(LONG, f"{D2}T01:00", h="l"),                           # url_too_long
            fetch("https://A.example./dot", f"{D2}T01:00", h="d"),       # valid, host a.example
            fetch(IDN, f"{D2}T04:00", h="idn-2"),                        # valid IDN
            fetch("https://:80/x", f"{D2}T01:00", h="e")]                # bad_url (empty host)
    write(root, "fetch_logs", day2, dt=D2)
    write_arrow(root, "importance", {"url": A, "importance": pa.array(
        [3.0, float("inf"), float("nan"), -float("inf")], pa.float64(), from_pandas=False)})
    # A second weight of A[0], smaller: the largest wins (the fold sees both rows).
    write_arrow(root, "importance", {"url": [A[0]], "importance": [1.5]}, name="part-1.parquet")
    cfg = make_config(root)
    records = {d: update_state.run(cfg, d, spark, from_empty=(d == D1)) for d in (D1, D2)}
    return {"root": root, "records": records, "day2_rows": len(day2)}


def test_late_and_stale_rows_are_quarantined_not_folded(hostile):
    root = hostile["root"]
    q = quarantine(root, D2, "fetch_logs")
    reasons = q.groupby("reason").url.apply(sorted).to_dict()
    assert reasons["late_fetched_at"] == sorted([A[1], "https://a.example/new"])
    assert reasons["stale_fetched_at"] == [A[2]]
    s1, s2 = state(root, D1), state(root, D2)
    for u in (A[1], A[2]):  # their history is untouched: no rewound fetch, no collapsed rate
        for col in ("last_fetch_at", "last_known_at", "content_hash", "lambda_hat", "n_fetches"):
            assert s2.loc[u, col] == s1.loc[u, col], (u, col)
    assert "https://a.example/new" not in s2.index


def test_host_column_disagreeing_with_the_url_is_quarantined(hostile):
    root = hostile["root"]
    q = quarantine(root, D2, "fetch_logs")
    mism = q[q.reason == "host_mismatch"]
    assert mism.url.tolist() == [A[3]]
    assert json.loads(mism.row_json.iloc[0])["host"] == "other.example"
    s = state(root, D2)
    assert s.loc[A[3], "n_fetches"] == 2  # day 1 + the row whose host column agrees
    assert set(s.host) == {"a.example", "xn--bcher-kva.example"}
    # State keys pages by their canonical URL (jobs.core.urls).
    assert s.loc["https://a.example/dot", "host"] == "a.example"
    idn = canonical_url(IDN)
    assert s.loc[idn, "host"] == "xn--bcher-kva.example" and s.loc[idn, "n_fetches"] == 2


def test_long_credentialed_and_hostless_urls_get_their_own_reasons(hostile):
    q = quarantine(hostile["root"], D2, "fetch_logs")
    by_reason = q.groupby("reason").url.apply(list).to_dict()
    assert by_reason["url_userinfo"] == ["https://user:pw@a.example/s"]
    assert by_reason["url_too_long"] == [LONG]
    assert by_reason["bad_url"] == ["https://:80/x"]


def test_non_finite_importance_is_quarantined(hostile):
    root = hostile["root"]
    q = quarantine(root, D2, "importance")
    assert sorted(q[q.reason == "bad_importance"].url) == sorted(A[1:])
    s = state(root, D2)
    assert s.loc[A[0], "importance"] == 3.0
    assert (s.loc[A[1:], "importance"] == 1.0).all()  # policy.default_importance
    assert np.isfinite(s.importance).all()


def test_rows_in_equal_rows_folded_plus_quarantined(hostile):
    """Every fetch-log row of the hostile day is either folded into state (one more
    n_fetches for its URL) or quarantined: nothing is dropped silently."""
    root, rec = hostile["root"], hostile["records"][D2]
    folded = int(state(root, D2).n_fetches.sum() - state(root, D1).n_fetches.sum())
    quarantined = len(quarantine(root, D2, "fetch_logs"))
    assert rec["log_rows"] == hostile["day2_rows"]
    assert rec["quarantined_fetch_logs"] == quarantined
    assert rec["log_rows"] == folded + quarantined
    assert folded == 4 and quarantined == 7


# -- c, d, f: frontier, signals, host policy -------------------------------------------------

def test_frontier_rule_is_the_one_url_rule(spark, tmp_path):
    root = str(tmp_path)
    at = ts(f"{D2}T05:00")
    rows = [("https://a.example/ok", 2.0), ("https://a.example/inf", float("inf")),
            ("https://a.example/nan", float("nan")), ("https://a.example/neg", -1.0),
            ("https://a.example/null", None), ("https://:80/x", 1.0), ("https://", 1.0),
            ("https://u:p@a.example/x", 1.0), (LONG, 1.0), (IDN, 1.0),
            ("https://B.example./y", 1.0)]
    write_arrow(root, "frontier", {
        "url": [u for u, _ in rows], "discovered_at": pa.array([at] * len(rows)),
        "importance": pa.array([w for _, w in rows], pa.float64(), from_pandas=False)}, dt=D2)
    clean, bad = ingest.read_frontier(spark, make_config(root), D2)
    reasons = {r.url: r.reason for r in bad.collect()}
    assert reasons == {"https://a.example/inf": "bad_importance",
                       "https://a.example/nan": "bad_importance",
                       "https://a.example/neg": "bad_importance",
                       "https://:80/x": "bad_url", "https://": "bad_url",
                       "https://u:p@a.example/x": "url_userinfo", LONG: "url_too_long"}
    hosts = {r.url: r.host for r in clean.collect()}
    assert hosts == {"https://a.example/ok": "a.example", "https://a.example/null": "a.example",
                     canonical_url(IDN): "xn--bcher-kva.example", "https://b.example/y": "b.example"}


def test_frontier_quarantines_empty_hosts_with_a_reason_and_counts_them(spark, tmp_path):
    """The frontier applies the one URL rule (ingest.with_url_checks), empty host included:
    each such row is quarantined as bad_url and counted, none is dropped silently or planned
    under an empty host (the frontier's own copy of the rule once lacked the check)."""
    root = str(tmp_path)
    empty = ["https:///x", "https://?q=1", "https://#top", "https://:8080/x", "https://@/x",
             "http://", "https://./x"]
    urls = ["https://a.example/ok", *empty]
    write_arrow(root, "frontier", {
        "url": urls, "discovered_at": pa.array([ts(f"{D2}T05:00")] * len(urls)),
        "importance": pa.array([1.0] * len(urls), pa.float64())}, dt=D2)
    cfg = make_config(root)
    clean, bad = ingest.read_frontier(spark, cfg, D2)
    assert [(r.url, r.host) for r in clean.collect()] == [("https://a.example/ok", "a.example")]
    assert ingest.write_quarantine(cfg, D2, "frontier", bad) == len(empty)
    q = quarantine(root, D2, "frontier")
    assert sorted(q.url) == sorted(empty) and set(q.reason) == {"bad_url"}
    assert all(json.loads(r)["url"] in empty for r in q.row_json)


def test_signals_hosts_are_normalised(spark, tmp_path):
    root = str(tmp_path)
    at = ts(f"{D2}T05:00")
    write(root, "signals", [{"url": u, "signaled_at": at, "source": "feed"}
                            for u in ("https://S.Example./x", IDN, "https://u@s.example/x")],
          dt=D2)
    clean, bad = ingest.read_signals(spark, make_config(root), D2)
    assert sorted(r.host for r in clean.collect()) == ["s.example", "xn--bcher-kva.example"]
    assert [(r.url, r.reason) for r in bad.collect()] == [("https://u@s.example/x",
                                                           "url_userinfo")]


def test_host_policy_hosts_are_normalised_and_delays_bounded(spark, tmp_path):
    root = str(tmp_path)
    rows = [("h.example.com.", 30.0, None), ("h.example.com ", 20.0, 50),
            ("BÜCHER.example", 5.0, None), ("tiny.example", 1e-12, None),
            ("huge.example", 1e9, None), ("inf.example", float("inf"), None),
            ("nan.example", float("nan"), None), ("exa mple.com", 5.0, None)]
    write_arrow(root, "host_policy", {
        "host": [h for h, _, _ in rows],
        "crawl_delay_s": pa.array([d for _, d, _ in rows], pa.float64(), from_pandas=False),
        "max_fetches_per_day": pa.array([m for _, _, m in rows], pa.int64())})
    cfg = make_config(root)
    clean, bad = ingest.read_host_policy(spark, cfg, "2026-11-01")  # flat: any date
    got = {r.host: (r.crawl_delay_s, r.max_fetches_per_day) for r in clean.collect()}
    assert got == {"h.example.com": (30.0, 50), "xn--bcher-kva.example": (5.0, None),
                   "tiny.example": (cfg.politeness.min_crawl_delay_s, None),
                   "huge.example": (cfg.politeness.max_crawl_delay_s, None)}
    assert {json.loads(r.row_json)["host"]: r.reason for r in bad.collect()} == {
        "inf.example": "bad_crawl_delay", "nan.example": "bad_crawl_delay",
        "exa mple.com": "bad_host"}
    assert ingest.crawl_delay_figures(spark, cfg, "2026-11-01") == {"crawl_delay_raised": 1,
                                                      "crawl_delay_lowered": 1}


# -- f. empty partition ------------------------------------------------------------------------

def test_zero_row_file_as_only_file_is_an_empty_partition(spark, tmp_path):
    root = str(tmp_path)
    path = os.path.join(root, "fetch_logs", f"dt={D1}")
    os.makedirs(path)
    pq.write_table(schemas.FETCH_LOG.arrow_schema().empty_table(),
                   os.path.join(path, "part-0.parquet"))
    for run in (lambda cfg: validate_logs.run(cfg, D1),
                lambda cfg: update_state.run(cfg, D1, spark, from_empty=True)):
        with pytest.raises(schemas.SchemaError, match="empty partition") as err:
            run(make_config(root))
        assert err.value.table == "fetch_logs" and path in str(err.value)
    assert not os.path.exists(os.path.join(root, "state", f"dt={D1}"))


def test_times_before_1970_are_quarantined_not_folded(spark, tmp_path):
    # Go's zero time (0001-01-01) from a feed parser, and 1969-12-31: never a change time.
    # Both passed the rules; 0001 crashed the fold (Arrow refuses it as datetime64[ns]).
    # A fetch of 0001 passed too when max_lateness_days is unbounded. Unix time 0 is kept.
    root, utc = str(tmp_path), datetime.timezone.utc
    at = pa.array([datetime.datetime(1, 1, 1, tzinfo=utc),
                   datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc),
                   datetime.datetime(1970, 1, 1, tzinfo=utc)], pa.timestamp("us", tz="UTC"))
    write_arrow(root, "signals", {"url": [A[0], A[1], A[2]], "signaled_at": at,
                                  "source": ["feed", "sitemap", "feed"]}, dt=D1)
    write(root, "fetch_logs", [fetch(u, f"{D1}T10:00", h=f"{u}-1") for u in A[:3]], dt=D1)
    write_arrow(root, "fetch_logs", {
        "url": [A[3]], "fetched_at": pa.array([datetime.datetime(1, 1, 1, tzinfo=utc)],
                                              pa.timestamp("us", tz="UTC")),
        "status": pa.array([200], pa.int32()), "conditional": [False],
        **{c: pa.array(["x"], pa.string()) for c in ("etag", "last_modified", "content_hash")},
        "bytes": pa.array([10], pa.int64())},
        dt=D1, name="part-9.parquet")
    cfg = make_config(root, "ingest.max_lateness_days=inf")
    record = update_state.run(cfg, D1, spark, from_empty=True)
    q = quarantine(root, D1, "signals")
    assert sorted(zip(q.url, q.reason)) == [(A[0], "bad_signaled_at"), (A[1], "bad_signaled_at")]
    assert record["quarantined_signals"] == 2 and record["urls_pending_signal"] == 0
    q = quarantine(root, D1, "fetch_logs")
    assert list(zip(q.url, q.reason)) == [(A[3], "late_fetched_at")]
    s = state(root, D1)
    assert sorted(s.index) == A[:3] and s.signal_claim_at.isna().all()


@pytest.mark.parametrize("days, oldest", [("7", "2026-10-26"), ("30000", "1970-01-01"),
                                          ("inf", "1970-01-01")])
def test_fetch_horizon_is_never_before_1970(days, oldest):
    # An unbounded lateness used to be no horizon at all (None): a 0001 fetch passed.
    cfg = make_config("unused", f"ingest.max_lateness_days={days}")
    assert ingest.lateness_horizon(cfg, D2) == ts(oldest)
    assert ingest.EARLIEST_TIME == ts("1970-01-01")
