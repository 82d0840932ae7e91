"""``FetchLogWriter``: the fleet writes its ``fetch_logs`` rows with this, checked at the source.

Each row is checked against the ``fetch_logs`` contract (:data:`jobs.schemas.FETCH_LOG`)
with the planner's own rules, so a row the writer accepts is one ingest does not quarantine
for its shape: the URL rule of :func:`jobs.core.hosts.url_problem` (full-string; http(s), a
valid host, no whitespace, control characters or credentials, at most ``max_url_length``
characters), ``host`` (if given) naming the URL's host once normalised, a timezone-aware
``fetched_at`` (inside the partition's day when the writer has a ``date``), ``status`` 0 or
100-599, ``bytes`` >= 0, ``lane`` one of the schedule's lanes. ``etag`` and
``last_modified`` are stored as the server sent them (strings or null): the planner checks
them with :mod:`jobs.core.http_fields` before any is sent back, and a malformed one is
evidence about the host's validators, not an error of the fetcher.

Every row gets the writer's ``fingerprint_version`` (one per writer: versions must never be
mixed, docs/fingerprint.md; ingest refuses a day that mixes them). Rows are buffered and
written as Parquet parts ``part-<writer_id>-<seq>.parquet`` under ``out_dir`` (a directory or
``s3://bucket/prefix``, normally ``.../fetch_logs/dt=YYYY-MM-DD``) by :class:`PartWriter`
(:mod:`jobs.fleet.parts`, shared with ``DocumentWriter``), so a reader never sees half a part.
"""
from __future__ import annotations

from typing import Mapping

from jobs.fleet.fingerprint import FINGERPRINT_VERSION
from jobs.fleet.parts import DEFAULT_MAX_URL_LENGTH, PartWriter, _is_int
from jobs.fleet.schedule import LANES
from jobs.schemas import FETCH_LOG

__all__ = ["DEFAULT_MAX_URL_LENGTH", "FETCH_LOG_SCHEMA", "FetchLogRowError", "FetchLogWriter",
           "ROWS_PER_PART"]

ROWS_PER_PART = 100_000
FETCH_LOG_SCHEMA = FETCH_LOG.arrow_schema()
_INT32 = 2 ** 31


class FetchLogRowError(ValueError):
    """A row breaks the fetch_logs contract; names the row (0-based, per writer) and column."""

    def __init__(self, row: int, column: str, problem: str) -> None:
        self.row, self.column, self.problem = row, column, problem
        super().__init__(f"fetch_logs row {row}: column '{column}': {problem}")


class FetchLogWriter(PartWriter):
    """Validate fetch-log rows and write them as Parquet parts: the parameters of
    :class:`jobs.fleet.parts.PartWriter` (``out_dir``, ``date``, ``rows_per_part``,
    ``endpoint_url``, ``client``, ``writer_id``, ``max_url_length``), and

    Parameters
    ----------
    fingerprint_version : int
        The ``FINGERPRINT_VERSION`` that computed every ``content_hash`` written.

    Examples
    --------
    >>> with FetchLogWriter("/data/fetch_logs/dt=2026-11-30", date="2026-11-30") as log:
    ...     log.write({"url": u, "fetched_at": t, "status": 200, "conditional": False,
    ...                "etag": None, "last_modified": None, "content_hash": h, "bytes": n})
    """

    contract, arrow_schema, row_error = FETCH_LOG, FETCH_LOG_SCHEMA, FetchLogRowError

    def __init__(self, out_dir: str, *, date: str | None = None,
                 fingerprint_version: int = FINGERPRINT_VERSION,
                 rows_per_part: int = ROWS_PER_PART, endpoint_url: str | None = None,
                 client=None, writer_id: str | None = None,
                 max_url_length: int = DEFAULT_MAX_URL_LENGTH) -> None:
        if not _is_int(fingerprint_version) or not 1 <= fingerprint_version < _INT32:
            raise ValueError(f"fingerprint_version must be a positive int, got "
                             f"{fingerprint_version!r}")
        self.fingerprint_version = fingerprint_version
        super().__init__(out_dir, date=date, rows_per_part=rows_per_part,
                         endpoint_url=endpoint_url, client=client, writer_id=writer_id,
                         max_url_length=max_url_length)

    def _check_keys(self, row: Mapping, n: int) -> None:
        if row.get("fingerprint_version", self.fingerprint_version) != self.fingerprint_version:
            raise FetchLogRowError(n, "fingerprint_version", f"{row['fingerprint_version']!r} "
                                   f"differs from this writer's {self.fingerprint_version}: "
                                   "never mix versions")

    def check(self, row: Mapping) -> dict:
        """The row as it will be written, or FetchLogRowError (nothing is buffered)."""
        n, host = self._check_url(row)
        at = self._check_fetch(row, n)
        if not isinstance(row["conditional"], bool):
            raise FetchLogRowError(n, "conditional", f"not a bool: {row['conditional']!r}")
        for name in ("etag", "last_modified", "content_hash", "retry_after"):
            value = row.get(name)
            if value is not None and not isinstance(value, str):
                raise FetchLogRowError(n, name, f"not a string: {value!r}")
        if not _is_int(row["bytes"]) or row["bytes"] < 0:
            raise FetchLogRowError(n, "bytes", f"negative_bytes: {row['bytes']!r}")
        elapsed = row.get("elapsed_ms")
        if elapsed is not None and (not _is_int(elapsed) or not 0 <= elapsed < _INT32):
            raise FetchLogRowError(n, "elapsed_ms", f"not an int32 >= 0: {elapsed!r}")
        lane = row.get("lane")
        if lane is not None and lane not in LANES:
            raise FetchLogRowError(n, "lane", f"{lane!r} is not one of {list(LANES)}")
        return {**{name: row.get(name) for name in FETCH_LOG.names}, "host": host,
                "fetched_at": at, "fingerprint_version": self.fingerprint_version}

    def __enter__(self) -> "FetchLogWriter":
        return self
