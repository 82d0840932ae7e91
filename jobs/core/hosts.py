"""The one home of the host and URL rules (pure Python; jobs.ingest has the Spark twin).

A host is compared, joined and sharded by its normalised form, so every input table
(fetch_logs, frontier, signals, host_policy) must spell it the same way: otherwise
``h.example.com.`` in host_policy silently misses ``h.example.com`` in the logs, and the
politeness rule is not applied. Normalising: trim ASCII whitespace, lowercase, strip one
trailing dot, IDNA (RFC 3490, as Python's ``idna`` codec and Java's ``java.net.IDN``) to
punycode for non-ASCII names, then check the host name syntax.

A URL is valid when it is http(s), has no whitespace or control characters, and its
authority has a valid host (optionally a port); a URL with userinfo (``user:pass@``) or
longer than the configured limit gets a reason of its own. The patterns are shared with
jobs.ingest (Java regex) so both engines apply the same rule; a test checks they agree.
"""
from __future__ import annotations

import re
from typing import Optional

# Characters no URL we schedule may contain: C0 controls, space, DEL and C1 controls.
BAD_URL_CHARS = r"[\x00-\x20\x7f-\x9f]"
SCHEME = r"^([A-Za-z][A-Za-z0-9+.-]*)://"
AUTHORITY = r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)"
# Host and optional port of an authority without userinfo (match the whole string).
HOST_PORT = r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]]*)(?::[0-9]*)?"
# A normalised host: dot-separated labels of 1-63 letters, digits, '-' or '_' (IPv4
# included), or a bracketed IPv6 literal (match the whole string).
HOST_SYNTAX = r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*|\[[0-9a-f:.]+\]"
MAX_HOST_LENGTH = 253
TRIM_CHARS = " \t\r\n\f\x0b"
TRIM_CLASS = r"[ \t\r\n\f\x0B]"  # the same characters as a regex class (Java and Python)
HTTP_SCHEMES = ("http", "https")


def normalize_host(raw: Optional[str]) -> Optional[str]:
    """The canonical spelling of a host, or None when it is not a valid host name."""
    if raw is None:
        return None
    host = raw.strip(TRIM_CHARS).lower()
    if host.endswith("."):
        host = host[:-1]
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    if len(host) > MAX_HOST_LENGTH or not re.fullmatch(HOST_SYNTAX, host):
        return None
    return host


def _raw_host(url: str) -> tuple[Optional[str], bool]:
    """(host as written, has userinfo) of an http(s) URL; host None if unparseable."""
    scheme = re.match(SCHEME, url)
    if scheme is None or scheme.group(1).lower() not in HTTP_SCHEMES:
        return None, False
    authority = re.match(AUTHORITY, url).group(1)
    host_port = authority.rsplit("@", 1)[-1]
    m = re.fullmatch(HOST_PORT, host_port)
    return (m.group(1) if m else None), "@" in authority


def url_problem(url: Optional[str], max_length: int) -> Optional[str]:
    """The quarantine reason of a URL, or None when it is valid.

    ``null_url``; ``url_too_long`` (more than ``max_length`` characters); ``bad_url``
    (not http(s), whitespace or control characters, no valid host); ``url_userinfo``
    (credentials in the authority: never fetched, never published).
    """
    if url is None:
        return "null_url"
    if len(url) > max_length:
        return "url_too_long"
    raw, userinfo = _raw_host(url)
    if re.search(BAD_URL_CHARS, url) or normalize_host(raw) is None:
        return "bad_url"
    if userinfo:
        return "url_userinfo"
    return None


def url_host(url: Optional[str]) -> Optional[str]:
    """The normalised host of a URL (None when the URL has no valid host)."""
    if url is None:
        return None
    return normalize_host(_raw_host(url)[0])
