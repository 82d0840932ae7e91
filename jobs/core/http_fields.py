"""Validation of validator header values against the HTTP field grammar (RFC 9110).

Values come from servers we do not trust. A value that fails here never reaches a
fetcher's request: the URL is fetched ``full`` instead. The main danger is CR/LF (header
injection into the fleet's requests) and other control characters.
"""
from __future__ import annotations

import re
from email.utils import parsedate_to_datetime

import numpy as np
import pandas as pd

# entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE ; etagc = %x21 / %x23-7E / obs-text
_ETAG = re.compile(r'^(W/)?"[\x21\x23-\x7e\x80-\xff]*"$')
# IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (the only form we send back).
_IMF = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|"
                  r"Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$")
MAX_LEN = 512


def valid_etag(value) -> bool:
    return isinstance(value, str) and len(value) <= MAX_LEN and bool(_ETAG.match(value))


def valid_http_date(value) -> bool:
    if not isinstance(value, str) or not _IMF.match(value):
        return False
    try:
        parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return False
    return True


def clean_etags(values: pd.Series) -> np.ndarray:
    """The values that may be sent as If-None-Match, else None."""
    return np.array([v if valid_etag(v) else None for v in values], dtype=object)


def clean_dates(values: pd.Series) -> np.ndarray:
    """The values that may be sent as If-Modified-Since, else None."""
    return np.array([v if valid_http_date(v) else None for v in values], dtype=object)
