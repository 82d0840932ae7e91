"""One host rule and one URL rule (jobs.core.hosts), and its Spark twin agrees (issue 9 §2)."""
from __future__ import annotations

import pytest

from jobs import ingest
from jobs.core import hosts
from tests.conftest import make_config

HOST_CASES = [
    ("h.example.com", "h.example.com"),
    ("H.Example.COM", "h.example.com"),
    ("h.example.com.", "h.example.com"),
    ("h.example.com ", "h.example.com"),
    ("\th.example.com.\n", "h.example.com"),
    ("bücher.example", "xn--bcher-kva.example"),
    ("BÜCHER.example.", "xn--bcher-kva.example"),
    ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
    ("a\u3002b", "a.b"),
    ("xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("10.0.0.1", "10.0.0.1"),
    ("[::1]", "[::1]"),
    ("h.example.com..", None),
    ("", None),
    (" ", None),
    (".", None),
    ("exa mple.com", None),
    ("a..b", None),
    ("ü..example", None),
    ("h.example.com\u2028", None),
    ("h.example.com\u00a0", None),
    ("ü" * 70 + ".example", None),
    ("xn--ü.example", None),
    ("a" * 64 + ".example", None),
    (".".join(["a" * 63] * 4), None),  # 255 characters
    ("h/x.example", None),
    (None, None),
]

URL_CASES = [  # (url, reason, host)
    ("https://h.example.com/a", None, "h.example.com"),
    ("HTTP://H.Example.com:8080/a?b#c", None, "h.example.com"),
    ("https://h.example.com./a", None, "h.example.com"),
    ("https://bücher.example/straße", None, "xn--bcher-kva.example"),
    ("https://[::1]:443/", None, "[::1]"),
    ("https://h.example.com", None, "h.example.com"),
    ("https://h.example.com?q", None, "h.example.com"),
    (None, "null_url", None),
    ("https://h.example.com/" + "a" * 3000, "url_too_long", None),
    ("not a url", "bad_url", None),
    ("ftp://h.example.com/", "bad_url", None),
    ("https:///path", "bad_url", None),
    ("https://", "bad_url", None),
    ("https://h.example.com/a b", "bad_url", None),
    ("https://h.example.com/a\n", "bad_url", None),
    ("https://h.example.com/\x85", "bad_url", None),
    ("https://h.example.com:80x/", "bad_url", None),
    ("https://exa mple.com/", "bad_url", None),
    ("https://" + "ü" * 70 + ".example/", "bad_url", None),
    ("https://user:pass@h.example.com/", "url_userinfo", "h.example.com"),
    ("https://user@h.example.com/", "url_userinfo", "h.example.com"),
    ("https://a@b@h.example.com/", "url_userinfo", "h.example.com"),
    ("https://user:pass@/x", "bad_url", None),
    # Empty and broken hosts (the frontier once let these through: issue 11).
    ("", "bad_url", None),
    ("https://?q=1", "bad_url", None),
    ("https://#top", "bad_url", None),
    ("https://:8080/x", "bad_url", None),
    ("https://@/x", "bad_url", None),
    ("https://./x", "bad_url", None),
    ("http://[::1/", "bad_url", None),
    ("https://h.example:\u0661\u0662/", "bad_url", None),     # non-ASCII digits in the port
    ("https://h.example:\uff18\uff10/", "bad_url", None),
    ("https://h.example\u3002/x", "bad_url", None),            # ideographic full stop at the end
    ("https://h.example\t/x", "bad_url", None),
    ("https:// h.example/", "bad_url", None),
    ("https:h.example/x", "bad_url", None),
    ("javascript://h.example/", "bad_url", None),
    ("https://h.example:/x", None, "h.example"),
    ("https://h_1.example/x", None, "h_1.example"),
    ("https://h.example/\u2028", None, "h.example"),
]


@pytest.mark.parametrize("raw, want", HOST_CASES)
def test_normalize_host(raw, want):
    assert hosts.normalize_host(raw) == want


@pytest.mark.parametrize("url, reason, host", URL_CASES)
def test_url_rule(url, reason, host):
    assert hosts.url_problem(url, 2048) == reason
    if host is not None:
        assert hosts.url_host(url) == host


def test_spark_host_rule_agrees_with_the_pure_one(spark):
    df = spark.createDataFrame([(raw,) for raw, _ in HOST_CASES], "h string")
    got = [r["n"] for r in ingest.with_normalized_host(df, df["h"], "n").select("n").collect()]
    assert got == [hosts.normalize_host(raw) for raw, _ in HOST_CASES]


def test_spark_url_rule_agrees_with_the_pure_one(spark, tmp_path):
    cfg = make_config(str(tmp_path))
    df = spark.createDataFrame([(u,) for u, _, _ in URL_CASES], "url string")
    rows = ingest.with_url_checks(df, cfg).select("_url_reason", "_host").collect()
    got = [(r["_url_reason"], r["_host"] if r["_url_reason"] in (None, "url_userinfo") else None)
           for r in rows]
    want = [(hosts.url_problem(u, cfg.ingest.max_url_length),
             hosts.url_host(u) if reason in (None, "url_userinfo") else None)
            for u, reason, _ in URL_CASES]
    assert got == want
