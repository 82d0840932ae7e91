import numpy as np
import pandas as pd
import pytest

from jobs.core import adaptive
from jobs.core.state_update import UpdateParams, empty_state, fold_day

H = 3600.0


def logs(rows):
    df = pd.DataFrame(rows, columns=["url", "fetched_at", "status", "etag", "last_modified",
                                     "content_hash"])
    df["host"] = "h.example"
    df["fetched_at"] = pd.to_datetime(df["fetched_at"], utc=True)
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


def test_changed_means_hash_differs_and_304_is_unchanged():
    day1 = logs([("u", "2026-11-01T00:00Z", 200, '"a"', None, "h1")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    assert s1.n_observations[0] == 0 and s1.interval_s[0] == 86400  # baseline only
    day2 = logs([("u", "2026-11-02T00:00Z", 200, '"b"', None, "h1"),   # same hash: unchanged
                 ("u", "2026-11-02T06:00Z", 304, None, None, None),    # 304: unchanged
                 ("u", "2026-11-02T12:00Z", 200, '"c"', None, "h2")])  # changed
    s2 = fold_day(s1, day2, "2026-11-02")
    row = s2.iloc[0]
    assert row.n_observations == 3 and row.n_changes == 1
    assert row.exposure_days == pytest.approx(1.5)
    assert row.interval_s == 86400 * 2 * 2 / 2
    assert row.etag == '"c"' and row.content_hash == "h2"
    assert row.last_change_at == pd.Timestamp("2026-11-02T12:00Z")
    assert row.n_fetches == 4


def test_errors_gone_and_order_independence():
    day1 = logs([("u", "2026-11-01T00:00Z", 200, None, None, "x"),
                 ("v", "2026-11-01T00:00Z", 200, None, None, "y")])
    s1 = fold_day(empty_state(), day1, "2026-11-01")
    day2 = logs([("u", "2026-11-02T03:00Z", 404, None, None, None),
                 ("u", "2026-11-02T01:00Z", 503, None, None, None),
                 ("u", "2026-11-02T05:00Z", 410, None, None, None),
                 ("v", "2026-11-02T01:00Z", 0, None, None, None)])
    s2 = fold_day(s1, day2.sample(frac=1, random_state=3), "2026-11-02", UpdateParams(gone_after=2))
    u = s2.set_index("url").loc["u"]
    assert u.gone and u.consecutive_gone == 2 and u.n_errors == 1 and u.n_observations == 0
    assert u.last_status == 410
    v = s2.set_index("url").loc["v"]
    assert not v.gone and v.n_errors == 1 and v.content_hash == "y"
    day3 = logs([("u", "2026-11-03T00:00Z", 200, None, None, "x")])
    s3 = fold_day(s2, day3, "2026-11-03")
    assert not s3.set_index("url").loc["u"].gone


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
    for day in range(1, 6):
        part = all_logs[all_logs.fetched_at.dt.day == day]
        state = fold_day(state, part, f"2026-11-0{day}")
    one_shot = fold_day(empty_state(), all_logs, "2026-11-05")
    cols = ["url", "n_fetches", "n_observations", "n_changes", "exposure_days", "interval_s",
            "content_hash", "n_errors"]
    a = state[cols].sort_values("url").reset_index(drop=True)
    b = one_shot[cols].sort_values("url").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
