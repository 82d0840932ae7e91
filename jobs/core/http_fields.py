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
"""
from __future__ import annotations

import re
from datetime import datetime

import numpy as np
import pandas as pd

# entity-tag = [ weak ] opaque-tag ; weak = %s"W/" ; opaque-tag = DQUOTE *etagc DQUOTE
# etagc = %x21 / %x23-7E  (obs-text %x80-FF deliberately refused, see the module docstring)
_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]*"')
# IMF-fixdate = day-name "," SP date1 SP time-of-day SP GMT, e.g.
# "Sun, 06 Nov 1994 08:49:37 GMT" (the only HTTP-date form we send back).
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # datetime.weekday() order
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_IMF = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|"
                  r"Aug|Sep|Oct|Nov|Dec) ([0-9]{4}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT")
MAX_LEN = 512
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
    if not isinstance(value, str):
        return False
    m = _IMF.fullmatch(value)
    if m is None:
        return False
    day_name, day, month, year, hour, minute, second = m.groups()
    try:
        when = datetime(int(year), _MONTHS.index(month) + 1, int(day),
                        int(hour), int(minute), int(second))
    except ValueError:
        return False
    return _DAY_NAMES[when.weekday()] == day_name


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
    """The values that may be sent as If-Modified-Since, else None."""
    return np.array([v if valid_http_date(v) else None for v in values], dtype=object)
