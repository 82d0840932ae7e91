"""The fleet's reader of published schedules: one shard at a time, one batch at a time.

A fetcher owns one or more shards (``crc32(host) mod shard_count``). For a day it reads
``_manifest.json``, accepts it when its MAJOR version is ours (:mod:`jobs.fleet.manifest`),
and streams each shard it owns: the object is downloaded once into a spooled temporary
file while its sha256 is computed, checked against the manifest, then read back row group
by row group (``pyarrow.parquet.ParquetFile.iter_batches``), so memory holds one batch,
never a day. Every batch is checked before it is yielded: the schedule contract's columns
(:func:`jobs.schemas.check_schema`), the value rules (:func:`jobs.fleet.schedule.
check_schedule_values`) and the request grammar of every URL, host and validator header
(:mod:`jobs.core.http_fields`, the planner's own functions).

Named errors, never an empty result: a missing manifest or data file is
:class:`ScheduleObjectMissing` (404, or 403: without ``s3:ListBucket`` S3 answers 403 for a
missing key, so 403 means "missing or denied"); a republish racing the read that does not
settle is :class:`ScheduleChanged`; bytes that are not the manifest's are
:class:`ScheduleIntegrityError`; rows whose ``expires_at`` has passed (``now=``) are
:class:`ScheduleExpired`. A shard listed with 0 rows has no file and yields no batch.

Locations: ``s3://bucket/prefix`` (boto3; endpoint from the argument or the AWS config) or a
local directory. The protocol is docs/fleet.md.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
from datetime import datetime, timezone
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.core.http_fields import HEADER_CHECKS, safe_request_text
from jobs.fleet.manifest import Manifest, ManifestError, ShardEntry, parse_manifest
from jobs.fleet.schedule import check_schedule_values
from jobs.schemas import SCHEDULE, check_schema

MANIFEST_NAME = "_manifest.json"
BATCH_ROWS = 65_536
READ_ATTEMPTS = 3  # manifest re-reads when a republish races a reader
DOWNLOAD_ATTEMPTS = 3  # per object, for connections dropped mid-body
SPOOL_BYTES = 32 << 20  # a shard object larger than this is spooled to disk, not memory
_CHUNK = 1 << 20


class ScheduleObjectMissing(LookupError):
    """A manifest or listed data file is not there (404) or not readable (403).

    ``status`` is 404 or 403; 403 means "missing or denied" (S3 answers 403 for a missing
    key to a role without ``s3:ListBucket``), never "the day is empty".
    """

    def __init__(self, where: str, status: int) -> None:
        self.where, self.status = where, status
        what = ("missing (404)" if status == 404 else
                "missing or denied (403: without s3:ListBucket S3 answers 403 for a missing key)")
        super().__init__(f"{where}: {what}")


class ScheduleChanged(RuntimeError):
    """The day was republished during every one of ``READ_ATTEMPTS`` reads."""


class ScheduleIntegrityError(ValueError):
    """A data file's bytes, footer or rows are not what its manifest entry says."""


class ScheduleExpired(RuntimeError):
    """Rows whose ``expires_at`` is at or before the reader's ``now``: they must not be used."""


def day_prefix(prefix: str, date: str) -> str:
    """Key prefix of one published day (the layout of ``jobs.paths.schedule_day_prefix``)."""
    return "/".join(p for p in (prefix.strip("/"), "schedules", f"dt={date}") if p)


class _S3:
    def __init__(self, bucket: str, client) -> None:
        self.bucket, self.client = bucket, client

    def where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def open(self, key: str):
        import botocore.exceptions

        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except botocore.exceptions.ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status == 404 or code in ("NoSuchKey", "NotFound"):
                raise ScheduleObjectMissing(self.where(key), 404) from None
            if status == 403 or code in ("AccessDenied", "Forbidden"):
                raise ScheduleObjectMissing(self.where(key), 403) from None
            raise


class _Local:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def where(self, key: str) -> str:
        return os.path.join(self.root, key)

    def open(self, key: str):
        try:
            return open(self.where(key), "rb")
        except FileNotFoundError:
            raise ScheduleObjectMissing(self.where(key), 404) from None
        except PermissionError:
            raise ScheduleObjectMissing(self.where(key), 403) from None


def _transient_errors() -> tuple:
    """Errors of a body read worth retrying (botocore's request retries end at the headers)."""
    try:
        import botocore.exceptions as bx
    except ImportError:  # a local-only install
        return (ConnectionError,)
    return (ConnectionError, bx.ConnectionError, bx.HTTPClientError, bx.ResponseStreamingError,
            bx.IncompleteReadError)


def _read_all(body) -> bytes:
    try:
        return body.read()
    finally:
        body.close()


class ScheduleReader:
    """Reads published days from ``target`` (``s3://bucket/prefix`` or a directory).

    Parameters
    ----------
    target : str
        Where the planner publishes (its ``publish.target``).
    endpoint_url : str, optional
        S3 endpoint (default: the AWS configuration).
    client : optional
        A boto3 S3 client to use instead of creating one.
    batch_rows : int
        Rows per yielded batch at most.
    """

    def __init__(self, target: str, *, endpoint_url: str | None = None, client=None,
                 batch_rows: int = BATCH_ROWS) -> None:
        if not isinstance(target, str) or not target:
            raise ValueError(f"target must be a non-empty string, got {target!r}")
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be >= 1, got {batch_rows!r}")
        self.batch_rows = batch_rows
        if target.startswith(("s3://", "s3a://")):
            bucket, _, prefix = target.split("://", 1)[1].partition("/")
            if not bucket:
                raise ValueError(f"S3 target {target!r} has no bucket")
            if client is None:
                import boto3

                client = boto3.session.Session().client("s3", endpoint_url=endpoint_url)
            self._store, self.prefix = _S3(bucket, client), prefix.strip("/")
        elif "://" in target and not target.startswith("file://"):
            raise ValueError(f"unsupported target {target!r} (s3://bucket/prefix or a directory)")
        else:
            self._store, self.prefix = _Local(target.removeprefix("file://")), ""

    def manifest(self, date: str) -> Manifest:
        """The day's checked manifest (ScheduleObjectMissing, ManifestVersionError, ManifestError)."""
        key = f"{day_prefix(self.prefix, date)}/{MANIFEST_NAME}"
        manifest = parse_manifest(_read_all(self._store.open(key)), self._store.where(key))
        if manifest.date != date:
            raise ManifestError(f"manifest at {self._store.where(key)} is for {manifest.date!r}, "
                                f"not {date!r}")
        return manifest

    def shard_batches(self, date: str, shard: int, *, now: datetime | None = None,
                      manifest: Manifest | None = None) -> Iterator[pa.RecordBatch]:
        """Stream one shard's rows as checked record batches (none for an empty shard).

        A listed file that is gone before its first batch means a republish replaced the
        day: the manifest is read again (up to ``READ_ATTEMPTS`` times) and the shard
        streamed from the new one. A file missing under an unchanged manifest is
        ScheduleObjectMissing. With ``now``, rows already expired raise ScheduleExpired.
        """
        last: ScheduleObjectMissing | None = None
        for attempt in range(READ_ATTEMPTS):
            fresh = manifest if attempt == 0 and manifest is not None else self.manifest(date)
            if last is not None and fresh.raw == seen.raw:
                raise last  # same manifest, file still gone: a broken day, not a race
            if not 0 <= shard < fresh.shard_count:
                raise ValueError(f"shard {shard} is outside 0..{fresh.shard_count - 1} of {date}")
            entry, seen = fresh.shards[shard], fresh
            if entry.empty:
                return
            try:
                spool = self._download(entry)
            except ScheduleObjectMissing as exc:
                last = exc
                continue
            with spool:
                yield from self._batches(spool, entry, now)
            return
        raise ScheduleChanged(f"dt={date} shard {shard} kept changing during {READ_ATTEMPTS} "
                              f"reads (last: {last})")

    def day(self, date: str, *, now: datetime | None = None
            ) -> Iterator[tuple[ShardEntry, Iterator[pa.RecordBatch]]]:
        """Every shard of the day in order, each with its batch stream (consume it before
        asking for the next shard); empty shards are included with an empty stream.

        One manifest is pinned for the whole pass: if a republish replaces a file of it,
        the pass raises ScheduleChanged rather than mix two publishes of the day.
        """
        manifest = self.manifest(date)
        for entry in manifest.shards:
            yield entry, self._pinned(date, manifest, entry, now)

    def _pinned(self, date, manifest, entry, now) -> Iterator[pa.RecordBatch]:
        if entry.empty:
            return
        try:
            spool = self._download(entry)
        except ScheduleObjectMissing as exc:
            try:
                live = self.manifest(date)
            except ScheduleObjectMissing:
                raise exc from None
            if live.raw != manifest.raw:
                raise ScheduleChanged(f"dt={date} was republished during the read; read the "
                                      f"day again ({exc})") from exc
            raise
        with spool:
            yield from self._batches(spool, entry, now)

    def _download(self, entry: ShardEntry):
        """The object spooled to a temporary file, its size and sha256 checked; a connection
        dropped mid-body is tried again (``DOWNLOAD_ATTEMPTS`` in all)."""
        for attempt in range(DOWNLOAD_ATTEMPTS):
            try:
                return self._download_once(entry)
            except _transient_errors():
                if attempt == DOWNLOAD_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * 2 ** attempt)
        raise AssertionError("unreachable")

    def _download_once(self, entry: ShardEntry):
        body = self._store.open(entry.key)
        digest, size = hashlib.sha256(), 0
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        try:
            while chunk := body.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                spool.write(chunk)
        except BaseException:
            spool.close()
            raise
        finally:
            body.close()
        if size != entry.bytes or digest.hexdigest() != entry.sha256:
            spool.close()
            raise ScheduleIntegrityError(f"{self._store.where(entry.key)}: {size} bytes with "
                                         f"sha256 {digest.hexdigest()[:16]}..., manifest says "
                                         f"{entry.bytes} bytes, {entry.sha256[:16]}...")
        spool.seek(0)
        return spool

    def _batches(self, spool, entry: ShardEntry, now) -> Iterator[pa.RecordBatch]:
        where = self._store.where(entry.key)
        parquet = pq.ParquetFile(spool)
        check_schema(SCHEDULE, parquet.schema_arrow, where)  # SchemaError names the column
        if parquet.metadata.num_rows != entry.rows:
            raise ScheduleIntegrityError(f"{where}: {parquet.metadata.num_rows} rows, manifest "
                                         f"says {entry.rows}")
        offset = 0
        for batch in parquet.iter_batches(batch_size=self.batch_rows):
            check_batch(batch, where, offset, now)
            offset += batch.num_rows
            yield batch


def check_batch(batch: pa.RecordBatch, where: str, offset: int = 0,
                now: datetime | None = None) -> None:
    """Refuse a batch a fetcher must not act on; the message names file, row and column.

    The value rules of the schedule contract, then every URL and host (no control
    character, space or empty value) and validator header (full-string HTTP grammar), with
    the planner's functions; with ``now``, rows at or past their ``expires_at``.
    """
    from jobs.fleet.schedule import ScheduleSchemaError

    try:
        check_schedule_values(pa.Table.from_batches([batch]))
    except ScheduleSchemaError as exc:
        raise ScheduleIntegrityError(f"{where}: rows {offset}..: {exc}") from None
    checks = {**HEADER_CHECKS, "url": safe_request_text, "host": safe_request_text}
    for column, ok in checks.items():
        nullable = column in HEADER_CHECKS
        for i, value in enumerate(batch.column(column).to_pylist()):
            if not ((nullable and value is None) or ok(value)):
                raise ScheduleIntegrityError(f"{where}: row {offset + i}: column {column!r} "
                                             f"value {value!r} may not be sent")
    if now is not None:
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware (UTC)")
        cutoff = pa.scalar(now.astimezone(timezone.utc), pa.timestamp("us", tz="UTC"))
        expired = pc.sum(pc.less_equal(batch.column("expires_at"), cutoff)).as_py() or 0
        if expired:
            first = pc.min(batch.column("expires_at")).as_py()
            raise ScheduleExpired(f"{where}: {expired} row(s) expired at {first} (now {now}); "
                                  f"read a newer day")
