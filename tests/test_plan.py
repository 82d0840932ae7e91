import numpy as np
import pandas as pd
import pytest

from jobs.core import http_fields, plan
from jobs.core.host_plan import plan_host

W0 = 1_800_000_000.0
W1 = W0 + 86400


def test_host_cap_takes_the_stricter_limit():
    assert plan.host_cap([10.0, 10.0, 7.0], [None, 100, 1e9]).tolist() == [8640, 100, 12342]


def test_due_visits_are_evenly_spaced_and_ranked():
    pages = pd.DataFrame({
        "url": ["fast", "slow", "new"], "rate": [4.0, 0.5, 1.0],
        "last_fetch_s": [W0 - 3 * 3600, W0 - 86400, np.nan],
        "last_success_s": [W0 - 3 * 3600, W0 - 86400, np.nan],
        "lambda_hat": [2.0, 0.1, 0.0], "importance": [1.0, 1.0, 3.0],
        "lane": ["refresh", "refresh", "discovery"]})
    v = plan.due_visits(pages, W0, W1)
    fast = v[v.url == "fast"].due_s.to_numpy()
    assert fast[0] == W0 + 3 * 3600 and np.allclose(np.diff(fast), 6 * 3600) and len(fast) == 4
    slow = v[v.url == "slow"]
    assert len(slow) == 0  # due exactly at W1: tomorrow's window
    new = v[v.url == "new"]
    assert len(new) == 1 and new.p_changed.iloc[0] == 1.0 and new.priority.iloc[0] == 3.0
    kept, carried = plan.apply_host_cap(v, 2)
    assert kept.url.tolist()[0] == "new" and len(carried) == len(v) - 2


@pytest.mark.parametrize("seed", range(20))
def test_slots_respect_delay_and_window(seed):
    rng = np.random.default_rng(seed)
    delay = float(rng.uniform(0.5, 600))
    n = int(rng.integers(1, int(86400 // delay) + 1))
    due = rng.uniform(W0 - 5000, W1 + 5000, n)
    t = plan.place_in_slots(due, delay, W0, W1, rng.uniform(0, 1, n))
    assert t.min() >= W0 and t.max() < W1
    if n > 1:
        assert np.diff(np.sort(t)).min() >= delay - 1e-6
    # Nothing is placed earlier than its due time unless the tail had to move back.
    assert np.all((t >= np.minimum(np.maximum(due, W0), W1) - 1e-6) | (t > W1 - n * delay - 1))


def test_slots_refuse_impossible_packing():
    with pytest.raises(ValueError):
        plan.place_in_slots(np.zeros(11), 10_000.0, W0, W1)


@pytest.mark.parametrize("value, ok", [
    ('"abc"', True), ('W/"x-1"', True), ('""', True), ("abc", False),
    ('"a\r\nX-Injected: 1"', False), ('"a\x00"', False), ('"a"b"', False), (None, False),
])
def test_etag_grammar(value, ok):
    assert http_fields.valid_etag(value) is ok


@pytest.mark.parametrize("value, ok", [
    ("Sun, 06 Nov 1994 08:49:37 GMT", True), ("Sunday, 06-Nov-94 08:49:37 GMT", False),
    ("Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y", False), ("yesterday", False),
])
def test_http_date_grammar(value, ok):
    assert http_fields.valid_http_date(value) is ok


def test_plan_host_headers_come_from_validators_and_bad_ones_force_full():
    pages = pd.DataFrame({
        "host": "h", "url": ["a", "b", "c", "d"], "lane": "refresh", "rate": 1.0,
        "lambda_hat": 1.0, "importance": [4.0, 3.0, 2.0, 1.0],
        "last_fetch_at": pd.to_datetime([W0 - 86400] * 4, unit="s", utc=True),
        "last_success_at": pd.to_datetime([W0 - 86400] * 4, unit="s", utc=True),
        "etag": ['"good"', '"evil\r\nX: 1"', None, '"fine"'],
        "last_modified": [None, None, "Sun, 06 Nov 1994 08:49:37 GMT", None],
        "crawl_delay_s": 30.0, "max_fetches_per_day": [3, 3, 3, 3],
        "method_hint": ["conditional", "conditional", "conditional", "full"]})
    out = plan_host(pages, W0, W1)
    visits = out[out.url.notna()].set_index("url")
    assert len(visits) == 3  # cap 3: the least important waits
    assert visits.loc["a"].method == "conditional" and visits.loc["a"].if_none_match == '"good"'
    assert visits.loc["b"].method == "full" and visits.loc["b"].if_none_match is None
    assert visits.loc["c"].method == "conditional"
    assert visits.loc["c"].if_modified_since == "Sun, 06 Nov 1994 08:49:37 GMT"
    summary = out[out.url.isna()].iloc[0]
    assert summary.due_count == 4 and summary.carried == 1 and summary.known_urls == 4
