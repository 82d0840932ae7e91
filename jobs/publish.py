"""Publish a day's staged shard files and their manifest to S3 or a local directory.

Layout under the target (``s3://bucket/prefix`` or a directory)::

    {prefix}/schedules/dt={date}/shard-{id:05d}-{sha256[:12]}.parquet
    {prefix}/schedules/dt={date}/_manifest.json

Order matters: data files are uploaded first, the manifest last, then objects of that
day not listed in the new manifest are deleted. Data file names are content-addressed,
so while a rerun uploads, the old manifest still points at old files that are still
there; a reader trusting only the manifest never sees a half-published day.

Reader protocol: GET ``_manifest.json``, then GET the listed keys and check their
sha256. If a listed key returns 404, a republish replaced the day between the two
reads: re-read the manifest and start over (``jobs.verify.read_schedule`` does this).

The manifest holds no wall-clock time or random ids, so republishing the same inputs
leaves byte-identical objects. Creating the bucket is not part of publishing
(production IAM does not grant it); ``ensure_bucket`` exists for the local stack.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import botocore.exceptions

from jobs.objstore import (join_key, make_s3_client, open_store, parse_location,
                           with_retries)
from jobs.shards import SCHEDULE_SCHEMA, SCHEDULE_SCHEMA_VERSION, SHARD_INDEX_NAME, parse_shard_index

MANIFEST_NAME = "_manifest.json"


class PublishError(RuntimeError):
    """Publishing stopped before the manifest was written; the previous day stays live."""


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

    def as_dict(self) -> dict:
        """Plain JSON-ready dict (tuples become lists), e.g. for an Airflow XCom."""
        return json.loads(json.dumps(asdict(self)))


def check_date(date: str) -> str:
    """Return ``date`` if it is a real YYYY-MM-DD date, else raise ValueError."""
    try:
        if isinstance(date, str) and len(date) == 10 and dt.date.fromisoformat(date):
            return date
    except ValueError:
        pass
    raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")


def day_prefix(location_prefix: str, date: str) -> str:
    """Key prefix (no trailing slash) holding one day's schedule objects."""
    return join_key(location_prefix, "schedules", f"dt={check_date(date)}")


def manifest_bytes(manifest: dict) -> bytes:
    """Canonical JSON encoding: sorted keys, fixed indent, no NaN."""
    return json.dumps(manifest, sort_keys=True, indent=2, allow_nan=False).encode() + b"\n"


def build_manifest(date: str, prefix: str, infos: list[dict], manifest_extra: dict) -> dict:
    """The manifest for ``infos`` (shard infos) published under key prefix ``prefix``."""
    files = [{"key": join_key(prefix, info["file"]), "shard": info["shard"], "rows": info["rows"],
              "bytes": info["bytes"], "sha256": info["sha256"], "hosts": info["hosts"],
              "lanes": dict(sorted(info["lanes"].items()))} for info in infos]
    lanes: dict[str, int] = {}
    for item in files:
        for lane, rows in item["lanes"].items():
            lanes[lane] = lanes.get(lane, 0) + rows
    return {
        "schema_version": SCHEDULE_SCHEMA_VERSION,
        "columns": [[field.name, str(field.type)] for field in SCHEDULE_SCHEMA],
        "date": date,
        "prefix": prefix,
        "files": sorted(files, key=lambda f: f["shard"]),
        "totals": {"files": len(files), "rows": sum(f["rows"] for f in files),
                   "bytes": sum(f["bytes"] for f in files),
                   "hosts": sum(f["hosts"] for f in files), "lanes": dict(sorted(lanes.items()))},
        "extra": manifest_extra,
    }


def publish(staging_dir: str, target: str, date: str, manifest_extra: dict, *,
            endpoint_url: str | None = None, max_workers: int = 8, retries: int = 5,
            backoff_base_s: float = 0.2) -> PublishResult:
    """Publish the shards listed in ``staging_dir/_shards.json`` for ``date`` to ``target``."""
    check_date(date)
    if not isinstance(manifest_extra, dict):
        raise TypeError(f"manifest_extra must be a dict, got {type(manifest_extra).__name__}")
    try:
        manifest_bytes(manifest_extra)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"manifest_extra must be plain JSON (no NaN/objects): {exc}") from exc
    if max_workers < 1 or retries < 1:
        raise ValueError("max_workers and retries must be >= 1")

    def retrying(operation):
        return with_retries(operation, attempts=retries, base_delay_s=backoff_base_s)

    source, source_loc = open_store(staging_dir, endpoint_url=endpoint_url,
                                    max_pool_connections=max_workers)
    store, location = open_store(target, endpoint_url=endpoint_url,
                                 max_pool_connections=max_workers)
    infos = parse_shard_index(retrying(lambda: source.get_bytes(
        join_key(source_loc.prefix, SHARD_INDEX_NAME))), source=source_loc.uri(SHARD_INDEX_NAME))
    prefix = day_prefix(location.prefix, date)
    existing = {obj.key: obj for obj in retrying(lambda: list(store.list(prefix + "/")))}

    def upload(info: dict) -> tuple[str, bool]:
        data = retrying(lambda: source.get_bytes(join_key(source_loc.prefix, info["file"])))
        if len(data) != info["bytes"] or hashlib.sha256(data).hexdigest() != info["sha256"]:
            raise PublishError(f"staged {info['file']} does not match {SHARD_INDEX_NAME}")
        key = join_key(prefix, info["file"])
        present = existing.get(key)
        # Same content-addressed key, size and MD5 ETag: the bytes are already there.
        if present and present.size == len(data) and present.etag == hashlib.md5(data).hexdigest():
            return key, False
        retrying(lambda: store.put_bytes(key, data, content_type="application/vnd.apache.parquet",
                                         metadata={"sha256": info["sha256"],
                                                   "rows": str(info["rows"])}))
        return key, True

    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="publish") as pool:
        futures = [pool.submit(upload, info) for info in infos]
        failures = [f.exception() for f in futures if f.exception() is not None]
    if failures:
        raise PublishError(f"{len(failures)} of {len(infos)} uploads failed; manifest not "
                           f"written: {failures[0]!r}") from failures[0]
    outcomes = [f.result() for f in futures]

    manifest = build_manifest(date, prefix, infos, manifest_extra)
    body = manifest_bytes(manifest)
    manifest_key = join_key(prefix, MANIFEST_NAME)
    retrying(lambda: store.put_bytes(manifest_key, body, content_type="application/json"))

    # Only now may the previous day's files go: the live manifest no longer lists them.
    keep = {f["key"] for f in manifest["files"]} | {manifest_key}
    stale = sorted(o.key for o in retrying(lambda: list(store.list(prefix + "/")))
                   if o.key not in keep)
    if stale:
        retrying(lambda: store.delete(stale))
    return PublishResult(
        target=target, date=date, manifest_key=manifest_key,
        manifest_sha256=hashlib.sha256(body).hexdigest(), files=len(infos),
        rows=manifest["totals"]["rows"], bytes=manifest["totals"]["bytes"],
        uploaded=tuple(k for k, sent in outcomes if sent),
        skipped=tuple(k for k, sent in outcomes if not sent), deleted=tuple(stale))


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
    """CLI entry point; prints the PublishResult as JSON."""
    parser = argparse.ArgumentParser(prog="python -m jobs.publish", description=__doc__.split("\n")[0])
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
    args = parser.parse_args(argv)
    raw = args.extra_json
    if raw.startswith("@"):
        with open(raw[1:], encoding="utf-8") as handle:
            raw = handle.read()
    extra = json.loads(raw)
    location = parse_location(args.target)
    if args.ensure_bucket and location.is_s3:
        ensure_bucket(args.endpoint_url, location.bucket)
    result = publish(args.staging, args.target, args.date, extra, endpoint_url=args.endpoint_url,
                     max_workers=args.max_workers, retries=args.retries)
    print(json.dumps(result.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
