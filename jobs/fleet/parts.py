"""``PartWriter``: the shape the fleet's writers share (``FetchLogWriter``, ``DocumentWriter``).

Rows of one contract are checked at the source with the planner's rules, buffered, and written
as Parquet parts ``part-<writer_id>-<seq>.parquet`` under ``out_dir`` (a directory or
``s3://bucket/prefix``): locally to a temporary name then renamed, on S3 one PUT each, so a
reader never sees half a part. The checks every such row gets: a mapping with no unknown
keys, the contract's required and non-null columns, the URL rule of
:func:`jobs.core.hosts.url_problem`, ``host`` (if given) naming the URL's host once normalised,
a timezone-aware ``fetched_at`` (inside the partition's day when the writer has a ``date``),
``status`` 0 or 100-599. A subclass names its contract and row error and checks the rest.
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
from jobs.schemas import Contract, check_schema

DEFAULT_MAX_URL_LENGTH = 2048  # = the planner's ingest.max_url_length default (a test checks)
_WRITE_OPTIONS = dict(compression="zstd", compression_level=3, write_statistics=True)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class PartWriter:
    """Validate rows of :attr:`contract` and write them as Parquet parts.

    Parameters
    ----------
    out_dir : str
        Directory or ``s3://bucket/prefix`` of the day's partition.
    date : str, optional
        ``YYYY-MM-DD`` of the partition: rows must be fetched that UTC day.
    rows_per_part : int
        Rows buffered before a part is written.
    endpoint_url, client : optional
        S3 endpoint or boto3 client (S3 ``out_dir`` only).
    writer_id : str, optional
        Part-name tag (default: random), unique per writer so many fetchers can share a
        partition.
    max_url_length : int
        The planner's ``ingest.max_url_length``.
    """

    #: Set by a subclass: the contract, the Arrow schema of its parts, and the ValueError
    #: raised for a bad row, built as ``row_error(row, column, problem)``.
    contract: Contract
    arrow_schema: pa.Schema
    row_error: type

    def __init__(self, out_dir: str, *, date: str | None = None, rows_per_part: int,
                 endpoint_url: str | None = None, client=None, writer_id: str | None = None,
                 max_url_length: int = DEFAULT_MAX_URL_LENGTH) -> None:
        if not _is_int(rows_per_part) or rows_per_part < 1:
            raise ValueError(f"rows_per_part must be >= 1, got {rows_per_part!r}")
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
        """The row as it will be written, or :attr:`row_error` (nothing is buffered)."""
        raise NotImplementedError

    def _check_keys(self, row: Mapping, n: int) -> None:
        """Checks of a row's keys after the unknown-column check (none by default)."""

    def _check_url(self, row: Mapping) -> tuple[int, str]:
        """(the row's number, the URL's host): the row is a mapping of known columns with the
        required ones non-null, its URL passes the URL rule and ``host`` (if given) names it."""
        n, err = self._seen, self.row_error
        if not isinstance(row, Mapping):
            raise err(n, "*", f"a row is a mapping, got {type(row).__name__}")
        known = set(self.contract.names)
        unknown = sorted(str(k) for k in row if k not in known)
        if unknown:
            raise err(n, unknown[0], f"not a {self.contract.name} column")
        self._check_keys(row, n)
        for col in self.contract.columns:
            if col.required and col.name not in row:
                raise err(n, col.name, "required column is missing")
            if not col.nullable and col.name in row and row[col.name] is None:
                raise err(n, col.name, "is null")
        url = row["url"]
        if not isinstance(url, str):
            raise err(n, "url", f"not a string: {url!r}")
        problem = url_problem(url, self.max_url_length)
        if problem:
            raise err(n, "url", f"{problem} ({url[:200]!r})")
        host = url_host(url)
        given = row.get("host")
        if given is not None and (not isinstance(given, str) or normalize_host(given) != host):
            raise err(n, "host", f"host_mismatch: {given!r} is not the URL's host {host!r}")
        return n, host

    def _check_fetch(self, row: Mapping, n: int) -> datetime:
        """``fetched_at`` in UTC, checked with ``status``."""
        err = self.row_error
        at = row["fetched_at"]
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise err(n, "fetched_at", f"not a timezone-aware datetime: {at!r}")
        at = at.astimezone(timezone.utc)
        if self.day and not self.day[0] <= at < self.day[1]:
            raise err(n, "fetched_at", f"{at.isoformat()} is outside the partition's day "
                                       f"{self.day[0].date()}")
        status = row["status"]
        if not _is_int(status) or not (status == 0 or 100 <= status <= 599):
            raise err(n, "status", f"bad_status: {status!r} (0 or 100-599)")
        return at

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

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()  # buffered rows were checked: they are kept even if the caller failed
