"""Reading and checking published schedules, as a fetcher does (pyarrow only).

The schedule's columns come from its one contract, :data:`jobs.schemas.SCHEDULE`;
``SCHEDULE_SCHEMA`` is that contract as an Arrow schema (every shard file has exactly it).
The writer side (shard assignment, deterministic files, ``_shards.json``) is
:mod:`jobs.shards`; the fleet's streaming reader of a published day is
:mod:`jobs.fleet.reader` and the planner's is ``jobs.verify.read_schedule``, both built
from the checks here and the manifest rules of :mod:`jobs.fleet.manifest`.

- ``parse_shard_index`` / ``parse_staged_day`` / ``read_shard_index``: the staging index
  ``_shards.json`` (version :data:`SHARD_INDEX_VERSION`, with the day's shard count).
- ``shard_of``: the shard of a host, ``crc32(utf8(host)) % n_shards``.
- ``check_schedule_values``: the values a fetcher can act on (lanes, methods, numbers, hosts,
  crawl delays, expiry).
- ``manifest_problem`` / ``shard_problem`` / ``schedule_frame``: a published day's
  ``_manifest.json``, one listed file's bytes, and the rows of the files read.
"""
from __future__ import annotations

import hashlib
import io
import json
import zlib
from typing import Iterable, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from jobs.fleet.manifest import ManifestError, parse_manifest
from jobs.schemas import SCHEDULE

# _shards.json (staging, written and read by the same deployment): 2 = files with
# crawl_delay_s/expires_at and the index carries n_shards. The published manifest has its
# own "MAJOR.MINOR" version (jobs.fleet.manifest.MANIFEST_VERSION).
SHARD_INDEX_VERSION = 2
SCHEDULE_SCHEMA = SCHEDULE.arrow_schema()
LANES = ("refresh", "fast", "discovery", "audit")  # audit: measurement-only full fetch
METHODS = ("conditional", "full")
SHARD_INDEX_NAME = "_shards.json"
SHARD_COLUMN = "shard"  # the shard id column (the Spark job groups by it; not in the files)


class ScheduleSchemaError(ValueError):
    """Schedule rows do not match SCHEDULE_SCHEMA; the message names the column."""


def filesystem_for(out_dir: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow filesystem + path for a local dir or ``s3://``/``s3a://`` URI."""
    if not isinstance(out_dir, str) or not out_dir:
        raise ValueError(f"out_dir must be a non-empty string, got {out_dir!r}")
    if out_dir.startswith("s3a://"):  # Hadoop's scheme; pyarrow only knows s3://
        out_dir = "s3://" + out_dir[len("s3a://"):]
    if "://" in out_dir:
        return pafs.FileSystem.from_uri(out_dir)
    return pafs.LocalFileSystem(), out_dir


def shard_of(host: pd.Series | str, n_shards: int) -> pd.Series | int:
    """Shard id of a host (or a Series of hosts): ``crc32(utf8(host)) % n_shards``.

    The one shard rule of planner and fleet: every row of a host is in its shard's file, so a
    fetcher owning a shard enforces that host's politeness alone. CRC-32, not Python's salted
    ``hash()``: stable across processes and machines, and native in Spark SQL.
    """
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"n_shards must be a positive int, got {n_shards!r}")
    if isinstance(host, str):
        return zlib.crc32(host.encode("utf-8")) % n_shards
    if not isinstance(host, pd.Series):
        raise TypeError(f"host must be a str or pandas.Series, got {type(host).__name__}")
    if host.isna().any():
        raise ValueError("host series contains nulls")
    # Hash each distinct host once; a shard holds many URLs per host.
    codes, uniques = pd.factorize(host)
    shard_of_unique = [zlib.crc32(str(h).encode("utf-8")) % n_shards for h in uniques]
    return pd.Series(pd.Index(shard_of_unique, dtype="int64").take(codes), index=host.index,
                     name=SHARD_COLUMN)


def check_schedule_values(table: pa.Table) -> None:
    """Reject values the fetchers cannot act on (unknown lanes/methods, bad numbers)."""
    for column, allowed in (("lane", LANES), ("method", METHODS)):
        bad = pc.unique(pc.filter(table[column], pc.invert(pc.is_in(table[column],
                                                                     pa.array(allowed)))))
        if len(bad):
            raise ScheduleSchemaError(f"column {column!r} has values {bad.to_pylist()[:5]} "
                                      f"outside {list(allowed)}")
    for column, low, high in (("p_changed", 0.0, 1.0), ("priority", None, None)):
        values = table[column]
        if len(values) and not pc.all(pc.is_finite(values)).as_py():
            raise ScheduleSchemaError(f"column {column!r} has non-finite values")
        if low is not None and len(values):
            if pc.min(values).as_py() < low or pc.max(values).as_py() > high:
                raise ScheduleSchemaError(f"column {column!r} has values outside [{low}, {high}]")
    if len(table) and pc.min(pc.utf8_length(table["host"])).as_py() == 0:
        raise ScheduleSchemaError("column 'host' has empty strings")
    delays = table["crawl_delay_s"]
    if len(delays) and not (pc.all(pc.is_finite(delays)).as_py() and pc.min(delays).as_py() > 0):
        raise ScheduleSchemaError("column 'crawl_delay_s' has values that are not finite and > 0")
    if len(table) and not pc.all(pc.greater(table["expires_at"], table["not_before"])).as_py():
        raise ScheduleSchemaError("column 'expires_at' has values not after not_before")


def check_shard_info(info: Mapping) -> dict:
    """One ``_shards.json`` entry, type-checked and with its lane counts adding up."""
    required = {"file": str, "shard": int, "rows": int, "bytes": int, "sha256": str,
                "hosts": int, "lanes": dict}
    for key, kind in required.items():
        if not isinstance(info.get(key), kind) or isinstance(info.get(key), bool):
            raise ValueError(f"shard info field {key!r} must be {kind.__name__}: {dict(info)!r}")
    if sum(info["lanes"].values()) != info["rows"]:
        raise ValueError(f"lane counts do not add up to rows in {info['file']}")
    return {key: info[key] for key in required}


def read_shard_index(out_dir: str) -> list[dict]:
    """Read ``_shards.json`` back: the list of shard infos, sorted by shard id."""
    fs, base = filesystem_for(out_dir)
    path = f"{base.rstrip('/')}/{SHARD_INDEX_NAME}"
    try:
        with fs.open_input_stream(path) as handle:
            data = handle.read()
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"no {SHARD_INDEX_NAME} in {out_dir}; did build_schedule finish?") from exc
    return parse_shard_index(data, source=path)


def parse_shard_index(data: bytes, source: str = SHARD_INDEX_NAME) -> list[dict]:
    """Parse and validate the bytes of a ``_shards.json``: its shard infos."""
    return parse_staged_day(data, source)[1]


def parse_staged_day(data: bytes, source: str = SHARD_INDEX_NAME) -> tuple[int, list[dict]]:
    """``(n_shards, shard infos)`` of a ``_shards.json``; shards without rows have no info."""
    index = json.loads(data)
    if not isinstance(index, dict) or index.get("schema_version") != SHARD_INDEX_VERSION:
        raise ValueError(f"{source}: schema_version must be {SHARD_INDEX_VERSION}")
    n_shards = index.get("n_shards")
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"{source}: n_shards must be a positive int, got {n_shards!r}")
    infos = [check_shard_info(info) for info in index.get("shards", [])]
    if len({i["shard"] for i in infos}) != len(infos):
        raise ValueError(f"{source}: duplicate shard ids")
    if any(not 0 <= i["shard"] < n_shards for i in infos):
        raise ValueError(f"{source}: a shard id is outside 0..{n_shards - 1}")
    return n_shards, infos


def manifest_problem(manifest, where: str) -> str | None:
    """Why a parsed ``_manifest.json`` at ``where`` cannot be used (None: it can): a
    different MAJOR version, or the checks of :func:`jobs.fleet.manifest.parse_manifest`."""
    try:
        parse_manifest(manifest, where)
    except ManifestError as exc:
        return str(exc)
    if not isinstance(manifest.get("totals"), dict):
        return f"manifest at {where} lacks totals"
    return None


def shard_problem(data: bytes, entry: Mapping) -> str | None:
    """Why a listed file's bytes are not the ones its manifest entry names (None: they are)."""
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return f"{entry['key']}: sha256 does not match manifest"
    return None


def schedule_frame(files: Iterable[bytes]) -> pd.DataFrame:
    """The rows of checked shard files (their bytes) as one DataFrame (none: no rows)."""
    tables = [pq.read_table(io.BytesIO(data)) for data in files]
    table = pa.concat_tables(tables) if tables else SCHEDULE_SCHEMA.empty_table()
    return table.replace_schema_metadata(None).to_pandas()
