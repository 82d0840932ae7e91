"""Epoch seconds -> timestamps without pandas' uninitialised-memory crash (issue 14 §2).

The backfill backtests (65060a8) crashed twice in update_state with FloatingPointError in
``from_epoch_seconds`` "converting a push-signal claim above 1e299 s"; a rerun of the same
day succeeded. No claim ever held such a value: pandas 2.3's ``to_datetime(float, unit="s")``
does not initialise its fraction buffer at NaN positions and rounds it with
``np.errstate(over="raise")``, so garbage above float max / 1e9 ≈ 1.8e299 left there by
earlier work raised (a rerun allocates differently). ``np.empty`` may return any bytes; the
``garbage_empty`` fixture makes its float buffers hold half the largest float, which turns
the chance crash into a certain one (for ``unit="us"`` too, where the limit is 1.8e305).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobs.config import Config, load_config
from jobs.core import replay, state_update, trust
from jobs.core.times import MAX_ABS_S, TimestampOutOfRange, epoch_seconds, from_epoch_seconds
from jobs.params import trust_params, update_params


@pytest.fixture
def garbage_empty(monkeypatch):
    """``np.empty`` float buffers full of garbage (pandas' Cython code looks it up by name)."""
    real = np.empty

    def empty(shape, dtype=float, *args, **kwargs):
        out = real(shape, dtype, *args, **kwargs)
        if out.dtype.kind == "f":
            out.fill(np.finfo(float).max / 2)
        return out

    monkeypatch.setattr(np, "empty", empty)


def _stamps(*iso):
    return pd.Series(pd.to_datetime(list(iso), utc=True)).astype("datetime64[ns, UTC]")


def test_nan_seconds_are_nat_whatever_np_empty_returns(garbage_empty):
    got = from_epoch_seconds([1_700_000_000.25, np.nan, np.nan])
    pd.testing.assert_series_equal(got, _stamps("2023-11-14T22:13:20.25Z", None, None))
    assert from_epoch_seconds([np.nan]).isna().all() and len(from_epoch_seconds([])) == 0


def test_same_timestamps_as_pandas_float_path_without_nan():
    # Known answers at the nearest microsecond, then pandas' float path (safe without NaN)
    # on 10^5 values, bit for bit.
    got = from_epoch_seconds([1.5, -0.5, 1e-7, -1e-7, 6e-7, MAX_ABS_S, -MAX_ABS_S])
    assert got.tolist()[:5] == [pd.Timestamp(x, tz="UTC") for x in (
        "1970-01-01T00:00:01.5", "1969-12-31T23:59:59.5", "1970-01-01", "1970-01-01",
        "1970-01-01T00:00:00.000001")]
    assert got[5] == pd.Timestamp("2262-04-11T23:47:16Z")
    sec = np.random.default_rng(14).uniform(-MAX_ABS_S, MAX_ABS_S, 100_000)
    want = pd.to_datetime(pd.Series(sec), unit="s", utc=True).dt.round("us")
    pd.testing.assert_series_equal(from_epoch_seconds(sec), want)


def test_microsecond_timestamps_survive_the_float_seconds_round_trip():
    # Every timestamp the fold reads as float seconds must come back bit for bit: a floor
    # moved about half of them back by 1 µs on each day's fold.
    rng = np.random.default_rng(42)
    us = np.concatenate([rng.integers(-2_208_988_800_000_000, 4_102_444_800_000_000, 200_000),
                         [0, 1, -1, 999_999, 1_764_547_200_123_457, 4_102_444_799_999_999]])
    ts = pd.Series(pd.to_datetime(us, unit="us", utc=True))  # 1900 .. 2099
    back = from_epoch_seconds(epoch_seconds(ts))
    np.testing.assert_array_equal(back.to_numpy(), ts.to_numpy())
    twice = from_epoch_seconds(epoch_seconds(back))
    np.testing.assert_array_equal(twice.to_numpy(), ts.to_numpy())


@pytest.mark.parametrize("bad", [np.inf, -np.inf, 1e299, MAX_ABS_S + 1.0, -MAX_ABS_S - 1.0])
def test_out_of_range_seconds_name_the_column_and_count_the_rows(bad):
    with pytest.raises(TimestampOutOfRange) as err:
        from_epoch_seconds([1.0, bad, np.nan, bad], "signal_claim_at")
    assert (err.value.column, err.value.rows, err.value.example) == ("signal_claim_at", 2, bad)
    assert "signal_claim_at" in str(err.value) and "2 row(s)" in str(err.value)


def _backfill_day():
    """Yesterday's state and today's logs and signals as the backfill wrote them: ``u`` has
    a trusted pending claim and is fetched twice today (its due visit and a pulled-forward
    refresh visit at the window's last second); ``w`` has an armed untrusted claim and no
    fetch; ``x`` was never confirmed (all-NaN times but first_seen) and is fetched once."""
    params = update_params(Config())
    day1 = pd.DataFrame({
        "url": ["u", "w", "x"], "host": "h.example", "status": [200, 200, 500],
        "fetched_at": pd.to_datetime(["2026-11-01T10:00Z"] * 3, utc=True),
        "etag": None, "last_modified": None, "content_hash": ["a", "b", None],
        "trust_etag": True, "trust_lm": True, "lane": "refresh"})
    sig = pd.DataFrame({"url": ["u", "w"], "signal_trusted": [True, False],
                        "signaled_at": pd.to_datetime(["2026-11-01T20:00Z"] * 2, utc=True)})
    state = state_update.fold_day(state_update.empty_state(), day1, "2026-11-01", params,
                                  signals=sig)[state_update.STATE_COLUMNS]
    day2 = day1.iloc[[0, 0, 2]].assign(
        fetched_at=pd.to_datetime(["2026-11-02T06:00:00Z", "2026-11-02T23:59:59Z",
                                   "2026-11-02T07:00:00Z"], utc=True),
        content_hash=["a2", "a2", None], status=[200, 200, 500]).reset_index(drop=True)
    return state, day2, params


def test_fold_of_a_backfill_day_does_not_read_uninitialised_memory(garbage_empty):
    state, logs, params = _backfill_day()
    got = state_update.fold_day(state, logs, "2026-11-02", params).set_index("url")
    # Known answers: u's claim is scored (changed) by the 06:00 fetch and cleared; the
    # 23:59:59 fetch observes no change; w's unscored claim is kept; x has no times but
    # first_seen and last_fetch_at.
    assert pd.isna(got.loc["u", "signal_claim_at"]) and pd.isna(got.loc["u", "pending_signal_at"])
    assert got.loc["u", "n_fetches"] == 3 and got.loc["u", "n_changes"] == 1
    assert got.loc["u", "ev_sig_correct"] == 1
    assert got.loc["u", "last_fetch_at"] == pd.Timestamp("2026-11-02T23:59:59Z")
    assert got.loc["w", "signal_claim_at"] == pd.Timestamp("2026-11-01T20:00Z")
    assert pd.isna(got.loc["w", "pending_signal_at"])
    for col in ("last_success_at", "last_change_at", "last_known_at", "signal_claim_at"):
        assert pd.isna(got.loc["x", col]), col
    assert got.loc["x", "last_fetch_at"] == pd.Timestamp("2026-11-02T07:00Z")


UNTIL = pd.Timestamp("2026-11-02T06:30:00.123456Z")  # inside the next day's window


def test_blocked_until_of_unblocked_hosts_is_nat_whatever_np_empty_returns(garbage_empty):
    today = pd.DataFrame({"host": ["a.example", "b.example"], "urls_known": 1, "fetches": 10,
                          "blocked_until": [np.nan, UNTIL.timestamp()]})
    for c in trust.VALIDATOR_EVIDENCE + trust.SIGNAL_EVIDENCE:
        today[c] = 0.0
    hosts = trust.update_hosts(pd.DataFrame(columns=list(trust.HOST_COLUMNS)), today,
                               "2026-11-01", trust_params(load_config())).set_index("host")
    assert pd.isna(hosts.loc["a.example", "blocked_until"])
    assert hosts.loc["b.example", "blocked_until"] == UNTIL


def test_timestamps_of_any_unit_are_read_as_seconds():
    # Arrow and pandas 2 may hand over datetime64[us]: ``astype("int64") / 1e9`` read those
    # as seconds 1000 times too small (a blocked host unblocked in 1970).
    stamps = _stamps("2026-11-02T06:00:00Z", None)
    want = [1_793_599_200.0, np.nan]
    for unit in ("ns", "us", "ms", "s"):
        s = stamps.astype(f"datetime64[{unit}, UTC]")
        np.testing.assert_array_equal(epoch_seconds(s), want)
        np.testing.assert_array_equal(trust._epoch_s(s), want)
    logs = pd.DataFrame({"host": "h.example", "status": [429], "retry_after": ["3600"],
                         "fetched_at": stamps[:1].astype("datetime64[us, UTC]")})
    today = replay.host_today(pd.DataFrame(columns=["host", *replay.EVIDENCE]), logs, 86400.0)
    assert today.blocked_until.tolist() == [1_793_599_200.0 + 3600]
