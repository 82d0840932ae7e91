"""Publish a day's staged shard files and their manifest to S3 or a local directory.

Layout under the target (``s3://bucket/prefix`` or a directory)::

    {prefix}/schedules/dt={date}/shard-{id:05d}-{sha256[:12]}.parquet
    {prefix}/schedules/dt={date}/_manifest.json
    {prefix}/schedules/_locks/dt={date}.json      the day's publish lock (not part of the day)

Protocol (docs/contract.md, "Schedules and the manifest"): take the day's lock with an
S3 conditional write (a lease, renewed while we work); note the live manifest's ETag;
upload the data files; swap the manifest with ``If-Match`` on that ETag (``If-None-Match``
for a first publish); check every named file is there; delete the day's objects the new
manifest does not name; release the lock. A second publish of the same day either finds
the lock held or loses the manifest swap, and exits with PublishConflict (CLI status 3)
without having changed anything live. Nothing is deleted before the swap, so a publish
killed at any point leaves the previous manifest and all its files readable.

Reader protocol (docs/fleet.md): GET ``_manifest.json``, accept it if its MAJOR schema
version is the reader's, then GET the listed keys and check their sha256; a shard listed
with 0 rows has no file. If a listed key returns 404 (or 403 without ``s3:ListBucket``), a
republish may have replaced the day between the two reads: re-read the manifest and start
over (``jobs.fleet.reader`` and ``jobs.verify.read_schedule`` do this).

The manifest holds no wall-clock time or random ids, so republishing the same inputs
leaves byte-identical objects. Creating the bucket is not part of publishing
(production IAM does not grant it); ``ensure_bucket`` exists for the local stack.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import botocore.exceptions

from jobs.errors import (EXIT_LOST, PublishConflict,  # noqa: F401  (their home: jobs.errors)
                         MissingPartitionError, PublishError)
from jobs.config import check_endpoint_url
from jobs.objstore import (ObjectNotFound, PreconditionFailed, make_s3_client, open_store,
                           parse_location, with_retries)
from jobs.paths import (MANIFEST_NAME, check_date, join_key, schedule_day_prefix,
                        schedule_lock_key)
from jobs.fleet.manifest import MANIFEST_VERSION
from jobs.fleet.schedule import SCHEDULE_SCHEMA, SHARD_INDEX_NAME, parse_staged_day

DEFAULT_LOCK_LEASE_S = 60.0


@dataclass(frozen=True)
class PublishResult:
    """What one publish did. ``skipped`` files were already present with identical bytes."""

    target: str
    date: str
    manifest_key: str
    manifest_sha256: str
    files: int
    rows: int
    bytes: int
    uploaded: tuple[str, ...]
    skipped: tuple[str, ...]
    deleted: tuple[str, ...]
    repaired: tuple[str, ...] = ()  # named files found missing after the swap and re-uploaded

    def as_dict(self) -> dict:
        """Plain JSON-ready dict (tuples become lists), e.g. for an Airflow XCom."""
        return json.loads(json.dumps(asdict(self)))


def manifest_bytes(manifest: dict) -> bytes:
    """Canonical JSON encoding: sorted keys, fixed indent, no NaN."""
    return json.dumps(manifest, sort_keys=True, indent=2, allow_nan=False).encode() + b"\n"


def build_manifest(date: str, prefix: str, infos: list[dict], manifest_extra: dict, *,
                   n_shards: int) -> dict:
    """The manifest for ``infos`` (shard infos) published under key prefix ``prefix``.

    Version :data:`~jobs.fleet.manifest.MANIFEST_VERSION`: ``files`` lists the data files,
    ``shards`` every shard ``0 .. n_shards-1`` with its row count (0 and ``key`` null for a
    shard without rows, which has no file) and ``shard_count`` is ``n_shards``.
    """
    files = [{"key": join_key(prefix, info["file"]), "shard": info["shard"], "rows": info["rows"],
              "bytes": info["bytes"], "sha256": info["sha256"], "hosts": info["hosts"],
              "lanes": dict(sorted(info["lanes"].items()))} for info in infos]
    lanes: dict[str, int] = {}
    for item in files:
        for lane, rows in item["lanes"].items():
            lanes[lane] = lanes.get(lane, 0) + rows
    by_shard = {f["shard"]: f for f in files}
    shards = [{"shard": s, "rows": by_shard[s]["rows"] if s in by_shard else 0,
               "hosts": by_shard[s]["hosts"] if s in by_shard else 0,
               "key": by_shard[s]["key"] if s in by_shard else None} for s in range(n_shards)]
    return {
        "schema_version": MANIFEST_VERSION,
        "columns": [[field.name, str(field.type)] for field in SCHEDULE_SCHEMA],
        "date": date,
        "prefix": prefix,
        "shard_count": n_shards,
        "shards": shards,
        "files": sorted(files, key=lambda f: f["shard"]),
        "totals": {"files": len(files), "rows": sum(f["rows"] for f in files),
                   "bytes": sum(f["bytes"] for f in files),
                   "hosts": sum(f["hosts"] for f in files), "lanes": dict(sorted(lanes.items()))},
        "extra": manifest_extra,
    }


def cas_put(store, key: str, body: bytes, retrying, *, if_match: str | None = None,
            if_none_match: bool = False, content_type: str = "application/json") -> str:
    """Conditional PUT that survives its own retries; returns the new ETag.

    A PUT whose response was lost and was retried fails its own condition (the first
    attempt already changed the key). So on PreconditionFailed, a key that now holds
    exactly ``body`` counts as our write; callers make bodies unique where that matters.
    """
    try:
        return retrying(lambda: store.put_bytes(key, body, content_type=content_type,
                                                if_match=if_match, if_none_match=if_none_match))
    except PreconditionFailed:
        try:
            landed = retrying(lambda: store.get_bytes(key)) == body
        except ObjectNotFound:
            landed = False
        head = retrying(lambda: store.head(key)) if landed else None
        if head is None:
            raise
        return head.etag


class DayLock:
    """A lease on publishing one day, held by a conditional write to its lock key
    (``jobs.paths.schedule_lock_key``).

    Taken with ``If-None-Match: *`` (no lock yet) or ``If-Match`` on a released or expired
    lock, renewed every lease/3 with ``If-Match`` on our own last write, released by
    writing ``state: released`` the same way: every change is one atomic compare-and-swap,
    so two publishers can never both hold it. Expiry uses the store's clock (HTTP Date
    minus Last-Modified), so a killed holder blocks the day for at most one lease.
    """

    def __init__(self, store, key: str, lease_s: float, retrying) -> None:
        if not lease_s > 0:
            raise ValueError(f"lock lease must be > 0 s, got {lease_s!r}")
        self.store, self.key, self.lease_s, self.retrying = store, key, float(lease_s), retrying
        self.owner = uuid.uuid4().hex
        self.etag: str | None = None
        self.lost = False
        self._writes = 0
        self._renewed_at = 0.0
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self, state: str) -> bytes:
        """A held lock's body is unique per write, so cas_put can recognise its own; a
        released one is fixed, so a rerun leaves the bucket's objects byte-identical."""
        if state == "released":
            return manifest_bytes({"state": "released"})
        self._writes += 1
        return manifest_bytes({"owner": self.owner, "state": state, "host": socket.gethostname(),
                               "pid": os.getpid(), "lease_s": self.lease_s, "write": self._writes})

    def acquire(self) -> None:
        """Take the lease or raise PublishConflict naming the holder."""
        sent = time.monotonic()
        try:
            self.etag = cas_put(self.store, self.key, self._body("held"), self.retrying,
                                if_none_match=True)
        except PreconditionFailed:
            self.etag = self._take_over()
        self._renewed_at = sent
        self._thread = threading.Thread(target=self._heartbeat, name="publish-lock", daemon=True)
        self._thread.start()

    def _take_over(self) -> str:
        """Replace a released or expired lock atomically; PublishConflict if it is live."""
        current = self.retrying(lambda: self.store.head(self.key))
        if current is None:  # released by deletion (lifecycle) just now: one more try
            return cas_put(self.store, self.key, self._body("held"), self.retrying,
                           if_none_match=True)
        try:
            holder = json.loads(self.retrying(lambda: self.store.get_bytes(self.key)))
        except (ObjectNotFound, ValueError):
            holder = {}
        lease = float(holder.get("lease_s") or self.lease_s)
        if holder.get("state") == "held" and current.age_s <= lease:
            raise PublishConflict(
                f"another publish holds {self.key} (host {holder.get('host')}, pid "
                f"{holder.get('pid')}, renewed {current.age_s:.0f} s ago, lease {lease:g} s)")
        try:
            return cas_put(self.store, self.key, self._body("held"), self.retrying,
                           if_match=current.etag)
        except PreconditionFailed:
            raise PublishConflict(f"another publish took {self.key} first") from None

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            self.renew()

    def renew(self) -> None:
        """Extend the lease; a lost compare-and-swap means another publish took it over."""
        with self._mutex:
            if self.lost or self._stop.is_set():
                return
            sent = time.monotonic()
            try:
                self.etag = cas_put(self.store, self.key, self._body("held"), self.retrying,
                                    if_match=self.etag)
                self._renewed_at = sent
            except PreconditionFailed:
                self.lost = True
            except Exception:  # noqa: BLE001 - transient beyond retries: check() expires us
                pass

    def check(self) -> None:
        """Raise PublishConflict unless the lease is surely still ours (with a 25% margin)."""
        with self._mutex:
            if self.lost or time.monotonic() - self._renewed_at > 0.75 * self.lease_s:
                raise PublishConflict(f"this publish lost its lease on {self.key} before the "
                                      "manifest swap; nothing was swapped")

    def still_ours(self) -> bool:
        """True if the lock object is still our last write (checked before deleting)."""
        with self._mutex:
            current = self.retrying(lambda: self.store.head(self.key))
            return not self.lost and current is not None and current.etag == self.etag

    def release(self) -> None:
        """Stop renewing and mark the lock released, unless someone else holds it by now."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._mutex:
            if self.lost or self.etag is None:
                return
            try:
                cas_put(self.store, self.key, self._body("released"), self.retrying,
                        if_match=self.etag)
            except Exception:  # noqa: BLE001 - an unreleased lock only expires after a lease
                pass


def _check_publish_args(date: str, manifest_extra: dict, max_workers: int, retries: int) -> None:
    """Reject bad arguments before touching any store."""
    check_date(date)
    if not isinstance(manifest_extra, dict):
        raise TypeError(f"manifest_extra must be a dict, got {type(manifest_extra).__name__}")
    try:
        manifest_bytes(manifest_extra)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"manifest_extra must be plain JSON (no NaN/objects): {exc}") from exc
    if max_workers < 1 or retries < 1:
        raise ValueError("max_workers and retries must be >= 1")


def publish(staging_dir: str, target: str, date: str, manifest_extra: dict, *,
            endpoint_url: str | None = None, max_workers: int = 8, retries: int = 5,
            backoff_base_s: float = 0.2, sse_kms_key_id: str | None = None,
            lock_lease_s: float = DEFAULT_LOCK_LEASE_S,
            allow_insecure_endpoint: bool = False) -> PublishResult:
    """Publish the shards listed in ``staging_dir/_shards.json`` for ``date`` to ``target``.

    Raises PublishConflict (nothing of ours is live) when another publish of the same day
    holds the lock or swapped the manifest first, PublishError on other failures; in both
    cases the previous live manifest stays readable.
    """
    _check_publish_args(date, manifest_extra, max_workers, retries)
    check_endpoint_url(endpoint_url, allow_insecure_endpoint)

    def retrying(operation):
        return with_retries(operation, attempts=retries, base_delay_s=backoff_base_s)

    source, source_loc = open_store(staging_dir, endpoint_url=endpoint_url,
                                    max_pool_connections=max_workers)
    store, location = open_store(target, endpoint_url=endpoint_url,
                                 max_pool_connections=max_workers, sse_kms_key_id=sse_kms_key_id)
    try:
        index = retrying(lambda: source.get_bytes(join_key(source_loc.prefix, SHARD_INDEX_NAME)))
    except ObjectNotFound:
        raise MissingPartitionError("schedules", source_loc.uri(SHARD_INDEX_NAME),
                                    "no staged schedule: build_schedule has not finished "
                                    "for this day") from None
    n_shards, infos = parse_staged_day(index, source=source_loc.uri(SHARD_INDEX_NAME))
    lock = DayLock(store, schedule_lock_key(location.prefix, date), lock_lease_s, retrying)
    lock.acquire()
    try:
        return _publish_locked(_Run(source, source_loc, store, target, date, infos, retrying,
                                    max_workers, n_shards), manifest_extra, lock)
    finally:
        lock.release()


@dataclass(frozen=True)
class _Run:
    """What the steps of one publish share."""

    source: object
    source_loc: object
    store: object
    target: str
    date: str
    infos: list
    retrying: object
    max_workers: int
    n_shards: int

    @property
    def prefix(self) -> str:
        return schedule_day_prefix(parse_location(self.target).prefix, self.date)

    def staged(self, info: dict) -> bytes:
        """A staged shard's bytes, checked against _shards.json."""
        data = self.retrying(lambda: self.source.get_bytes(join_key(self.source_loc.prefix,
                                                                    info["file"])))
        if len(data) != info["bytes"] or hashlib.sha256(data).hexdigest() != info["sha256"]:
            raise PublishError(f"staged {info['file']} does not match {SHARD_INDEX_NAME}")
        return data

    def put_shard(self, info: dict, data: bytes) -> str:
        key = join_key(self.prefix, info["file"])
        self.retrying(lambda: self.store.put_bytes(
            key, data, content_type="application/vnd.apache.parquet",
            metadata={"sha256": info["sha256"], "rows": str(info["rows"])}))
        return key


def _already_there(run: _Run, present, data: bytes, info: dict) -> bool:
    """Same content-addressed key, size and MD5 ETag (or, encrypted, S3's checked SHA-256)."""
    if present is None or present.size != len(data):
        return False
    if present.etag == hashlib.md5(data).hexdigest():
        return True
    return run.retrying(lambda: run.store.stored_sha256(present.key)) == info["sha256"]


def _upload_all(run: _Run) -> list[tuple[str, bool]]:
    """Upload every staged shard not already present; (key, uploaded?) per shard."""
    existing = {o.key: o for o in run.retrying(lambda: list(run.store.list(run.prefix + "/")))}

    def upload(info: dict) -> tuple[str, bool]:
        data = run.staged(info)
        key = join_key(run.prefix, info["file"])
        if _already_there(run, existing.get(key), data, info):
            return key, False
        return run.put_shard(info, data), True

    with ThreadPoolExecutor(max_workers=run.max_workers, thread_name_prefix="publish") as pool:
        futures = [pool.submit(upload, info) for info in run.infos]
        failures = [f.exception() for f in futures if f.exception() is not None]
    if failures:
        raise PublishError(f"{len(failures)} of {len(run.infos)} uploads failed; manifest not "
                           f"written: {failures[0]!r}") from failures[0]
    return [f.result() for f in futures]


def _swap_manifest(run: _Run, key: str, body: bytes, base) -> None:
    """Replace exactly the manifest we saw when we began (``base``; None: there was none)."""
    try:
        cas_put(run.store, key, body, run.retrying, if_match=base.etag if base else None,
                if_none_match=base is None)
    except PreconditionFailed:
        raise PublishConflict(f"the live manifest {key} changed while this publish ran: another "
                              f"publish of dt={run.date} won; this one changed nothing live") from None


def _repair_missing(run: _Run, manifest: dict) -> tuple[str, ...]:
    """Re-upload any file the new manifest names that is not there (deleted by a publish
    whose lease had expired); a publish only succeeds with every named file present."""
    def missing() -> list[dict]:
        listed = {o.key: o.size for o in run.retrying(lambda: list(run.store.list(run.prefix + "/")))}
        return [f for f in manifest["files"] if listed.get(f["key"]) != f["bytes"]]

    by_key = {join_key(run.prefix, info["file"]): info for info in run.infos}
    repaired = tuple(run.put_shard(by_key[f["key"]], run.staged(by_key[f["key"]]))
                     for f in missing())
    if repaired and missing():
        raise PublishError(f"files named by the live manifest keep vanishing under {run.prefix}/")
    return repaired


def _collect_garbage(run: _Run, keep: set[str], lock: DayLock) -> tuple[str, ...]:
    """Delete the day's objects the live manifest does not name, only while we hold the lock
    (so no concurrent publish can be uploading files we would delete)."""
    stale = sorted(o.key for o in run.retrying(lambda: list(run.store.list(run.prefix + "/")))
                   if o.key not in keep)
    if not stale or not lock.still_ours():
        return ()
    run.retrying(lambda: run.store.delete(stale))
    return tuple(stale)


def _publish_locked(run: _Run, manifest_extra: dict, lock: DayLock) -> PublishResult:
    """Upload, swap the manifest, repair, collect garbage: the steps done under the lock."""
    manifest_key = join_key(run.prefix, MANIFEST_NAME)
    base = run.retrying(lambda: run.store.head(manifest_key))
    outcomes = _upload_all(run)
    manifest = build_manifest(run.date, run.prefix, run.infos, manifest_extra,
                              n_shards=run.n_shards)
    body = manifest_bytes(manifest)
    lock.check()
    _swap_manifest(run, manifest_key, body, base)
    repaired = _repair_missing(run, manifest)
    # Only now may the previous day's files go: the live manifest no longer lists them.
    deleted = _collect_garbage(run, {f["key"] for f in manifest["files"]} | {manifest_key}, lock)
    return PublishResult(
        target=run.target, date=run.date, manifest_key=manifest_key,
        manifest_sha256=hashlib.sha256(body).hexdigest(), files=len(run.infos),
        rows=manifest["totals"]["rows"], bytes=manifest["totals"]["bytes"],
        uploaded=tuple(k for k, sent in outcomes if sent),
        skipped=tuple(k for k, sent in outcomes if not sent), deleted=deleted, repaired=repaired)


def config_kwargs(publish_config) -> dict:
    """publish()'s keyword arguments from a ``[publish]`` config section (for the DAG task)."""
    c = publish_config
    return {"endpoint_url": c.endpoint_url or None, "max_workers": c.max_workers,
            "retries": c.retries, "sse_kms_key_id": c.sse_kms_key_id or None,
            "lock_lease_s": c.lock_lease_s, "allow_insecure_endpoint": c.allow_insecure_endpoint}


def ensure_bucket(endpoint_url: str | None, bucket: str) -> bool:
    """Create ``bucket`` if missing (local stack only); True if it was created."""
    if not bucket or "/" in bucket:
        raise ValueError(f"invalid bucket name {bucket!r}")
    client = make_s3_client(endpoint_url)
    try:
        client.head_bucket(Bucket=bucket)
        return False
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    region = client.meta.region_name
    kwargs = {} if region in (None, "us-east-1") else {
        "CreateBucketConfiguration": {"LocationConstraint": region}}
    try:
        client.create_bucket(Bucket=bucket, **kwargs)
    except client.exceptions.BucketAlreadyOwnedByYou:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; prints the PublishResult as JSON (a lost race: PublishConflict, exit 3)."""
    from jobs.cli import Parser

    parser = Parser(prog="python -m jobs.publish", description=__doc__.split("\n")[0])
    parser.add_argument("--staging", required=True, help="dir or s3:// URI holding _shards.json")
    parser.add_argument("--target", required=True, help="s3://bucket/prefix or a directory")
    parser.add_argument("--date", required=True, help="schedule date, YYYY-MM-DD")
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (default: AWS config)")
    parser.add_argument("--extra-json", default="{}",
                        help="JSON object for the manifest's 'extra' (or @path to a JSON file)")
    parser.add_argument("--max-workers", type=int, default=8)
    parser.add_argument("--retries", type=int, default=5)
    parser.add_argument("--ensure-bucket", action="store_true",
                        help="create the target bucket first (local stack only)")
    parser.add_argument("--sse-kms-key-id", default=None,
                        help="KMS key for SSE-KMS on every object (default: no SSE header)")
    parser.add_argument("--lock-lease-s", type=float, default=DEFAULT_LOCK_LEASE_S,
                        help="lease of the day's publish lock (a killed publish blocks this long)")
    parser.add_argument("--allow-insecure-endpoint", action="store_true",
                        help="allow a plain-http endpoint that is not loopback")
    args = parser.parse_args(argv)
    raw = args.extra_json
    if raw.startswith("@"):
        with open(raw[1:], encoding="utf-8") as handle:
            raw = handle.read()
    extra = json.loads(raw)
    location = parse_location(args.target)
    check_endpoint_url(args.endpoint_url, args.allow_insecure_endpoint)
    if args.ensure_bucket and location.is_s3:
        ensure_bucket(args.endpoint_url, location.bucket)
    result = publish(args.staging, args.target, args.date, extra,
                     endpoint_url=args.endpoint_url, max_workers=args.max_workers,
                     retries=args.retries, sse_kms_key_id=args.sse_kms_key_id,
                     lock_lease_s=args.lock_lease_s,
                     allow_insecure_endpoint=args.allow_insecure_endpoint)
    print(json.dumps(result.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    from jobs.cli import guarded

    sys.exit(guarded(main, prog="python -m jobs.publish"))
