"""Validation of validator header values against the HTTP field grammar (RFC 9110).

Values come from servers we do not trust. A value that fails here never reaches a
fetcher's request: the URL is fetched ``full`` instead. The main danger is CR/LF (header
injection into the fleet's requests) and other control characters.

Three rules keep the checks honest:

* **Full-string matching.** Every pattern is applied with ``re.fullmatch``. ``re.match``
  with a trailing ``$`` also accepts a value ending in ``"\\n"`` (``$`` matches before a
  final newline), which is exactly the injection we guard against.
* **ASCII only.** RFC 9110 lets an entity-tag carry ``obs-text`` (%x80-FF), but our values
  are Python ``str`` (code points, not octets): %x80-9F are C1 controls, and anything
  above %xFF is not a field octet at all, so its encoding on the wire would be up to each
  fetcher's HTTP library. We refuse every non-ASCII character; such a URL is fetched
  ``full``, which is always safe.
* **Explicit character classes.** ``\\d`` in a ``str`` pattern matches any Unicode digit
  (e.g. Arabic-Indic ``"٠٦"``), so digits are spelt ``[0-9]``.

``verify`` re-checks every published header value with the same functions
(:data:`HEADER_CHECKS`), so the planner and the check cannot drift apart.

**HTTP dates** (RFC 9110 §5.6.7): a recipient must accept three forms, so a Last-Modified
received in any of them is parsed (:func:`parse_http_date`)::

    Sun, 06 Nov 1994 08:49:37 GMT    IMF-fixdate
    Sunday, 06-Nov-94 08:49:37 GMT   obsolete RFC 850 format (two-digit year)
    Sun Nov  6 08:49:37 1994         ANSI C asctime() format

but a sender must generate IMF-fixdate, so only that form is ever sent as If-Modified-Since
(:func:`valid_http_date`): the state keeps every Last-Modified received in the other two
forms rewritten into it (:func:`normalise_http_dates`). The grammar is case-sensitive, as the
RFC says.

**Retry-After** (RFC 9110 §10.2.3, received with 429 and 503): ``HTTP-date / delay-seconds``
with ``delay-seconds = 1*DIGIT``. :func:`parse_retry_after` turns either into the absolute
"not before" instant as of the response's receipt; the HTTP-date is read by
:func:`parse_http_date` (all three forms). Delay-seconds are ASCII digits only (no sign,
space, decimal point or exponent) and at most :data:`MAX_DELAY_DIGITS` of them: a longer
value is refused rather than trusted (the caller caps what it honours anyway,
:func:`jobs.core.host_health.blocked_until`).
"""
from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# entity-tag = [ weak ] opaque-tag ; weak = %s"W/" ; opaque-tag = DQUOTE *etagc DQUOTE
# etagc = %x21 / %x23-7E  (obs-text %x80-FF deliberately refused, see the module docstring)
_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]*"')
# IMF-fixdate = day-name "," SP date1 SP time-of-day SP GMT, e.g.
# "Sun, 06 Nov 1994 08:49:37 GMT" (the only HTTP-date form we send back).
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # datetime.weekday() order
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH_NO = {name: number for number, name in enumerate(_MONTHS, start=1)}
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_IMF = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|"
                  r"Aug|Sep|Oct|Nov|Dec) ([0-9]{4}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT")
# rfc850-date = day-name-l "," SP date2 SP time-of-day SP GMT ; date2 = day "-" month "-" 2DIGIT
_DAY_NAMES_L = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_RFC850 = re.compile(r"(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
                     r"([0-9]{2})-(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)-([0-9]{2}) "
                     r"([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT")
# asctime-date = day-name SP date3 SP time-of-day SP year ; date3 = month SP (2DIGIT / (SP DIGIT))
_ASCTIME = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|"
                      r"Nov|Dec) ([0-9]{2}| [0-9]) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})")
# RFC 9110: an RFC 850 date more than this many years in the future is of the century before.
_RFC850_WINDOW_YEARS = 50
MAX_LEN = 512
# delay-seconds = 1*DIGIT. Ten digits (< 317 years) is past any honest wait; more is refused.
MAX_DELAY_DIGITS = 10
_DELAY_SECONDS = re.compile(r"[0-9]{1,%d}" % MAX_DELAY_DIGITS)
# C0 controls, SP, DEL and C1 controls: never inside a request target or a Host value.
_UNSAFE_TEXT = re.compile(r"[\x00-\x20\x7f-\x9f]")


def valid_etag(value) -> bool:
    """Whether ``value`` may be sent as If-None-Match: one ASCII entity-tag, nothing more."""
    return (isinstance(value, str) and len(value) <= MAX_LEN
            and _ETAG.fullmatch(value) is not None)


def valid_http_date(value) -> bool:
    """Whether ``value`` may be sent as If-Modified-Since: a real IMF-fixdate.

    The whole string must match, the date and time must exist (no 31 Feb, no hour 24; a
    leap second ``:60`` is refused too, which only costs a full fetch), and the day name
    must be the date's weekday: a value that disagrees with itself is not one a server
    wrote honestly, and we would not know which half it means.
    """
    return (isinstance(value, str) and _IMF.fullmatch(value) is not None
            and parse_http_date(value) is not None)


def _instant(day_name, names, year, month, day, hour, minute, second) -> int | None:
    """Unix seconds of a date that exists and falls on ``day_name``, else None."""
    try:
        when = date(year, _MONTH_NO[month], day)
    except ValueError:
        return None
    # A leap second ":60" is refused too: it only costs a full fetch.
    if hour > 23 or minute > 59 or second > 59 or names[when.weekday()] != day_name:
        return None
    return (when.toordinal() - _EPOCH_ORDINAL) * 86400 + hour * 3600 + minute * 60 + second


def _rfc850_year(yy: int, rest: tuple, received_at_s) -> int | None:
    """The year of an RFC 850 date with two-digit year ``yy``, received at ``received_at_s``.

    RFC 9110 §5.6.7: a timestamp that appears to be more than 50 years in the future is of
    the most recent past year with the same last two digits. So the year is the one ending
    in ``yy`` whose date falls in the 100 years that end 50 years after the fetch (the
    latest one not more than 50 years ahead). "Now" is the fetch that received the value,
    never the clock: a replay of old logs reads them as they were read then. ``rest`` is
    (month, day, hour, minute, second). None without a usable fetch time.
    """
    try:
        ref = datetime.fromtimestamp(float(received_at_s), timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    year = ref.year - ref.year % 100 + yy
    # (year, month, day, time) tuples compare like instants, with no "+50 years" date to
    # build (29 Feb).
    limit = (ref.year + _RFC850_WINDOW_YEARS, ref.month, ref.day, ref.hour, ref.minute,
             ref.second)
    if (year, *rest) > limit:
        return year - 100
    if (year + 100, *rest) <= limit:
        return year + 100
    return year


def parse_http_date(value, received_at_s=None) -> int | None:
    """Unix seconds of an HTTP-date in any of the three forms of RFC 9110 §5.6.7, else None.

    Same rules as :func:`valid_http_date` for every form: the whole string matches its
    grammar, the date and time exist, the day name is the date's weekday.

    Parameters
    ----------
    value : object
        The received field value (anything that is not a ``str`` is None).
    received_at_s : float, optional
        Unix seconds of the fetch that received it; decides an RFC 850 date's century (see
        :func:`_rfc850_year`). Without it (None/NaN) an RFC 850 date is refused.
    """
    if not isinstance(value, str) or len(value) > MAX_LEN:
        return None
    if (m := _IMF.fullmatch(value)) is not None:
        day_name, day, month, year, hh, mm, ss = m.groups()
        return _instant(day_name, _DAY_NAMES, int(year), month, int(day), int(hh), int(mm),
                        int(ss))
    if (m := _ASCTIME.fullmatch(value)) is not None:
        day_name, month, day, hh, mm, ss, year = m.groups()
        return _instant(day_name, _DAY_NAMES, int(year), month, int(day), int(hh), int(mm),
                        int(ss))
    if (m := _RFC850.fullmatch(value)) is not None:
        day_name, day, month, yy, hh, mm, ss = m.groups()
        rest = (_MONTH_NO[month], int(day), int(hh), int(mm), int(ss))
        year = _rfc850_year(int(yy), rest, received_at_s)
        if year is None:
            return None
        return _instant(day_name, _DAY_NAMES_L, year, month, int(day), int(hh), int(mm),
                        int(ss))
    return None


def imf_fixdate(epoch_s: int) -> str:
    """The IMF-fixdate of Unix seconds ``epoch_s`` (the only HTTP-date form we send)."""
    when = datetime.fromtimestamp(int(epoch_s), timezone.utc)
    return (f"{_DAY_NAMES[when.weekday()]}, {when.day:02d} {_MONTHS[when.month - 1]} "
            f"{when.year:04d} {when.hour:02d}:{when.minute:02d}:{when.second:02d} GMT")


def _received(values: list, received_at_s) -> list:
    if received_at_s is None:
        return [None] * len(values)
    return np.asarray(received_at_s, dtype=float).tolist()


def _day_number(year, month, day):
    """Days since 1970-01-01 of proleptic Gregorian dates (arrays; Hinnant's
    days_from_civil)."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _triples(names) -> np.ndarray:
    return np.array([(ord(a) << 16) | (ord(b) << 8) | ord(c) for a, b, c in names])


_DAY_CODES, _MONTH_CODES = _triples(_DAY_NAMES), _triples(_MONTHS)
_IMF_WIDTH = 29  # len("Sun, 06 Nov 1994 08:49:37 GMT")
_IMF_FIXED = {i: ord(c) for i, c in enumerate("___, __ ___ ____ __:__:__ GMT") if c != "_"}
_IMF_DIGITS = (5, 6, 12, 13, 14, 15, 17, 18, 20, 21, 23, 24)


def _imf_shaped(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``values`` that are ASCII ``str`` of IMF-fixdate length, and their bytes as
    a (rows, 29) matrix. Arrow does it without a Python loop when every value is a ``str``
    or None (a column read from Parquet); anything else takes the loop."""
    try:  # inferred, not cast: a cast to string would accept bytes
        arr = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = None
    if arr is None or arr.type != pa.string():
        shaped = np.fromiter((isinstance(v, str) and len(v) == _IMF_WIDTH and v.isascii()
                              for v in values), dtype=bool, count=values.size)
        rows = np.flatnonzero(shaped)
        text = "".join(values[rows]).encode("ascii")
    else:
        shaped = pc.and_(pc.equal(pc.binary_length(arr), _IMF_WIDTH), pc.string_is_ascii(arr))
        rows = np.flatnonzero(shaped.fill_null(False).to_numpy(zero_copy_only=False))
        if not rows.size:
            return rows, np.zeros((0, _IMF_WIDTH), np.uint8)
        taken = arr.take(pa.array(rows))
        # Every taken value is 29 bytes, so its data is one contiguous run of them.
        start = np.frombuffer(taken.buffers()[1], np.int32)[taken.offset]
        text = taken.buffers()[2].to_pybytes()[start:start + rows.size * _IMF_WIDTH]
    return rows, np.frombuffer(text, np.uint8).reshape(-1, _IMF_WIDTH)


def imf_fixdates(values) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`valid_http_date` / IMF-fixdate branch of :func:`parse_http_date`.

    Returns ``(grammar, seconds)``: ``grammar`` is where the value matches the IMF-fixdate
    grammar (``_IMF.fullmatch``), ``seconds`` its Unix seconds where the date also exists
    and falls on its day name (NaN elsewhere). The same rules as the scalar functions, on
    a byte matrix instead of one regex and one ``date`` per value: the planner reads a
    Last-Modified on most pages every day.
    """
    values = np.asarray(values, dtype=object).ravel()
    n = values.size
    grammar, out = np.zeros(n, bool), np.full(n, np.nan)
    rows, m = _imf_shaped(values)
    if not rows.size:
        return grammar, out
    m = m.astype(np.int64)
    ok = np.ones(rows.size, bool)
    for i, c in _IMF_FIXED.items():
        ok &= m[:, i] == c
    digits = m[:, _IMF_DIGITS] - ord("0")
    ok &= ((digits >= 0) & (digits <= 9)).all(axis=1)
    code = (m[:, 0] << 16) | (m[:, 1] << 8) | m[:, 2]
    day_name = np.argmax(code[:, None] == _DAY_CODES[None, :], axis=1)
    ok &= (code[:, None] == _DAY_CODES[None, :]).any(axis=1)
    code = (m[:, 8] << 16) | (m[:, 9] << 8) | m[:, 10]
    month = np.argmax(code[:, None] == _MONTH_CODES[None, :], axis=1) + 1
    ok &= (code[:, None] == _MONTH_CODES[None, :]).any(axis=1)
    grammar[rows] = ok

    def number(first, width):
        cols = [_IMF_DIGITS.index(first + k) for k in range(width)]
        return (digits[:, cols] * 10 ** np.arange(width - 1, -1, -1)).sum(axis=1)

    day, year = number(5, 2), number(12, 4)
    hour, minute, second = number(17, 2), number(20, 2), number(23, 2)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[month - 1] + (
        leap & (month == 2))
    # A leap second ":60" is refused too, and year 0000 does not exist (as datetime.date).
    ok &= ((year >= 1) & (day >= 1) & (day <= month_days) & (hour <= 23) & (minute <= 59)
           & (second <= 59))
    days = _day_number(year, month, day)
    ok &= (days + 3) % 7 == day_name  # 1970-01-01 was a Thursday (Mon = 0)
    out[rows[ok]] = (days * 86400 + hour * 3600 + minute * 60 + second)[ok]
    return grammar, out


def _parse_the_rest(values: np.ndarray, grammar: np.ndarray, received_at_s):
    """(index, :func:`parse_http_date`) of each value :func:`imf_fixdates` did not take."""
    rest = np.flatnonzero(~grammar)
    received = _received(values[rest].tolist(), None if received_at_s is None else
                         np.asarray(received_at_s, dtype=float)[rest])
    for i, r in zip(rest, received):
        yield i, parse_http_date(values[i], r)


def parse_http_dates(values, received_at_s=None) -> np.ndarray:
    """:func:`parse_http_date` of each value (float Unix seconds; NaN where refused).

    ``received_at_s``: each value's fetch time (Unix seconds, NaN where unknown), or None.
    IMF-fixdates, nearly every value, go through :func:`imf_fixdates`; only the others
    take the scalar parser.
    """
    values = np.asarray(list(values), dtype=object).ravel()
    grammar, out = imf_fixdates(values)
    for i, s in _parse_the_rest(values, grammar, received_at_s):
        out[i] = math.nan if s is None else s
    return out


def normalise_http_dates(values, received_at_s) -> np.ndarray:
    """Received Last-Modified values with every HTTP-date rewritten as IMF-fixdate.

    An RFC 850 or asctime date becomes the IMF-fixdate of the same instant (so it can be
    sent back as If-Modified-Since, and compares equal to the same date in another form);
    an IMF-fixdate, and anything that is no HTTP-date at all, is kept as it is (the latter
    is never sent: :func:`clean_dates`). ``received_at_s`` as in :func:`parse_http_dates`.
    """
    out = np.array(list(values), dtype=object).ravel()
    grammar, _ = imf_fixdates(out)
    for i, s in _parse_the_rest(out, grammar, received_at_s):
        if s is not None:
            out[i] = imf_fixdate(s)
    return out


def parse_retry_after(value, received_at_s) -> float | None:
    """The Unix instant a Retry-After value asks the next request to wait for, else None.

    Parameters
    ----------
    value : object
        The received field value: delay-seconds (``"120"``) or an HTTP-date in any of the
        three forms. Anything else (not a ``str``, a sign, spaces around it, a decimal, an
        exponent, non-ASCII digits, more than :data:`MAX_DELAY_DIGITS` digits, a trailing
        CR/LF) is None.
    received_at_s : float
        Unix seconds at which the response was received: delay-seconds count from it and
        it decides an RFC 850 date's century. Unknown (None/NaN): delay-seconds are None.

    Returns
    -------
    float or None
        Unix seconds. An HTTP-date in the past is returned as it is (no wait asked).
    """
    if not isinstance(value, str):
        return None
    if _DELAY_SECONDS.fullmatch(value) is not None:
        try:
            received = float(received_at_s)
        except (TypeError, ValueError):
            return None
        return received + int(value) if math.isfinite(received) else None
    when = parse_http_date(value, received_at_s)
    return None if when is None else float(when)


def parse_retry_afters(values, received_at_s) -> np.ndarray:
    """:func:`parse_retry_after` of each value (float Unix seconds; NaN where refused).

    ``received_at_s``: each value's receipt (Unix seconds, NaN where unknown).
    """
    values = list(values)
    out = [parse_retry_after(v, r) for v, r in zip(values, _received(values, received_at_s))]
    return np.array([math.nan if s is None else s for s in out], dtype=float)


def safe_request_text(value) -> bool:
    """Whether a URL or host may go into a request line / Host field as it is.

    Deliberately narrower than a URL grammar: it only refuses what could split or smuggle
    a request (C0 controls incl. CR/LF, space, DEL, C1 controls) and empty values.
    Non-ASCII is allowed here because an IDN host or IRI path is a real URL (the fetcher
    encodes it); host normalisation lives with the ingest rules.
    """
    return isinstance(value, str) and value != "" and _UNSAFE_TEXT.search(value) is None


# Published column -> its grammar. One home for the planner (``clean_*``) and ``verify``.
HEADER_CHECKS = {"if_none_match": valid_etag, "if_modified_since": valid_http_date}


def clean_etags(values: pd.Series) -> np.ndarray:
    """The values that may be sent as If-None-Match, else None."""
    return np.array([v if valid_etag(v) else None for v in values], dtype=object)


def clean_dates(values: pd.Series) -> np.ndarray:
    """The values that may be sent as If-Modified-Since (:func:`valid_http_date`), else None."""
    values = np.asarray(values, dtype=object).ravel()
    _, seconds = imf_fixdates(values)
    return np.where(np.isnan(seconds), None, values)
