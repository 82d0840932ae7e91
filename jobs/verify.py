"""Check a published day against its manifest, and read a day's schedule as a fetcher would.

``verify`` re-reads ``_manifest.json`` from S3 or a local target, then (concurrently)
downloads every listed object and checks its size and sha256, the Parquet footer's
row count and schema, the per-file lane counts and host counts, that the totals add
up, and that no host appears in two files. Every problem found is collected into
one ``VerificationError``.

It also re-checks what reaches the fleet's requests, row by row, with the planner's own
grammar (``jobs.core.http_fields``): every ``if_none_match`` / ``if_modified_since``
value, URL and host, and that ``full`` rows carry no validator. A bad value is named by
file, row (0-based, in the file's order) and column.

Politeness across midnight: when the previous day's manifest exists on the target, its
files are read too (only ``host`` and ``not_before``, file by file) and, per host, the
first visit of this day must be at least the host's crawl delay after the last visit of
the previous day. The delays come from the caller (``crawl_delays`` /
``default_crawl_delay_s``) or, failing that, from the config the manifest records: its
``host_policy/`` table and ``politeness.default_crawl_delay_s`` (rows carry ``crawl_delay_s``
since manifest 2.0, but a previous day published before that does not).
A previous day that exists but cannot be read, or a day whose delays cannot be known,
fails verification rather than passing unchecked.
"""
from __future__ import annotations

import hashlib
import io
import json
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.core.http_fields import HEADER_CHECKS, safe_request_text
from jobs.errors import RecrawlError, VerificationError  # noqa: F401  (home: jobs.errors)
from jobs.objstore import ObjectAccessDenied, ObjectNotFound, open_store, with_retries
from jobs.paths import check_date, previous_day, schedule_day_prefix, schedule_manifest_key
from jobs.fleet.schedule import (SCHEDULE_SCHEMA, ScheduleSchemaError, check_schedule_values,
                                 manifest_problem, schedule_frame, shard_problem)

READ_ATTEMPTS = 3  # manifest re-reads when a republish races a reader
BATCH_ROWS = 65_536  # rows held at once while re-checking a file's values
SHOWN_PER_CHECK = 5  # bad rows named per file and check (the rest are counted)
GAP_TOLERANCE_S = 1e-6  # not_before has microsecond resolution


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
    # Hosts in both this day and the previous published one, whose midnight gap was checked.
    midnight_hosts_checked: int = 0
    previous_date: str | None = None  # None: no previous day published, nothing to check

    def as_dict(self) -> dict:
        """Plain JSON-ready dict (tuples become lists), e.g. for an Airflow XCom."""
        return json.loads(json.dumps(asdict(self)))


def load_manifest(store, manifest_key: str, where: str, *, legacy_ok: bool = False) -> dict:
    """Fetch and structurally check a manifest; raise VerificationError if unusable.

    ``legacy_ok`` also accepts a major-1 manifest (integer ``schema_version`` 1, before
    ``shards``/``shard_count``) with its ``files`` list: only for the previous day's last
    visits, so the first day published as 2.x can still be checked across midnight.
    """
    try:
        manifest = json.loads(with_retries(lambda: store.get_bytes(manifest_key)))
    except ObjectNotFound:
        raise VerificationError([f"no manifest at {where}"]) from None
    except ObjectAccessDenied as exc:  # 403: missing-or-denied, never "no such day"
        raise VerificationError([f"manifest at {where} is missing or denied: {exc}"]) from None
    except json.JSONDecodeError as exc:
        raise VerificationError([f"manifest at {where} is not JSON: {exc}"]) from None
    problem = manifest_problem(manifest, where)
    if problem and legacy_ok and isinstance(manifest, dict) and manifest.get(
            "schema_version") == 1 and isinstance(manifest.get("files"), list):
        problem = None
    if problem:
        raise VerificationError([problem])
    return manifest


@dataclass
class _FileCheck:
    """What one file's check found: problems, its hosts and each host's first visit."""

    problems: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    first_us: dict[str, int] = field(default_factory=dict)  # host -> min not_before (us)


def _fetch_checked(store, entry: dict) -> tuple[bytes | None, list[str]]:
    """The listed object's bytes if they match the manifest's sha256, and any problems."""
    key = entry.get("key", "?")
    try:
        data = with_retries(lambda: store.get_bytes(key))
    except ObjectNotFound:
        return None, [f"{key}: listed in manifest but missing"]
    except ObjectAccessDenied as exc:
        return None, [f"listed in manifest but missing or denied: {exc}"]
    problems = []
    if len(data) != entry.get("bytes"):
        problems.append(f"{key}: size {len(data)} != manifest {entry.get('bytes')}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.get("sha256"):
        return None, problems + [f"{key}: sha256 {digest[:16]}… != manifest "
                                 f"{str(entry.get('sha256'))[:16]}…"]
    return data, problems


def _bad_rows(key: str, column: str, values: list, ok, offset: int, counts: Counter,
              shown: list[str], what: str) -> None:
    """Record rows of ``values`` (a batch starting at row ``offset``) that ``ok`` refuses."""
    for i, value in enumerate(values):
        if not ok(value):
            counts[column] += 1
            if counts[column] <= SHOWN_PER_CHECK:
                shown.append(f"{key}: row {offset + i} {column} {value!r} is not {what}")


def _check_values(key: str, batch: pa.RecordBatch, offset: int, counts: Counter,
                  shown: list[str]) -> None:
    """Re-check one batch of rows with the planner's grammar (jobs.core.http_fields)."""
    for column, ok in HEADER_CHECKS.items():
        _bad_rows(key, column, batch.column(column).to_pylist(),
                  lambda v, ok=ok: v is None or ok(v), offset, counts, shown,
                  f"a valid {column} value")
    for column in ("url", "host"):
        _bad_rows(key, column, batch.column(column).to_pylist(), safe_request_text, offset,
                  counts, shown, "safe in a request (control character, space or empty)")
    # A full fetch never sends a validator (audit rows rely on it); a conditional one needs one.
    headers = zip(batch.column("method").to_pylist(), batch.column("if_none_match").to_pylist(),
                  batch.column("if_modified_since").to_pylist())
    agree = [(m == "full") == (inm is None and ims is None) for m, inm, ims in headers]
    _bad_rows(key, "method", agree, bool, offset, counts, shown,
              "consistent with the row's validators (full with a validator, or "
              "conditional without one)")


def _fold_visits(batch: pa.RecordBatch, into: dict[str, int], pick) -> None:
    """Fold a batch's per-host min (``pick=min``) or max not_before (us) into ``into``."""
    agg = "min" if pick is min else "max"
    grouped = pa.Table.from_batches([batch]).group_by("host").aggregate([("not_before", agg)])
    stamps = grouped[f"not_before_{agg}"].cast(pa.int64()).to_pylist()
    for host, t in zip(grouped["host"].to_pylist(), stamps):
        into[host] = t if host not in into else pick(into[host], t)


def _check_file(store, entry: dict) -> _FileCheck:
    """Problems with one listed file, its hosts and their first visits (one batch at a time)."""
    key = entry.get("key", "?")
    data, problems = _fetch_checked(store, entry)
    out = _FileCheck(problems=problems)
    if data is None:
        return out
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError) as exc:
        out.problems.append(f"{key}: not a readable Parquet file: {exc}")
        return out
    if not parquet.schema_arrow.remove_metadata().equals(SCHEDULE_SCHEMA):
        out.problems.append(f"{key}: schema {parquet.schema_arrow} != SCHEDULE_SCHEMA")
        return out
    if parquet.metadata.num_rows != entry.get("rows"):
        out.problems.append(f"{key}: footer rows {parquet.metadata.num_rows} != manifest "
                            f"{entry.get('rows')}")
    lanes: Counter = Counter()
    bad: Counter = Counter()
    shown: list[str] = []
    offset = 0
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
        lanes.update(batch.column("lane").to_pylist())
        out.hosts.update(pc.unique(batch.column("host")).to_pylist())
        _check_values(key, batch, offset, bad, shown)
        try:  # the fleet's own value rules (lanes, numbers, crawl delay, expiry)
            check_schedule_values(pa.Table.from_batches([batch]))
        except ScheduleSchemaError as exc:
            bad["values"] += 1
            if bad["values"] <= SHOWN_PER_CHECK:
                shown.append(f"{key}: rows {offset}..{offset + batch.num_rows - 1}: {exc}")
        _fold_visits(batch, out.first_us, min)
        offset += batch.num_rows
    if dict(lanes) != entry.get("lanes"):
        out.problems.append(f"{key}: lane counts {dict(lanes)} != manifest {entry.get('lanes')}")
    if len(out.hosts) != entry.get("hosts"):
        out.problems.append(f"{key}: {len(out.hosts)} hosts != manifest {entry.get('hosts')}")
    out.problems += shown
    out.problems += [f"{key}: {n - SHOWN_PER_CHECK} more bad {column} value(s)"
                     for column, n in sorted(bad.items()) if n > SHOWN_PER_CHECK]
    return out


def _last_visits(store, entry: dict) -> tuple[dict[str, int], list[str]]:
    """Per-host last not_before (us) of one previous-day file, reading two columns."""
    data, problems = _fetch_checked(store, entry)
    last: dict[str, int] = {}
    if data is None:
        return last, problems
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=["host", "not_before"]):
            _fold_visits(batch, last, max)
    except (pa.ArrowInvalid, OSError, KeyError) as exc:
        problems.append(f"{entry.get('key', '?')}: not a readable schedule file: {exc}")
    return last, problems


def read_crawl_delays(host_policy_uri: str,
                      bounds: tuple[float | None, float | None] = (None, None),
                      run_date: str | None = None) -> dict[str, float]:
    """Per-host crawl delays from a ``host_policy/`` table, with ingest's rules: with
    ``run_date``, only the snapshot that run read (:mod:`jobs.snapshots`), else every file.

    Hosts are lowercased, rows without a host or with a delay that is null, NaN or <= 0
    are skipped (ingest quarantines them), delays are clamped to ``bounds`` (min, max;
    None: unbounded) as the planner clamps them, and duplicates keep the largest delay.
    Returns an empty dict when the table is absent (every host then has the default).
    """
    low, high = bounds
    from jobs import storage

    from jobs import snapshots

    if run_date is not None:
        snap = snapshots.find_at(host_policy_uri, "host_policy", run_date)
        uris = list(snap.files) if snap is not None else []
    else:
        uris = storage.list_parquet_files(host_policy_uri)
    delays: dict[str, float] = {}
    for uri in uris:
        fs = storage.filesystem_for(uri)
        path = uri.split("://", 1)[1] if "://" in uri else uri
        table = pq.read_table(path, columns=["host", "crawl_delay_s"], filesystem=fs)
        for host, delay in zip(table["host"].to_pylist(), table["crawl_delay_s"].to_pylist()):
            if host is None or delay is None or not delay > 0:  # NaN fails "> 0" too
                continue
            delay = max(float(delay), low) if low is not None else float(delay)
            delay = min(delay, high) if high is not None else delay
            host = host.lower()
            delays[host] = max(delays.get(host, 0.0), delay)
    return delays


def _recorded_politeness(manifest: dict) -> tuple[str | None, float | None, tuple]:
    """The host_policy URI, default crawl delay and (min, max) delay bounds of the config
    the manifest records (None where it does not say)."""
    config = (manifest.get("extra") or {}).get("config") or {}
    root = (config.get("paths") or {}).get("root")
    politeness = config.get("politeness") or {}

    def number(name):
        value = politeness.get(name)
        return float(value) if value is not None else None

    policy = f"{str(root).rstrip('/')}/host_policy" if root else None
    return (policy, number("default_crawl_delay_s"),
            (number("min_crawl_delay_s"), number("max_crawl_delay_s")))


def _delay_lookup(manifest: dict, crawl_delays: Mapping[str, float] | None,
                  default_crawl_delay_s: float | None, run_date: str):
    """``host -> crawl delay`` (None when unknown) from the caller, else the manifest's config
    (its host_policy snapshot as of ``run_date``, the run that planned the day)."""
    policy_uri, recorded_default, bounds = _recorded_politeness(manifest)
    default = default_crawl_delay_s if default_crawl_delay_s is not None else recorded_default
    if crawl_delays is None:
        # Only the recorded config's own host_policy: a caller who gives just a default
        # means "every host has this delay".
        crawl_delays = (read_crawl_delays(policy_uri, bounds, run_date)
                        if policy_uri and default_crawl_delay_s is None else {})
    return lambda host: crawl_delays.get(host, default)


def _midnight_problems(first: dict[str, tuple[int, str]], last: dict[str, tuple[int, str]],
                       delay_of, date: str, prev: str) -> tuple[list[str], int]:
    """Hosts whose first visit of ``date`` is closer than their crawl delay to the last of
    ``prev`` (each side as ``host -> (not_before us, file key)``), and the hosts compared."""
    problems, shared = [], sorted(set(first) & set(last))
    unknown = [host for host in shared if delay_of(host) is None]
    if unknown:
        problems.append(f"{len(unknown)} host(s) in both {prev} and {date} have no known crawl "
                        f"delay, so the gap at midnight cannot be checked (pass crawl_delays or "
                        f"record the config in the manifest), e.g. {unknown[:5]}")
    for host in shared:
        (t1, key1), (t0, key0) = first[host], last[host]
        delay, gap = delay_of(host), (t1 - t0) / 1e6
        if delay is not None and gap < delay - GAP_TOLERANCE_S:
            problems.append(f"host {host!r}: first visit of {date} ({key1}) is {gap:.6f}s after "
                            f"the last of {prev} ({key0}), less than its crawl delay {delay}s")
    return problems, len(shared)


def _previous_day_last_visits(store, location, date: str, pool) -> tuple[
        str | None, dict[str, tuple[int, str]], list[str]]:
    """(previous date or None if not published, host -> (last us, key), problems)."""
    prev = previous_day(check_date(date))
    prev_key = schedule_manifest_key(location.prefix, prev)
    try:
        manifest = load_manifest(store, prev_key, location.uri(prev_key), legacy_ok=True)
    except VerificationError as exc:
        if exc.problems and exc.problems[0].startswith("no manifest"):
            return None, {}, []  # nothing published the day before: no gap to keep
        return prev, {}, [f"previous day {prev}: {p}" for p in exc.problems]
    last: dict[str, tuple[int, str]] = {}
    problems: list[str] = []
    entries = manifest["files"]
    for entry, (hosts, found) in zip(entries, pool.map(lambda e: _last_visits(store, e), entries)):
        problems += [f"previous day {prev}: {p}" for p in found]
        for host, t in hosts.items():
            if host not in last or t > last[host][0]:
                last[host] = (t, entry.get("key", "?"))
    return prev, last, problems


def verify(target: str, date: str, *, endpoint_url: str | None = None, max_workers: int = 8,
           crawl_delays: Mapping[str, float] | None = None,
           default_crawl_delay_s: float | None = None) -> VerifyResult:
    """Verify the day ``date`` published at ``target``; raise VerificationError on mismatch.

    Parameters
    ----------
    crawl_delays : mapping, optional
        ``host -> crawl delay (s)`` as the planner used them, for the midnight check.
        Default: the ``host_policy/`` table of the config recorded in the manifest.
    default_crawl_delay_s : float, optional
        Delay of hosts missing from ``crawl_delays``. Default: the recorded config's
        ``politeness.default_crawl_delay_s``.
    """
    check_date(date)
    store, location = open_store(target, endpoint_url=endpoint_url, max_pool_connections=max_workers)
    prefix = schedule_day_prefix(location.prefix, date)
    manifest_key = schedule_manifest_key(location.prefix, date)
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
        prev, last, prev_problems = _previous_day_last_visits(store, location, date, pool)
    host_files = Counter()
    first: dict[str, tuple[int, str]] = {}
    for entry, found in zip(files, checked):
        problems += found.problems
        host_files.update(found.hosts)
        first.update({h: (t, entry.get("key", "?")) for h, t in found.first_us.items()})
    shared = sorted(h for h, n in host_files.items() if n > 1)
    if shared:
        problems.append(f"{len(shared)} host(s) appear in more than one file, e.g. {shared[:5]}")
    problems += prev_problems
    midnight_checked = 0
    if last:
        try:
            delay_of = _delay_lookup(manifest, crawl_delays, default_crawl_delay_s,
                                     previous_day(date))
        except (OSError, pa.ArrowInvalid, KeyError, RecrawlError) as exc:
            problems.append(f"cannot read crawl delays for the midnight check: {exc}")
        else:
            gap_problems, midnight_checked = _midnight_problems(first, last, delay_of, date, prev)
            problems += gap_problems

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
                        unlisted=unlisted, midnight_hosts_checked=midnight_checked,
                        previous_date=prev)


def read_schedule(target: str, date: str, endpoint_url: str | None = None, *,
                  shards: set[int] | None = None) -> pd.DataFrame:
    """Load a day's rows (optionally only some shards) via its manifest, as a fetcher would
    (the checks are jobs.fleet.schedule's; this adds the object store and the re-reads).

    Each file's sha256 is checked. A listed file that is gone means a republish replaced
    the day after we read the manifest, so the manifest is read again.
    """
    check_date(date)
    store, location = open_store(target, endpoint_url=endpoint_url)
    manifest_key = schedule_manifest_key(location.prefix, date)
    gone: Exception | None = None
    for _ in range(READ_ATTEMPTS):
        manifest = load_manifest(store, manifest_key, location.uri(manifest_key))
        entries = [e for e in manifest["files"] if shards is None or e["shard"] in shards]
        files = []
        try:
            for entry in entries:
                data = with_retries(lambda: store.get_bytes(entry["key"]))
                problem = shard_problem(data, entry)
                if problem:
                    raise VerificationError([problem])
                files.append(data)
        except (ObjectNotFound, ObjectAccessDenied) as exc:
            gone = exc  # republished meanwhile (403: same, for a role without ListBucket)
            continue  # start over from the new manifest
        return schedule_frame(files)
    raise VerificationError([f"{location.uri(manifest_key)} kept changing during "
                             f"{READ_ATTEMPTS} reads (last: {gone!r})"])


def main(argv: list[str] | None = None) -> int:
    """CLI: print the VerifyResult as JSON (exit 0); VerificationError (exit 4) lists the
    problems."""
    from jobs.cli import Parser

    parser = Parser(prog="python -m jobs.verify", description=__doc__.split("\n")[0])
    parser.add_argument("--target", required=True, help="s3://bucket/prefix or a directory")
    parser.add_argument("--date", required=True, help="schedule date, YYYY-MM-DD")
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (default: AWS config)")
    parser.add_argument("--max-workers", type=int, default=8)
    parser.add_argument("--host-policy", default=None,
                        help="host_policy/ table for the midnight check (default: the one of "
                             "the config recorded in the manifest)")
    parser.add_argument("--default-crawl-delay-s", type=float, default=None,
                        help="delay of hosts not in host_policy (default: the recorded config's)")
    args = parser.parse_args(argv)
    delays = read_crawl_delays(args.host_policy) if args.host_policy else None
    result = verify(args.target, args.date, endpoint_url=args.endpoint_url,
                    max_workers=args.max_workers, crawl_delays=delays,
                    default_crawl_delay_s=args.default_crawl_delay_s)
    print(json.dumps(result.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    from jobs.cli import guarded

    sys.exit(guarded(main, prog="python -m jobs.verify"))
