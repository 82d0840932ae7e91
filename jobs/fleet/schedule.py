"""Reading and checking published schedules, as a fetcher does (pyarrow only).

The schedule's columns come from its one contract, :data:`jobs.schemas.SCHEDULE`;
``SCHEDULE_SCHEMA`` is that contract as an Arrow schema (every shard file has exactly it).
The writer side (shard assignment, deterministic files, ``_shards.json``) is
:mod:`jobs.shards`; the manifest-driven reader of a published day over S3 is
``jobs.verify.read_schedule``, built from the checks here.

- ``parse_shard_index`` / ``read_shard_index``: the staging index ``_shards.json``.
- ``check_schedule_values``: the values a fetcher can act on (lanes, methods, numbers, hosts).
- ``manifest_problem`` / ``shard_problem`` / ``schedule_frame``: a published day's
  ``_manifest.json``, one listed file's bytes, and the rows of the files read.
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Iterable, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from jobs.schemas import SCHEDULE

SCHEDULE_SCHEMA_VERSION = 1  # of the shard files, _shards.json and _manifest.json
SCHEDULE_SCHEMA = SCHEDULE.arrow_schema()
LANES = ("refresh", "fast", "discovery", "audit")  # audit: measurement-only full fetch
METHODS = ("conditional", "full")
SHARD_INDEX_NAME = "_shards.json"


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
    """Parse and validate the bytes of a ``_shards.json``."""
    index = json.loads(data)
    if not isinstance(index, dict) or index.get("schema_version") != SCHEDULE_SCHEMA_VERSION:
        raise ValueError(f"{source}: schema_version must be {SCHEDULE_SCHEMA_VERSION}")
    infos = [check_shard_info(info) for info in index.get("shards", [])]
    if len({i["shard"] for i in infos}) != len(infos):
        raise ValueError(f"{source}: duplicate shard ids")
    return infos


def manifest_problem(manifest, where: str) -> str | None:
    """Why a parsed ``_manifest.json`` at ``where`` cannot be used (None: it can)."""
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEDULE_SCHEMA_VERSION:
        return (f"manifest at {where} has schema_version "
                f"{manifest.get('schema_version') if isinstance(manifest, dict) else None!r}, "
                f"expected {SCHEDULE_SCHEMA_VERSION}")
    if not isinstance(manifest.get("files"), list) or not isinstance(manifest.get("totals"), dict):
        return f"manifest at {where} lacks files/totals"
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
