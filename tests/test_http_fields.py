"""Header values sent to the fleet follow RFC 9110's grammar, matched on the whole string."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobs.core import http_fields

GOOD_DATE = "Sun, 06 Nov 1994 08:49:37 GMT"


@pytest.mark.parametrize("value", ['"abc"', 'W/"x-1"', '""', '"!#~"', '"' + "a" * 500 + '"'])
def test_etags_of_the_grammar_pass(value):
    assert http_fields.valid_etag(value) is True


@pytest.mark.parametrize("value", [
    '"e"\n',                 # re.match + "$" accepted this: header injection via a trailing LF
    '"e"\r\n', '"e"\r', '\n"e"', '"e"\nX-Injected: 1',
    '"e\x85"',               # C1 control (NEL)
    '"e\x9b"',               # C1 control (CSI)
    '"caf\xe9"',             # obs-text as a code point: refused on purpose (ASCII only)
    '"\u00e9t\u00e9"', '"\u2028"', '"e\u0000"', '"a b"', '"a"b"', '"a\x7f"',
    'w/"x"', 'W/ "x"', ' "x"', '"x" ', "abc", '"' + "a" * 511 + '"', None, 42, b'"e"',
])
def test_etags_outside_the_grammar_fail(value):
    assert http_fields.valid_etag(value) is False


@pytest.mark.parametrize("value", [GOOD_DATE, "Thu, 01 Jan 1970 00:00:00 GMT",
                                   "Tue, 29 Feb 2028 23:59:59 GMT"])
def test_imf_fixdates_pass(value):
    assert http_fields.valid_http_date(value) is True


@pytest.mark.parametrize("value", [
    GOOD_DATE + "\n",        # trailing LF: matched by the old "$" pattern
    GOOD_DATE + "\r\n", GOOD_DATE + "\r\nX: y", " " + GOOD_DATE, GOOD_DATE + " ",
    "Mon, 06 Nov 1994 08:49:37 GMT",  # 6 Nov 1994 was a Sunday
    "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
    "Sun, \u0660\u0666 Nov 1994 08:49:37 GMT",  # Arabic-Indic digits match "\d"
    "Sun, 06 Nov 1994 08:49:37 gmt", "Sunday, 06-Nov-94 08:49:37 GMT",
    "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 GMT\x85", "yesterday", "", None,
])
def test_other_dates_fail(value):
    assert http_fields.valid_http_date(value) is False


def test_clean_keeps_only_valid_values():
    etags = pd.Series(['"ok"', '"e"\n', None, 'W/"w"'])
    assert http_fields.clean_etags(etags).tolist() == ['"ok"', None, None, 'W/"w"']
    dates = pd.Series([GOOD_DATE, GOOD_DATE + "\n", np.nan])
    assert http_fields.clean_dates(dates).tolist() == [GOOD_DATE, None, None]


def test_header_checks_cover_the_published_header_columns():
    from jobs.fleet.schedule import SCHEDULE_SCHEMA
    headers = {n for n in SCHEDULE_SCHEMA.names if n.startswith("if_")}
    assert set(http_fields.HEADER_CHECKS) == headers


@pytest.mark.parametrize("value, ok", [
    ("https://h.example.org/a?b=c", True), ("https://b\u00fccher.example/", True),
    ("https://h/a\r\nX: 1", False), ("https://h/a\n", False), ("https://h/a b", False),
    ("https://h/\x85", False), ("https://h/\x7f", False), ("", False), (None, False),
])
def test_request_text_refuses_what_could_split_a_request(value, ok):
    assert http_fields.safe_request_text(value) is ok
