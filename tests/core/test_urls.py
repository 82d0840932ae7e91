"""URL canonicalisation (jobs/core/urls.py): the rules, and the merge of one page's rows."""
from __future__ import annotations

import random
from datetime import datetime, timezone

import pandas as pd
import pytest

from jobs.core.hosts import url_host, url_problem
from jobs.core.urls import canonical_url, merge_spellings, remove_dot_segments


@pytest.mark.parametrize("given, expected", [
    ("https://H0001.EXAMPLE.COM./a", "https://h0001.example.com/a"),   # host case, dot
    ("HTTP://h.example/a", "http://h.example/a"),                        # scheme case
    ("http://h.example:80/a", "http://h.example/a"),                     # default ports
    ("https://h.example:443/a", "https://h.example/a"),
    ("https://h.example:080/a", "https://h.example:80/a"),               # not https' port
    ("http://h.example:/a", "http://h.example/a"),                       # empty port
    ("http://h.example", "http://h.example/"),                           # empty path
    ("http://h.example?q=1", "http://h.example/?q=1"),
    ("http://h.example/a#section-2", "http://h.example/a"),              # fragment
    ("http://h.example/%7Euser/%41%2d%5f%2E", "http://h.example/~user/A-_."),  # unreserved
    ("http://h.example/a%2fb%3a?x=%2f%e9", "http://h.example/a%2Fb%3A?x=%2F%E9"),  # hex case
    ("http://h.example/a/./b/../c", "http://h.example/a/c"),             # dot segments
    ("http://h.example/%2E%2E/a", "http://h.example/a"),
    ("http://h.example/b?z=1&a=2", "http://h.example/b?z=1&a=2"),        # query order kept
    ("http://h.example/b?", "http://h.example/b?"),                      # empty query kept
    ("http://bücher.example/straße", "http://xn--bcher-kva.example/stra%C3%9Fe"),
    ("http://[2001:DB8::1]:80/", "http://[2001:db8::1]/"),
    ("http://h.example/100%", "http://h.example/100%"),                  # a lone % is kept
])
def test_each_rule_of_rfc_3986_section_6(given, expected):
    assert canonical_url(given) == expected


@pytest.mark.parametrize("url", [None, "ftp://h.example/", "mailto:a@h.example",
                                 "http://user:pw@h.example/", "//h.example/a", "http://",
                                 "http://bad host/"])
def test_urls_without_a_canonical_form(url):
    assert canonical_url(url) is None


def test_dot_segment_removal_is_rfc_3986_5_2_4():
    # The examples of RFC 3986 §5.2.4 and §5.4.
    assert remove_dot_segments("/a/b/c/./../../g") == "/a/g"
    assert remove_dot_segments("mid/content=5/../6") == "mid/6"
    assert remove_dot_segments("/../../g") == "/g"
    assert remove_dot_segments("/a/..") == "/"


def _spellings(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(spelling, what it must canonicalise to) pairs of generated URLs."""
    out = []
    for _ in range(n):
        host = ".".join(rng.choice(["h", "www", "a1", "x-y"]) + str(rng.randrange(50))
                        for _ in range(rng.randrange(1, 3))) + ".example"
        scheme = rng.choice(["http", "https"])
        segs = ["".join(rng.choice("abcXYZ019-._~") for _ in range(rng.randrange(1, 6)))
                for _ in range(rng.randrange(0, 4))]
        path = "/" + "/".join(segs)
        query = rng.choice([None, "", "b=2&a=1", "q=%2F"])
        plain = f"{scheme}://{host}{path}" + ("" if query is None else f"?{query}")
        spelt_host = "".join(c.upper() if rng.random() < 0.5 else c for c in host)
        spelt_host += "." if rng.random() < 0.3 else ""
        port = rng.choice(["", f":{80 if scheme == 'http' else 443}", ":"])
        spelt_path = "".join(f"%{ord(c):02x}" if c.isalnum() and rng.random() < 0.2 else c
                             for c in path) or ""
        if path == "/" and rng.random() < 0.5:
            spelt_path = ""
        frag = rng.choice(["", "#x", "#"])
        spelt = (f"{scheme.upper() if rng.random() < 0.3 else scheme}://{spelt_host}{port}"
                 f"{spelt_path}" + ("" if query is None else f"?{query}") + frag)
        out.append((spelt, plain))
    return out


def test_generated_spellings_reach_one_canonical_url_which_is_a_fixed_point():
    for spelt, plain in _spellings(random.Random(7), 2000):
        canon = canonical_url(spelt)
        assert canon == canonical_url(plain), spelt
        assert canonical_url(canon) == canon
        assert url_problem(canon, 2048) is None and url_host(canon) == url_host(spelt)


def _t(day, hour=0):
    return pd.Timestamp(datetime(2026, 11, day, hour, tzinfo=timezone.utc))


def test_merge_keeps_the_latest_success_and_sums_only_the_fetch_counts():
    key = "https://h.example/a"
    rows = pd.DataFrame({
        "url": ["https://H.EXAMPLE/a", key, "https://h.example./a#x"],
        "_canonical": [key, key, key],
        "first_seen": [_t(1), _t(5), _t(3)],
        "last_fetch_at": [_t(20), _t(19), _t(21)],
        "last_success_at": [_t(20), _t(18), pd.NaT],
        "etag": ['"new"', '"old"', None],
        "n_fetches": [10, 4, 2], "n_errors": [1, 0, 2], "n_observations": [8, 3, 0],
        "importance": [0.5, 2.0, 1.0]})
    (row,) = merge_spellings(rows).to_dict("records")
    assert row["url"] == key and row["etag"] == '"new"' and row["n_observations"] == 8
    assert row["first_seen"] == _t(1) and row["last_fetch_at"] == _t(20)
    assert (row["n_fetches"], row["n_errors"], row["importance"]) == (16, 3, 2.0)


def test_merge_ties_prefer_the_row_already_spelt_canonically():
    key = "https://h.example/a"
    rows = pd.DataFrame({"url": ["https://H.example/a", key], "_canonical": [key, key],
                         "first_seen": [_t(1), _t(1)], "last_fetch_at": [_t(2), _t(2)],
                         "last_success_at": [_t(2), _t(2)], "etag": ["upper", "canon"],
                         "n_fetches": [1, 1], "n_errors": [0, 0], "importance": [1.0, 1.0]})
    assert merge_spellings(rows)["etag"].tolist() == ["canon"]
