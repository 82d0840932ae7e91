"""``DocumentWriter``: the fleet hands over the robots.txt, sitemaps and feeds it fetched.

Rows of the ``documents`` contract (:data:`jobs.schemas.DOCUMENTS`), checked at the source
with the planner's rules as ``FetchLogWriter`` checks fetch logs (both are
:class:`jobs.fleet.parts.PartWriter`: same checks, part files and atomic writes): the URL rule of :func:`jobs.core.hosts.url_problem`, ``host`` (if given)
naming the URL's host, ``kind`` one of robots/sitemap/feed, a timezone-aware ``fetched_at``
(inside the partition's day when ``date`` is given), ``status`` 0 or 100-599, ``body`` bytes
or None, ``content_type`` a string or None, no unknown keys. The body is stored as received
(a ``.xml.gz`` sitemap may stay gzip); the planner bounds its size and parses it
(``recrawl intake``), a fetcher need not.
"""
from __future__ import annotations

from typing import Mapping

from jobs.fleet.fetch_log import FetchLogRowError
from jobs.fleet.parts import DEFAULT_MAX_URL_LENGTH, PartWriter
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


class DocumentWriter(PartWriter):
    """Validate document rows and write them as Parquet parts under ``out_dir`` (normally
    ``.../documents/dt=YYYY-MM-DD``). Parameters as :class:`jobs.fleet.fetch_log.FetchLogWriter`
    (no fingerprint).

    Examples
    --------
    >>> with DocumentWriter("/data/documents/dt=2026-11-30", date="2026-11-30") as docs:
    ...     docs.write({"url": "https://example.com/robots.txt", "kind": "robots",
    ...                 "fetched_at": t, "status": 200, "content_type": "text/plain",
    ...                 "body": body})
    """

    contract, arrow_schema, row_error = DOCUMENTS, DOCUMENTS.arrow_schema(), DocumentRowError

    def __init__(self, out_dir: str, *, date: str | None = None,
                 rows_per_part: int = ROWS_PER_PART, endpoint_url: str | None = None,
                 client=None, writer_id: str | None = None,
                 max_url_length: int = DEFAULT_MAX_URL_LENGTH) -> None:
        super().__init__(out_dir, date=date, rows_per_part=rows_per_part,
                         endpoint_url=endpoint_url, client=client, writer_id=writer_id,
                         max_url_length=max_url_length)

    def check(self, row: Mapping) -> dict:
        """The row as it will be written, or DocumentRowError (nothing is buffered)."""
        n, host = self._check_url(row)
        if row["kind"] not in KINDS:
            raise DocumentRowError(n, "kind", f"{row['kind']!r} is not one of {list(KINDS)}")
        at = self._check_fetch(row, n)
        body = row.get("body")
        if body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
            raise DocumentRowError(n, "body", f"not bytes: {type(body).__name__}")
        ctype = row.get("content_type")
        if ctype is not None and not isinstance(ctype, str):
            raise DocumentRowError(n, "content_type", f"not a string: {ctype!r}")
        return {"url": row["url"], "host": host, "kind": row["kind"], "fetched_at": at,
                "status": row["status"], "content_type": ctype,
                "body": bytes(body) if body is not None else None}

    def __enter__(self) -> "DocumentWriter":
        return self
