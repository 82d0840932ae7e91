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


# -- received HTTP-dates: the three forms RFC 9110 §5.6.7 makes a recipient accept ---------
SUNDAY_1994 = 784111777  # Sun, 06 Nov 1994 08:49:37 GMT, the RFC's own example
FETCHED = 1796083200     # 2026-12-01T00:00:00Z, the fetch that received the value


@pytest.mark.parametrize("value", [
    GOOD_DATE,                            # IMF-fixdate
    "Sunday, 06-Nov-94 08:49:37 GMT",     # obsolete RFC 850 form
    "Sun Nov  6 08:49:37 1994",           # ANSI C asctime(): SP SP DIGIT
    "Sun Nov 06 08:49:37 1994",           # asctime's other date3: 2DIGIT
])
def test_the_three_forms_of_the_rfc_example_parse_to_the_same_instant(value):
    assert http_fields.parse_http_date(value, FETCHED) == SUNDAY_1994


@pytest.mark.parametrize("value, expected", [
    # the limit is 50 years after the fetch, to the second
    ("Tuesday, 01-Dec-76 00:00:00 GMT", 3374006400),     # 2076: exactly 50 years ahead
    ("Wednesday, 01-Dec-76 00:00:01 GMT", 218246401),    # 2076 +1 s is too far: 1976
    ("Friday, 01-Jan-27 00:00:00 GMT", 1798761600),      # next year stays ahead
    ("Tuesday, 01-Dec-26 00:00:00 GMT", FETCHED),
    ("Saturday, 01-Jan-77 00:00:00 GMT", 220924800),     # 2077 is > 50 years ahead
])
def test_rfc850_two_digit_years_are_read_as_of_the_fetch(value, expected):
    assert http_fields.parse_http_date(value, FETCHED) == expected


def test_rfc850_century_follows_the_fetch_not_the_clock():
    in_2099 = 4083955200  # 2099-06-01: "10" is 11 years ahead, "80" would be 81 years ahead
    assert http_fields.parse_http_date("Saturday, 01-Mar-10 00:00:00 GMT", in_2099) == \
        4423075200       # 2110-03-01
    assert http_fields.parse_http_date("Monday, 01-Mar-10 00:00:00 GMT", FETCHED) == \
        1267401600       # 2010-03-01
    # The weekday is checked against the year chosen: 1 Mar 2010 was a Monday, not 2110's Saturday.
    assert http_fields.parse_http_date("Saturday, 01-Mar-10 00:00:00 GMT", FETCHED) is None
    # No fetch time, no century: refused (the other two forms carry four digits).
    for unknown in (None, float("nan")):
        assert http_fields.parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", unknown) is None
        assert http_fields.parse_http_date("Sun Nov  6 08:49:37 1994", unknown) == SUNDAY_1994


@pytest.mark.parametrize("value", [
    # IMF-fixdate near-misses (as test_other_dates_fail)
    GOOD_DATE + "\n", GOOD_DATE + "\r\nX: y", " " + GOOD_DATE, GOOD_DATE + " ",
    "Mon, 06 Nov 1994 08:49:37 GMT", "Sun, 31 Feb 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49:60 GMT",
    "Sun, \u0660\u0666 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 gmt",
    "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun 06 Nov 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000", "Sun, 06 Nov 0000 08:49:37 GMT",
    # RFC 850 near-misses
    "Sunday, 06-Nov-94 08:49:37 GMT\n", "Sunday, 06-Nov-94 08:49:37 GMT\r\nX: y",
    " Sunday, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT ",
    "Sun, 06-Nov-94 08:49:37 GMT",        # short day name
    "sunday, 06-Nov-94 08:49:37 GMT", "Sunday, 06-nov-94 08:49:37 GMT",  # case-sensitive
    "Monday, 06-Nov-94 08:49:37 GMT",     # 6 Nov 1994 was a Sunday
    "Saturday, 06-Nov-94 08:49:37 GMT",   # ... and it is not 2094 (a Saturday)
    "Sunday, 06 Nov 94 08:49:37 GMT", "Sunday,06-Nov-94 08:49:37 GMT",
    "Sunday, 6-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
    "Sunday, 06-Nov-94 8:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 UTC",
    "Sunday, 06-Nov-94 08:49:37", "Sunday, 31-Feb-94 08:49:37 GMT",
    "Sunday, 06-Nov-94 24:00:00 GMT", "Sunday, \u0660\u0666-Nov-94 08:49:37 GMT",
    "Sunday, 06-Nov-\u0669\u0664 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT\x85",
    # asctime near-misses
    "Sun Nov  6 08:49:37 1994\n", "Sun Nov  6 08:49:37 1994\r\nX: y", " Sun Nov  6 08:49:37 1994",
    "Sun Nov  6 08:49:37 1994 ", "Sun Nov 6 08:49:37 1994",   # one space before one digit
    "Sun Nov  06 08:49:37 1994",          # two spaces before two digits
    "Sun Nov\t 6 08:49:37 1994", "Sun Nov  6 08:49:37 94", "Sun Nov  6 08:49:37 1994 GMT",
    "Sun, Nov  6 08:49:37 1994", "Sunday Nov  6 08:49:37 1994", "sun nov  6 08:49:37 1994",
    "Mon Nov  6 08:49:37 1994", "Sun Nov 31 08:49:37 1994", "Sun Nov  6 24:00:00 1994",
    "Sun Nov \u0666 08:49:37 1994", "Sun Nov  6 08:49:37 \u0661\u0669\u0669\u0664",
    # not dates at all
    "yesterday", "", "784111777", None, 784111777, b"Sun, 06 Nov 1994 08:49:37 GMT",
    GOOD_DATE * 20,
])
def test_near_misses_of_every_form_are_refused(value):
    assert http_fields.parse_http_date(value, FETCHED) is None
    assert np.isnan(http_fields.parse_http_dates([value], [FETCHED])[0])
    assert http_fields.normalise_http_dates([value], [FETCHED])[0] is value  # kept, never sent
    assert http_fields.valid_http_date(value) is False or value == GOOD_DATE


def test_imf_fixdate_matches_the_standard_library_and_parses_back():
    from email.utils import formatdate

    rng = np.random.default_rng(7)
    # 1900-2100, plus the epoch and the RFC example
    for s in [0, SUNDAY_1994, *rng.integers(-2_208_988_800, 4_102_444_800, 2000).tolist()]:
        text = http_fields.imf_fixdate(s)
        assert text == formatdate(s, usegmt=True)
        assert http_fields.valid_http_date(text) and http_fields.parse_http_date(text) == s


def test_received_dates_are_kept_as_the_imf_fixdate_that_is_sent():
    values = [GOOD_DATE, "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
              "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "soon", None]
    at = [FETCHED, FETCHED, np.nan, np.nan, FETCHED, FETCHED, FETCHED]
    kept = http_fields.normalise_http_dates(values, at)
    assert kept.tolist() == [GOOD_DATE, GOOD_DATE, GOOD_DATE,
                             "Sunday, 06-Nov-94 08:49:37 GMT",  # no fetch time: no century
                             "Sun Nov 6 08:49:37 1994", "soon", None]
    # What may be sent stays IMF-fixdate only.
    assert http_fields.clean_dates(pd.Series(kept)).tolist() == [GOOD_DATE] * 3 + [None] * 4
    assert http_fields.parse_http_dates(kept[:3]).tolist() == [SUNDAY_1994] * 3


# -- Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as a "not before" instant --
@pytest.mark.parametrize("value, expected", [
    ("120", FETCHED + 120), ("0", FETCHED), ("0000000120", FETCHED + 120),   # 1*DIGIT
    ("9999999999", FETCHED + 9999999999),           # ten digits: the most we read
    (GOOD_DATE, SUNDAY_1994),                       # a past date: no wait, returned as it is
    ("Tue, 01 Dec 2026 06:00:00 GMT", FETCHED + 6 * 3600),
    ("Tuesday, 01-Dec-26 06:00:00 GMT", FETCHED + 6 * 3600),   # RFC 850, century by the fetch
    ("Tue Dec  1 06:00:00 2026", FETCHED + 6 * 3600),          # asctime
])
def test_retry_after_of_the_grammar(value, expected):
    assert http_fields.parse_retry_after(value, FETCHED) == expected
    assert http_fields.parse_retry_afters([value], [FETCHED])[0] == expected


@pytest.mark.parametrize("value", [
    "+120", "-1", "-0", " 120", "120 ", "\t120", "120\n", "120\r\nX: y", "\n120",
    "1.5", "120.", ".5", "1e3", "0x10", "1_000", "1,000", "120, 60", "120s", "12 0",
    "\u0661\u0662\u0660",        # Arabic-Indic digits: str.isdigit() and "\d" say yes
    "\uff11\uff12\uff10",        # full-width digits
    "\u00b2",                    # superscript two
    "12345678901", "9" * 40, "9" * 4000,   # absurd: more than ten digits
    "Infinity", "inf", "NaN", "", " ", "120\x00", "120\x85",
    "Tue, 01 Dec 2026 06:00:00 GMT\r\n", "Tue, 01 Dec 2026 06:00:00 UTC",
    "Mon, 01 Dec 2026 06:00:00 GMT",       # wrong weekday
    "Fri, 31 Dec 9999 23:59:60 GMT",
    None, 120, 120.0, b"120", ["120"],
])
def test_hostile_retry_after_is_refused(value):
    assert http_fields.parse_retry_after(value, FETCHED) is None
    assert np.isnan(http_fields.parse_retry_afters([value], [FETCHED])[0])


def test_retry_after_delay_needs_the_receipt_time():
    for unknown in (None, float("nan"), "soon"):
        assert http_fields.parse_retry_after("120", unknown) is None
    assert http_fields.parse_retry_after(GOOD_DATE, None) == SUNDAY_1994
    got = http_fields.parse_retry_afters(["120", "60", GOOD_DATE], [np.nan, FETCHED, np.nan])
    assert np.isnan(got[0]) and got[1:].tolist() == [FETCHED + 60, SUNDAY_1994]


def _mutated_dates(seed: int, n: int) -> list:
    """Real IMF-fixdates over five millennia and single-character mutations of them."""
    rng = np.random.default_rng(seed)
    base = [http_fields.imf_fixdate(int(s)) for s in rng.integers(-3 * 10**10, 2.5 * 10**11, 400)]
    base += ["Sat, 29 Feb 2020 00:00:00 GMT", "Fri, 29 Feb 2019 00:00:00 GMT",
             "Mon, 01 Jan 0001 00:00:00 GMT", "Sat, 01 Jan 0000 00:00:00 GMT",
             "Thu, 01 Jan 1970 00:00:60 GMT", "Thu, 01 Jan 1970 24:00:00 GMT",
             "Fri, 31 Dec 9999 23:59:59 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
             "Sun Nov  6 08:49:37 1994", "Thu, 01 Jan 1970 00:00:00 GMT\n"]
    alphabet = list("0123456789 ,:-MonTueFriSatSunJanFebDecGMTx\n\x00\u00e9\u0661")
    out = list(base)
    for _ in range(n):
        v = list(base[rng.integers(len(base))])
        i = int(rng.integers(len(v) + 1))
        op = rng.integers(3)
        if op == 0 and i < len(v):
            v[i] = alphabet[rng.integers(len(alphabet))]
        elif op == 1:
            v.insert(i, alphabet[rng.integers(len(alphabet))])
        elif i < len(v):
            del v[i]
        out.append("".join(v))
    return out + [None]


@pytest.mark.parametrize("extra", [[], [5, 3.5, b"x", float("nan")]])
def test_vectorised_dates_agree_with_the_scalar_grammar_on_hostile_values(extra):
    # Arrow's path (str or None only) and the loop's (anything else in the column).
    values = _mutated_dates(3, 6000) + extra
    received = np.where(np.arange(len(values)) % 3 == 0, np.nan, float(FETCHED))
    scalar = [http_fields.parse_http_date(v, None if np.isnan(r) else r)
              for v, r in zip(values, received)]
    parsed = http_fields.parse_http_dates(values, received)
    assert [None if np.isnan(s) else int(s) for s in parsed] == scalar
    assert sum(s is not None for s in scalar) > 400  # the sample holds valid dates too
    valid = [v if http_fields.valid_http_date(v) else None for v in values]
    assert http_fields.clean_dates(pd.Series(values, dtype=object)).tolist() == valid
    grammar, seconds = http_fields.imf_fixdates(values)
    assert grammar.tolist() == [isinstance(v, str) and http_fields._IMF.fullmatch(v) is not None
                                for v in values]
    assert (~np.isnan(seconds)).tolist() == [v is not None for v in valid]
    normalised = http_fields.normalise_http_dates(values, received)
    for v, r, got in zip(values, received, normalised):
        s = (http_fields.parse_http_date(v, None if np.isnan(r) else r)
             if isinstance(v, str) and http_fields._IMF.fullmatch(v) is None else None)
        assert got == (http_fields.imf_fixdate(s) if s is not None else v) or got is v
