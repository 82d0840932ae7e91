"""The one home of URL canonicalisation: every spelling of a page becomes one key.

Two fetch-log rows, a signal and a frontier row for ``https://H0001.EXAMPLE.COM.:443/a#top``
and ``https://h0001.example.com/a`` name one page, and the planner keeps one state row for
it. :func:`canonical_url` applies only the normalisations that keep a URL equivalent, so
fetching the canonical form requests the same resource (RFC 3986 §6.2.2 syntax-based
normalisation, §6.2.3 scheme-based normalisation for http(s), RFC 9110 §4.2.3):

1. scheme lowercased;
2. host as :func:`jobs.core.hosts.normalize_host` spells it (lowercase, one trailing dot
   stripped, IDNA punycode): the planner's one host rule;
3. the port dropped when it is the scheme's default (80 for http, 443 for https) or empty,
   and written without leading zeros otherwise;
4. an empty path becomes ``/``; dot segments (``.``, ``..``) are removed (RFC 3986 §5.2.4);
5. percent-encoding, in path and query: an escaped unreserved character (ALPHA, DIGIT,
   ``-``, ``.``, ``_``, ``~``) is decoded, every other escape has its hex digits upper-cased;
   a non-ASCII character is written as the percent-escaped bytes of its UTF-8 (RFC 3987
   §3.1, what an HTTP client sends); every other character is kept as written;
6. the fragment is removed (never sent to a server).

The query is otherwise kept exactly: its parameters are NOT sorted and none is removed
(the order and a "tracking" parameter can change what a server returns; two URLs that differ
only there stay two pages). An empty query (``/a?``) is kept: RFC 3986 §6.2.3 does not let
http drop it. Userinfo is never canonicalised: such a URL is invalid (``url_userinfo``).

Pure (standard library; pandas for :func:`merge_spellings`, the rule that merges the state
rows of one page written before URLs were canonical). The Spark twin is
:func:`jobs.canonical.canonical_url_col`, the same function through a pandas UDF (a test
compares them on generated URLs).
"""
from __future__ import annotations

import re
from typing import Optional

import pandas as pd

from jobs.core.hosts import HTTP_SCHEMES, normalize_host

# RFC 3986, Appendix B: the generic URI reference split into its five components.
_RFC3986 = re.compile(r"^(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?\Z", re.S)
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]]*)(?::([0-9]*))?\Z")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
DEFAULT_PORTS = {"http": 80, "https": 443}


def _escape(match: re.Match) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def normalize_percent(text: str) -> str:
    """Percent-encoding in one form: unreserved characters decoded, other escapes upper-cased,
    non-ASCII characters escaped as UTF-8 (a ``%`` not followed by two hex digits is kept)."""
    if not text.isascii():
        text = "".join(c if c.isascii() else "".join(f"%{b:02X}" for b in c.encode("utf-8"))
                       for c in text)
    return _ESCAPE.sub(_escape, text) if "%" in text else text


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: ``/a/./b/../c`` -> ``/a/c`` (the algorithm as written there)."""
    if "." not in path:
        return path
    out: list[str] = []
    while path:
        if path.startswith("../"):
            path = path[3:]
        elif path.startswith("./"):
            path = path[2:]
        elif path.startswith("/./"):
            path = path[2:]
        elif path == "/.":
            path = "/"
        elif path.startswith("/../"):
            path = path[3:]
            if out:
                out.pop()
        elif path == "/..":
            path = "/"
            if out:
                out.pop()
        elif path in (".", ".."):
            path = ""
        else:
            start = 1 if path.startswith("/") else 0
            end = path.find("/", start)
            end = len(path) if end < 0 else end
            out.append(path[:end])
            path = path[end:]
    return "".join(out)


def canonical_url(url: Optional[str]) -> Optional[str]:
    """The canonical form of an http(s) URL (module docstring), or None when it has none.

    Parameters
    ----------
    url : str or None
        A URL as received.

    Returns
    -------
    str or None
        The canonical URL; None for None, a scheme other than http(s), no authority, a host
        that is not valid once normalised, userinfo or a non-numeric port. Callers check
        URLs with :func:`jobs.core.hosts.url_problem` first; this function does not check
        length, whitespace or control characters.

    Examples
    --------
    >>> canonical_url("HTTPS://H0001.Example.COM.:443/%7euser/./a%2f?b=%4A#top")
    'https://h0001.example.com/~user/a%2F?b=J'
    """
    if url is None:
        return None
    m = _RFC3986.match(url)
    if m is None or m.group(2) is None or m.group(3) is None:
        return None
    scheme = m.group(2).lower()
    authority = m.group(4)
    if scheme not in HTTP_SCHEMES or "@" in authority:
        return None
    hp = _HOST_PORT.match(authority)
    if hp is None:
        return None
    host = normalize_host(hp.group(1))
    if host is None:
        return None
    port = hp.group(2)
    if port:
        port = None if int(port) == DEFAULT_PORTS[scheme] else str(int(port))
    path = remove_dot_segments(normalize_percent(m.group(5))) or "/"
    query = m.group(6)
    out = f"{scheme}://{host}" + (f":{port}" if port else "") + path
    return out if query is None else f"{out}?{normalize_percent(m.group(7))}"


#: State columns summed over the spellings of one page: counts of distinct real fetches.
SUMMED_ON_MERGE = ("n_fetches", "n_errors")


def merge_spellings(rows: pd.DataFrame, key: str = "_canonical") -> pd.DataFrame:
    """One state row per canonical URL ``key`` from the rows of its spellings.

    The rule (docs/contract.md, "Canonical URLs"): the row with the latest
    ``last_success_at`` is kept whole (ties: the latest ``last_fetch_at``, then the row
    already spelt canonically, then the smallest URL), because its estimator evidence,
    validators and content hash describe one consistent history. Its ``url`` becomes the
    canonical one, ``first_seen`` the earliest of the rows, ``n_fetches`` and ``n_errors``
    the sums (each fetch happened once, under one spelling) and ``importance`` the largest
    (as duplicate importance rows resolve). The other rows' observations are not added:
    both spellings were fetched over the same stretch of time, so adding their intervals
    would count that time twice.

    Parameters
    ----------
    rows : pandas.DataFrame
        State rows with ``url`` and ``key`` (their canonical URL); any number of groups.

    Returns
    -------
    pandas.DataFrame
        One row per value of ``key``, with the columns of ``rows``.
    """
    order = rows.assign(_spelt=rows["url"] == rows[key]).sort_values(
        [key, "last_success_at", "last_fetch_at", "_spelt", "url"],
        ascending=[True, False, False, False, True], na_position="last", kind="mergesort")
    kept = order.drop_duplicates(key, keep="first").set_index(key)
    groups = rows.groupby(key)
    kept["first_seen"] = groups["first_seen"].min()
    for name in SUMMED_ON_MERGE:
        if name in rows.columns:
            kept[name] = groups[name].sum(min_count=1)
    if "importance" in rows.columns:
        kept["importance"] = groups["importance"].max()
    kept["url"] = kept.index
    return kept.reset_index()[list(rows.columns)]
