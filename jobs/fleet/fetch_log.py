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
``s3://bucket/prefix``, normally ``.../fetch_logs/dt=YYYY-MM-DD``): locally written to a
temporary name then renamed, on S3 one PUT each, so a reader never sees half a part.
"""
from __future__ import annotations

import io
import os
import uuid
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.core.hosts import normalize_host, url_host, url_problem
from jobs.fleet.fingerprint import FINGERPRINT_VERSION
from jobs.fleet.schedule import LANES
from jobs.schemas import FETCH_LOG, check_schema

DEFAULT_MAX_URL_LENGTH = 2048  # = the planner's ingest.max_url_length default (a test checks)
ROWS_PER_PART = 100_000
FETCH_LOG_SCHEMA = FETCH_LOG.arrow_schema()
_WRITE_OPTIONS = dict(compression="zstd", compression_level=3, write_statistics=True)
_INT32 = 2 ** 31


class FetchLogRowError(ValueError):
    """A row breaks the fetch_logs contract; names the row (0-based, per writer) and column."""

    def __init__(self, row: int, column: str, problem: str) -> None:
        self.row, self.column, self.problem = row, column, problem
        super().__init__(f"fetch_logs row {row}: column '{column}': {problem}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class FetchLogWriter:
    """Validate fetch-log rows and write them as Parquet parts.

    Parameters
    ----------
    out_dir : str
        Directory or ``s3://bucket/prefix`` of the day's partition.
    date : str, optional
        ``YYYY-MM-DD`` of the partition: rows must be fetched that UTC day.
    fingerprint_version : int
        The ``FINGERPRINT_VERSION`` that computed every ``content_hash`` written.
    rows_per_part : int
        Rows buffered before a part is written.
    endpoint_url, client : optional
        S3 endpoint or boto3 client (S3 ``out_dir`` only).
    writer_id : str, optional
        Part-name tag (default: random), unique per writer so many fetchers can share a
        partition.
    max_url_length : int
        The planner's ``ingest.max_url_length``.

    Examples
    --------
    >>> with FetchLogWriter("/data/fetch_logs/dt=2026-11-30", date="2026-11-30") as log:
    ...     log.write({"url": u, "fetched_at": t, "status": 200, "conditional": False,
    ...                "etag": None, "last_modified": None, "content_hash": h, "bytes": n})
    """

    #: The contract and Arrow schema of the parts (a subclass writes another table).
    contract, arrow_schema = FETCH_LOG, FETCH_LOG_SCHEMA

    def __init__(self, out_dir: str, *, date: str | None = None,
                 fingerprint_version: int = FINGERPRINT_VERSION,
                 rows_per_part: int = ROWS_PER_PART, endpoint_url: str | None = None,
                 client=None, writer_id: str | None = None,
                 max_url_length: int = DEFAULT_MAX_URL_LENGTH) -> None:
        if not _is_int(fingerprint_version) or not 1 <= fingerprint_version < _INT32:
            raise ValueError(f"fingerprint_version must be a positive int, got "
                             f"{fingerprint_version!r}")
        if not _is_int(rows_per_part) or rows_per_part < 1:
            raise ValueError(f"rows_per_part must be >= 1, got {rows_per_part!r}")
        self.fingerprint_version = fingerprint_version
        self.rows_per_part, self.max_url_length = rows_per_part, max_url_length
        self.writer_id = writer_id or uuid.uuid4().hex[:12]
        if not self.writer_id.replace("-", "").isalnum():
            raise ValueError(f"writer_id must be letters, digits and '-', got {writer_id!r}")
        self.day = None
        if date is not None:
            start = datetime.fromisoformat(date).replace(tzinfo=timezone.utc)
            self.day = (start, start + timedelta(days=1))
        self.out_dir = out_dir
        self._s3 = None
        if out_dir.startswith(("s3://", "s3a://")):
            bucket, _, prefix = out_dir.split("://", 1)[1].partition("/")
            if client is None:
                import boto3

                client = boto3.session.Session().client("s3", endpoint_url=endpoint_url)
            self._s3 = (client, bucket, prefix.strip("/"))
        elif "://" in out_dir:
            raise ValueError(f"unsupported out_dir {out_dir!r} (s3://bucket/prefix or a directory)")
        self._rows: list[dict] = []
        self._seen = 0
        self._seq = 0
        self.parts: list[str] = []

    # ----- validation -------------------------------------------------------------------
    def check(self, row: Mapping) -> dict:
        """The row as it will be written, or FetchLogRowError (nothing is buffered)."""
        n = self._seen
        if not isinstance(row, Mapping):
            raise FetchLogRowError(n, "*", f"a row is a mapping, got {type(row).__name__}")
        known = set(FETCH_LOG.names)
        unknown = sorted(str(k) for k in row if k not in known)
        if unknown:
            raise FetchLogRowError(n, unknown[0], "not a fetch_logs column")
        if row.get("fingerprint_version", self.fingerprint_version) != self.fingerprint_version:
            raise FetchLogRowError(n, "fingerprint_version", f"{row['fingerprint_version']!r} "
                                   f"differs from this writer's {self.fingerprint_version}: "
                                   "never mix versions")
        for col in FETCH_LOG.columns:
            if col.required and col.name not in row:
                raise FetchLogRowError(n, col.name, "required column is missing")
            if not col.nullable and col.name in row and row[col.name] is None:
                raise FetchLogRowError(n, col.name, "is null")
        url = row["url"]
        if not isinstance(url, str):
            raise FetchLogRowError(n, "url", f"not a string: {url!r}")
        problem = url_problem(url, self.max_url_length)
        if problem:
            raise FetchLogRowError(n, "url", f"{problem} ({url[:200]!r})")
        host = url_host(url)
        given = row.get("host")
        if given is not None and (not isinstance(given, str) or normalize_host(given) != host):
            raise FetchLogRowError(n, "host", f"host_mismatch: {given!r} is not the URL's host "
                                              f"{host!r}")
        at = row["fetched_at"]
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise FetchLogRowError(n, "fetched_at", f"not a timezone-aware datetime: {at!r}")
        at = at.astimezone(timezone.utc)
        if self.day and not self.day[0] <= at < self.day[1]:
            raise FetchLogRowError(n, "fetched_at", f"{at.isoformat()} is outside the "
                                                    f"partition's day {self.day[0].date()}")
        status = row["status"]
        if not _is_int(status) or not (status == 0 or 100 <= status <= 599):
            raise FetchLogRowError(n, "status", f"bad_status: {status!r} (0 or 100-599)")
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

    # ----- writing ----------------------------------------------------------------------
    def write(self, row: Mapping) -> None:
        """Check one row and buffer it; a full buffer is written as a part."""
        checked = self.check(row)
        self._seen += 1
        self._rows.append(checked)
        if len(self._rows) >= self.rows_per_part:
            self.flush()

    def write_rows(self, rows: Iterable[Mapping]) -> None:
        for row in rows:
            self.write(row)

    def flush(self) -> str | None:
        """Write the buffered rows as one part; returns its path/URI (None: nothing buffered)."""
        if not self._rows:
            return None
        table = pa.Table.from_pylist(self._rows, schema=self.arrow_schema)
        name = f"part-{self.writer_id}-{self._seq:05d}.parquet"
        check_schema(self.contract, table.schema, name)
        sink = io.BytesIO()
        pq.write_table(table, sink, **_WRITE_OPTIONS)
        data = sink.getvalue()
        if self._s3 is not None:
            client, bucket, prefix = self._s3
            key = f"{prefix}/{name}" if prefix else name
            client.put_object(Bucket=bucket, Key=key, Body=data,
                              ContentType="application/vnd.apache.parquet")
            where = f"s3://{bucket}/{key}"
        else:
            os.makedirs(self.out_dir, exist_ok=True)
            where = os.path.join(self.out_dir, name)
            tmp = os.path.join(self.out_dir, f".tmp-{name}")  # dot files are not listed
            with open(tmp, "wb") as out:
                out.write(data)
            os.replace(tmp, where)
        self._seq += 1
        self._rows = []
        self.parts.append(where)
        return where

    def close(self) -> list[str]:
        """Write what is buffered; returns every part written."""
        self.flush()
        return list(self.parts)

    def __enter__(self) -> "FetchLogWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()  # buffered rows were checked: they are kept even if the caller failed
