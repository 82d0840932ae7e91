"""Deterministic per-shard Parquet files (runs inside Spark executors).

Every host belongs to exactly one shard, :func:`jobs.fleet.schedule.shard_of`
(``crc32(utf8(host)) % n_shards``; the fleet computes the same to own its shards), so one
fetcher enforces that host's politeness alone. Spark SQL computes the same value natively:
``pmod(crc32(cast(host as binary)), n_shards)``, so the Spark job assigns shards without a
Python UDF.

``write_shard`` turns one shard's rows into one byte-reproducible Parquet file named
by its content (``shard-00007-<sha256[:12]>.parquet``): rerunning with the same rows
rewrites the same name with the same bytes, and a changed shard gets a new name.

This is the writer side. The columns are the contract ``jobs.schemas.SCHEDULE``; reading a
schedule back (``_shards.json``, the value checks both sides share) is
:mod:`jobs.fleet.schedule`.
"""
from __future__ import annotations

import hashlib
import json
from typing import Callable, Iterable, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from jobs.fleet.schedule import (SCHEDULE_SCHEMA, SHARD_COLUMN, SHARD_INDEX_NAME,
                                 SHARD_INDEX_VERSION, ScheduleSchemaError, check_schedule_values,
                                 check_shard_info, filesystem_for, shard_of)
from jobs.storage import make_dirs

# Sorting on every column of the contract makes the row order (and so the bytes) independent
# of input order: host, then time, then the rest (tests check it names every column once).
SORT_KEYS = [(name, "ascending") for name in
             ("host", "not_before", "url", "lane", "method", "if_none_match",
              "if_modified_since", "priority", "p_changed", "crawl_delay_s", "expires_at")]
ROW_GROUP_ROWS = 65_536
# Fixed writer options: same rows + same pyarrow version => same bytes.
PARQUET_OPTIONS = dict(version="2.6", compression="zstd", compression_level=3,
                       use_dictionary=True, write_statistics=True, data_page_size=1 << 20,
                       write_page_index=False, store_schema=True)
# Output schema for applyInPandas(shard_writer(...), SHARD_INFO_DDL).
SHARD_INFO_DDL = ("file string, shard int, rows long, bytes long, sha256 string, "
                  "hosts long, lanes_json string")


def to_schedule_table(df: pd.DataFrame) -> pa.Table:
    """Validate ``df`` against SCHEDULE_SCHEMA and return it as a sorted Arrow table.

    Naive ``not_before`` timestamps are taken as UTC (run Spark with
    ``spark.sql.session.timeZone=UTC``); aware ones are converted. Extra columns are an
    error, except the ``shard`` grouping column.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected a pandas.DataFrame, got {type(df).__name__}")
    expected = set(SCHEDULE_SCHEMA.names)
    missing = [n for n in SCHEDULE_SCHEMA.names if n not in df.columns]
    if missing:
        raise ScheduleSchemaError(f"missing column(s) {missing}; expected {SCHEDULE_SCHEMA.names}")
    extra = sorted(str(c) for c in df.columns if c not in expected and c != SHARD_COLUMN)
    if extra:
        raise ScheduleSchemaError(f"unexpected column(s) {extra}")
    arrays = []
    for field in SCHEDULE_SCHEMA:
        try:
            array = pa.Array.from_pandas(df[field.name], type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise ScheduleSchemaError(f"column {field.name!r} is not {field.type}: {exc}") from exc
        if not field.nullable and array.null_count:
            raise ScheduleSchemaError(f"column {field.name!r} has {array.null_count} null(s)")
        arrays.append(array)
    table = pa.Table.from_arrays(arrays, schema=SCHEDULE_SCHEMA)
    check_schedule_values(table)
    return table.sort_by(SORT_KEYS)


def parquet_bytes(table: pa.Table) -> bytes:
    """Serialize with the fixed options; no wall-clock or pandas metadata is stored."""
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(None), sink,
                   row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def write_shard(df: pd.DataFrame, out_dir: str, shard_id: int, *,
                n_shards: int | None = None) -> dict:
    """Write one shard's rows as one deterministic, content-addressed Parquet file.

    With ``n_shards`` given, every host must hash to ``shard_id`` (guards against a
    mis-grouped Spark job splitting a host across fetchers). Returns the file's info:
    ``{file, shard, rows, bytes, sha256, hosts, lanes: {lane: rows}}``.
    """
    if isinstance(shard_id, bool) or not isinstance(shard_id, int) or shard_id < 0:
        raise ValueError(f"shard_id must be a non-negative int, got {shard_id!r}")
    table = to_schedule_table(df)
    if n_shards is not None:
        if shard_id >= n_shards:
            raise ValueError(f"shard_id {shard_id} >= n_shards {n_shards}")
        shards = shard_of(table["host"].to_pandas(), n_shards)
        stray = table["host"].to_pandas()[shards != shard_id].unique()
        if len(stray):
            raise ValueError(f"{len(stray)} host(s) do not belong to shard {shard_id}, "
                             f"e.g. {list(stray[:3])}")
    data = parquet_bytes(table)
    sha256 = hashlib.sha256(data).hexdigest()
    name = f"shard-{shard_id:05d}-{sha256[:12]}.parquet"
    fs, base = filesystem_for(out_dir)
    make_dirs(fs, base)
    path = f"{base.rstrip('/')}/{name}"
    if isinstance(fs, pafs.LocalFileSystem):
        # Write-then-rename so a crashed task never leaves a truncated file under the final name.
        tmp = f"{base.rstrip('/')}/.tmp-{name}"
        with fs.open_output_stream(tmp) as out:
            out.write(data)
        fs.move(tmp, path)
    else:
        with fs.open_output_stream(path) as out:  # a single S3 PUT: atomic
            out.write(data)
    lanes = pc.value_counts(table["lane"]).to_pylist()
    return {
        "file": name, "shard": shard_id, "rows": table.num_rows, "bytes": len(data),
        "sha256": sha256, "hosts": pc.count_distinct(table["host"]).as_py(),
        "lanes": {item["values"]: item["counts"] for item in sorted(lanes, key=lambda i: i["values"])},
    }


def shard_writer(out_dir: str, n_shards: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Function for ``df.groupBy("shard").applyInPandas(fn, SHARD_INFO_DDL)``.

    Each call writes its group's file from the executor and returns one small info row.
    """
    def write_group(pdf: pd.DataFrame) -> pd.DataFrame:
        shard_ids = pdf[SHARD_COLUMN].unique()
        if len(shard_ids) != 1:
            raise ValueError(f"a group must hold one shard id, got {list(shard_ids[:5])}")
        info = write_shard(pdf.drop(columns=[SHARD_COLUMN]), out_dir, int(shard_ids[0]),
                           n_shards=n_shards)
        row = {k: v for k, v in info.items() if k != "lanes"}
        row["lanes_json"] = json.dumps(info["lanes"], sort_keys=True)
        return pd.DataFrame([row])
    return write_group


def shard_info_from_record(record: Mapping) -> dict:
    """Turn a collected SHARD_INFO_DDL row (dict or Row.asDict()) back into a shard info."""
    info = {k: record[k] for k in ("file", "shard", "rows", "bytes", "sha256", "hosts")}
    info["lanes"] = json.loads(record["lanes_json"])
    return info


def write_shard_index(out_dir: str, infos: Iterable[Mapping], *, n_shards: int) -> str:
    """Write ``_shards.json`` (sorted by shard) next to the shard files; returns its path.

    The driver calls this after the Spark job, from the collected info rows. Identical
    duplicates (speculative task attempts) collapse; conflicting ones are an error.
    ``n_shards`` is the day's shard count: shards without rows have no file and no info,
    and the published manifest lists them as empty.
    """
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"n_shards must be a positive int, got {n_shards!r}")
    by_shard: dict[int, dict] = {}
    for info in map(check_shard_info, infos):
        previous = by_shard.setdefault(info["shard"], info)
        if previous != info:
            raise ValueError(f"two different files for shard {info['shard']}: "
                             f"{previous['file']} and {info['file']}")
    if any(shard >= n_shards for shard in by_shard):
        raise ValueError(f"shard ids {sorted(by_shard)[-1]} >= n_shards {n_shards}")
    index = {"schema_version": SHARD_INDEX_VERSION, "n_shards": n_shards,
             "shards": [by_shard[s] for s in sorted(by_shard)]}
    fs, base = filesystem_for(out_dir)
    make_dirs(fs, base)
    path = f"{base.rstrip('/')}/{SHARD_INDEX_NAME}"
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(index, sort_keys=True, indent=2).encode() + b"\n")
    return path
