"""``DocumentWriter``: the fleet hands over the robots.txt, sitemaps and feeds it fetched.

Rows of the ``documents`` contract (:data:`jobs.schemas.DOCUMENTS`), checked at the source
with the planner's rules as ``FetchLogWriter`` checks fetch logs (same part files, same
atomic writes): the URL rule of :func:`jobs.core.hosts.url_problem`, ``host`` (if given)
naming the URL's host, ``kind`` one of robots/sitemap/feed, a timezone-aware ``fetched_at``
(inside the partition's day when ``date`` is given), ``status`` 0 or 100-599, ``body`` bytes
or None, ``content_type`` a string or None, no unknown keys. The body is stored as received
(a ``.xml.gz`` sitemap may stay gzip); the planner bounds its size and parses it
(``recrawl intake``), a fetcher need not.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Mapping

from jobs.core.hosts import normalize_host, url_host, url_problem
from jobs.fleet.fetch_log import FetchLogRowError, FetchLogWriter, _is_int
from jobs.schemas import DOCUMENTS

KINDS = ("robots", "sitemap", "feed")  # = jobs.core.intake.KINDS (a test checks)
ROWS_PER_PART = 200  # bodies are large: a part holds fewer rows than a fetch-log part


class DocumentRowError(FetchLogRowError):
    """A row breaks the documents contract; names the row (0-based, per writer) and column."""

    def __init__(self, row: int, column: str, problem: str) -> None:
        super().__init__(row, column, problem)
        self.args = (f"documents row {row}: column '{column}': {problem}",)

    def __str__(self) -> str:
        return self.args[0]


class DocumentWriter(FetchLogWriter):
    """Validate document rows and write them as Parquet parts under ``out_dir`` (normally
    ``.../documents/dt=YYYY-MM-DD``). Parameters as :class:`FetchLogWriter` (no fingerprint).

    Examples
    --------
    >>> with DocumentWriter("/data/documents/dt=2026-11-30", date="2026-11-30") as docs:
    ...     docs.write({"url": "https://example.com/robots.txt", "kind": "robots",
    ...                 "fetched_at": t, "status": 200, "content_type": "text/plain",
    ...                 "body": body})
    """

    contract, arrow_schema = DOCUMENTS, DOCUMENTS.arrow_schema()

    def __init__(self, out_dir: str, *, rows_per_part: int = ROWS_PER_PART, **kwargs) -> None:
        super().__init__(out_dir, rows_per_part=rows_per_part, **kwargs)

    def check(self, row: Mapping) -> dict:
        """The row as it will be written, or DocumentRowError (nothing is buffered)."""
        n = self._seen
        if not isinstance(row, Mapping):
            raise DocumentRowError(n, "*", f"a row is a mapping, got {type(row).__name__}")
        unknown = sorted(str(k) for k in row if k not in set(DOCUMENTS.names))
        if unknown:
            raise DocumentRowError(n, unknown[0], "not a documents column")
        for col in DOCUMENTS.columns:
            if col.required and col.name not in row:
                raise DocumentRowError(n, col.name, "required column is missing")
            if not col.nullable and col.name in row and row[col.name] is None:
                raise DocumentRowError(n, col.name, "is null")
        url = row["url"]
        if not isinstance(url, str):
            raise DocumentRowError(n, "url", f"not a string: {url!r}")
        problem = url_problem(url, self.max_url_length)
        if problem:
            raise DocumentRowError(n, "url", f"{problem} ({url[:200]!r})")
        host = url_host(url)
        given = row.get("host")
        if given is not None and (not isinstance(given, str) or normalize_host(given) != host):
            raise DocumentRowError(n, "host", f"host_mismatch: {given!r} is not the URL's "
                                              f"host {host!r}")
        if row["kind"] not in KINDS:
            raise DocumentRowError(n, "kind", f"{row['kind']!r} is not one of {list(KINDS)}")
        at = row["fetched_at"]
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise DocumentRowError(n, "fetched_at", f"not a timezone-aware datetime: {at!r}")
        at = at.astimezone(timezone.utc)
        if self.day and not self.day[0] <= at < self.day[1]:
            raise DocumentRowError(n, "fetched_at", f"{at.isoformat()} is outside the "
                                                    f"partition's day {self.day[0].date()}")
        status = row["status"]
        if not _is_int(status) or not (status == 0 or 100 <= status <= 599):
            raise DocumentRowError(n, "status", f"bad_status: {status!r} (0 or 100-599)")
        body = row.get("body")
        if body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
            raise DocumentRowError(n, "body", f"not bytes: {type(body).__name__}")
        ctype = row.get("content_type")
        if ctype is not None and not isinstance(ctype, str):
            raise DocumentRowError(n, "content_type", f"not a string: {ctype!r}")
        return {"url": url, "host": host, "kind": row["kind"], "fetched_at": at,
                "status": status, "content_type": ctype,
                "body": bytes(body) if body is not None else None}
