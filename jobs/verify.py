"""Check a published day against its manifest, and read a day's schedule as a fetcher would.

``verify`` re-reads ``_manifest.json`` from S3 or a local target, then (concurrently)
downloads every listed object and checks its size and sha256, the Parquet footer's
row count and schema, the per-file lane counts and host counts, that the totals add
up, and that no host appears in two files. Every problem found is collected into
one ``VerificationError``.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.objstore import ObjectNotFound, join_key, open_store, with_retries
from jobs.publish import MANIFEST_NAME, check_date, day_prefix
from jobs.shards import SCHEDULE_SCHEMA, SCHEDULE_SCHEMA_VERSION

READ_ATTEMPTS = 3  # manifest re-reads when a republish races a reader


class VerificationError(Exception):
    """A published day does not match its manifest; ``problems`` lists every finding."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = "\n  ".join(self.problems[:10])
        more = f"\n  ... and {len(self.problems) - 10} more" if len(self.problems) > 10 else ""
        super().__init__(f"{len(self.problems)} problem(s):\n  {shown}{more}")


@dataclass(frozen=True)
class VerifyResult:
    """Summary of a day that passed verification."""

    target: str
    date: str
    manifest_key: str
    files: int
    rows: int
    bytes: int
    hosts: int
    lanes: dict[str, int]
    unlisted: tuple[str, ...] = field(default=())  # leftovers a crashed publish did not delete

    def as_dict(self) -> dict:
        """Plain JSON-ready dict (tuples become lists), e.g. for an Airflow XCom."""
        return json.loads(json.dumps(asdict(self)))


def load_manifest(store, manifest_key: str, where: str) -> dict:
    """Fetch and structurally check a manifest; raise VerificationError if unusable."""
    try:
        manifest = json.loads(with_retries(lambda: store.get_bytes(manifest_key)))
    except ObjectNotFound:
        raise VerificationError([f"no manifest at {where}"]) from None
    except json.JSONDecodeError as exc:
        raise VerificationError([f"manifest at {where} is not JSON: {exc}"]) from None
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEDULE_SCHEMA_VERSION:
        raise VerificationError([f"manifest at {where} has schema_version "
                                 f"{manifest.get('schema_version') if isinstance(manifest, dict) else None!r}, "
                                 f"expected {SCHEDULE_SCHEMA_VERSION}"])
    if not isinstance(manifest.get("files"), list) or not isinstance(manifest.get("totals"), dict):
        raise VerificationError([f"manifest at {where} lacks files/totals"])
    return manifest


def _check_file(store, entry: dict) -> tuple[list[str], set[str]]:
    """Problems with one listed file, and the hosts it holds."""
    key = entry.get("key", "?")
    try:
        data = with_retries(lambda: store.get_bytes(key))
    except ObjectNotFound:
        return [f"{key}: listed in manifest but missing"], set()
    problems = []
    if len(data) != entry.get("bytes"):
        problems.append(f"{key}: size {len(data)} != manifest {entry.get('bytes')}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.get("sha256"):
        return problems + [f"{key}: sha256 {digest[:16]}… != manifest {str(entry.get('sha256'))[:16]}…"], set()
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError) as exc:
        return problems + [f"{key}: not a readable Parquet file: {exc}"], set()
    if not parquet.schema_arrow.remove_metadata().equals(SCHEDULE_SCHEMA):
        problems.append(f"{key}: schema {parquet.schema_arrow} != SCHEDULE_SCHEMA")
        return problems, set()
    if parquet.metadata.num_rows != entry.get("rows"):
        problems.append(f"{key}: footer rows {parquet.metadata.num_rows} != manifest {entry.get('rows')}")
    table = parquet.read(columns=["host", "lane"])
    lanes = {i["values"]: i["counts"] for i in pc.value_counts(table["lane"]).to_pylist()}
    if lanes != entry.get("lanes"):
        problems.append(f"{key}: lane counts {lanes} != manifest {entry.get('lanes')}")
    hosts = set(pc.unique(table["host"]).to_pylist())
    if len(hosts) != entry.get("hosts"):
        problems.append(f"{key}: {len(hosts)} hosts != manifest {entry.get('hosts')}")
    return problems, hosts


def verify(target: str, date: str, *, endpoint_url: str | None = None,
           max_workers: int = 8) -> VerifyResult:
    """Verify the day ``date`` published at ``target``; raise VerificationError on mismatch."""
    check_date(date)
    store, location = open_store(target, endpoint_url=endpoint_url, max_pool_connections=max_workers)
    prefix = day_prefix(location.prefix, date)
    manifest_key = join_key(prefix, MANIFEST_NAME)
    manifest = load_manifest(store, manifest_key, location.uri(manifest_key))
    files = manifest["files"]
    problems = []
    if manifest.get("date") != date:
        problems.append(f"manifest date {manifest.get('date')!r} != {date!r}")
    for entry in files:
        if not str(entry.get("key", "")).startswith(prefix + "/"):
            problems.append(f"{entry.get('key')!r} is outside {prefix}/")
    shard_counts = Counter(entry.get("shard") for entry in files)
    problems += [f"shard {s} listed {n} times" for s, n in sorted(shard_counts.items(), key=str) if n > 1]

    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="verify") as pool:
        checked = list(pool.map(lambda entry: _check_file(store, entry), files))
    host_files = Counter()
    for file_problems, hosts in checked:
        problems += file_problems
        host_files.update(hosts)
    shared = sorted(h for h, n in host_files.items() if n > 1)
    if shared:
        problems.append(f"{len(shared)} host(s) appear in more than one file, e.g. {shared[:5]}")

    lanes: Counter = Counter()
    for entry in files:
        lanes.update(entry.get("lanes") or {})
    expected_totals = {"files": len(files), "rows": sum(e.get("rows", 0) for e in files),
                       "bytes": sum(e.get("bytes", 0) for e in files),
                       "hosts": sum(e.get("hosts", 0) for e in files),
                       "lanes": dict(sorted(lanes.items()))}
    for name, value in expected_totals.items():
        if manifest["totals"].get(name) != value:
            problems.append(f"totals.{name} {manifest['totals'].get(name)!r} != sum of files {value!r}")
    if problems:
        raise VerificationError(problems)

    listed = {entry["key"] for entry in files} | {manifest_key}
    unlisted = tuple(sorted(o.key for o in store.list(prefix + "/") if o.key not in listed))
    return VerifyResult(target=target, date=date, manifest_key=manifest_key, files=len(files),
                        rows=expected_totals["rows"], bytes=expected_totals["bytes"],
                        hosts=expected_totals["hosts"], lanes=expected_totals["lanes"],
                        unlisted=unlisted)


def read_schedule(target: str, date: str, endpoint_url: str | None = None, *,
                  shards: set[int] | None = None) -> pd.DataFrame:
    """Load a day's rows (optionally only some shards) via its manifest, as a fetcher would.

    Each file's sha256 is checked. A listed file that is gone means a republish replaced
    the day after we read the manifest, so the manifest is read again.
    """
    check_date(date)
    store, location = open_store(target, endpoint_url=endpoint_url)
    prefix = day_prefix(location.prefix, date)
    manifest_key = join_key(prefix, MANIFEST_NAME)
    for _ in range(READ_ATTEMPTS):
        manifest = load_manifest(store, manifest_key, location.uri(manifest_key))
        entries = [e for e in manifest["files"] if shards is None or e["shard"] in shards]
        tables = []
        try:
            for entry in entries:
                data = with_retries(lambda: store.get_bytes(entry["key"]))
                if hashlib.sha256(data).hexdigest() != entry["sha256"]:
                    raise VerificationError([f"{entry['key']}: sha256 does not match manifest"])
                tables.append(pq.read_table(io.BytesIO(data)))
        except ObjectNotFound:
            continue  # republished meanwhile: start over from the new manifest
        table = pa.concat_tables(tables) if tables else SCHEDULE_SCHEMA.empty_table()
        return table.replace_schema_metadata(None).to_pandas()
    raise VerificationError([f"{location.uri(manifest_key)} kept changing during "
                             f"{READ_ATTEMPTS} reads"])


def main(argv: list[str] | None = None) -> int:
    """CLI: print the VerifyResult as JSON (exit 0) or the problems (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m jobs.verify", description=__doc__.split("\n")[0])
    parser.add_argument("--target", required=True, help="s3://bucket/prefix or a directory")
    parser.add_argument("--date", required=True, help="schedule date, YYYY-MM-DD")
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (default: AWS config)")
    parser.add_argument("--max-workers", type=int, default=8)
    args = parser.parse_args(argv)
    try:
        result = verify(args.target, args.date, endpoint_url=args.endpoint_url,
                        max_workers=args.max_workers)
    except VerificationError as exc:
        print(f"verification FAILED for {args.target} dt={args.date}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
