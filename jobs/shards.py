"""Shard assignment and deterministic per-shard Parquet files (runs inside Spark executors).

Every host belongs to exactly one shard, ``crc32(utf8(host)) % n_shards``, so one
fetcher enforces that host's politeness alone. CRC-32 is used (not Python's salted
``hash()``) because it is stable across processes and machines and Spark SQL computes
the same value natively: ``pmod(crc32(cast(host as binary)), n_shards)``, so the
Spark job can assign shards without a Python UDF.

``write_shard`` turns one shard's rows into one byte-reproducible Parquet file named
by its content (``shard-00007-<sha256[:12]>.parquet``): rerunning with the same rows
rewrites the same name with the same bytes, and a changed shard gets a new name.
"""
from __future__ import annotations

import hashlib
import json
import zlib
from typing import Callable, Iterable, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

SCHEDULE_SCHEMA_VERSION = 1
SCHEDULE_SCHEMA = pa.schema([
    pa.field("host", pa.string(), nullable=False),
    pa.field("url", pa.string(), nullable=False),
    pa.field("not_before", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("lane", pa.string(), nullable=False),
    pa.field("method", pa.string(), nullable=False),
    pa.field("if_none_match", pa.string(), nullable=True),
    pa.field("if_modified_since", pa.string(), nullable=True),
    pa.field("priority", pa.float64(), nullable=False),
    pa.field("p_changed", pa.float64(), nullable=False),
])
LANES = ("refresh", "fast", "discovery", "audit")  # audit: measurement-only full fetch
METHODS = ("conditional", "full")
SHARD_COLUMN = "shard"  # grouping column the Spark job adds; dropped before writing
SHARD_INDEX_NAME = "_shards.json"
# Sorting on every column makes the row order (and so the bytes) independent of input order.
SORT_KEYS = [(name, "ascending") for name in
             ("host", "not_before", "url", "lane", "method", "if_none_match",
              "if_modified_since", "priority", "p_changed")]
ROW_GROUP_ROWS = 65_536
# Fixed writer options: same rows + same pyarrow version => same bytes.
PARQUET_OPTIONS = dict(version="2.6", compression="zstd", compression_level=3,
                       use_dictionary=True, write_statistics=True, data_page_size=1 << 20,
                       write_page_index=False, store_schema=True)
# Output schema for applyInPandas(shard_writer(...), SHARD_INFO_DDL).
SHARD_INFO_DDL = ("file string, shard int, rows long, bytes long, sha256 string, "
                  "hosts long, lanes_json string")


class ScheduleSchemaError(ValueError):
    """Schedule rows do not match SCHEDULE_SCHEMA; the message names the column."""


def shard_of(host: pd.Series | str, n_shards: int) -> pd.Series | int:
    """Shard id of a host (or a Series of hosts): ``crc32(utf8(host)) % n_shards``."""
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
    _check_values(table)
    return table.sort_by(SORT_KEYS)


def _check_values(table: pa.Table) -> None:
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


def parquet_bytes(table: pa.Table) -> bytes:
    """Serialize with the fixed options; no wall-clock or pandas metadata is stored."""
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(None), sink,
                   row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def filesystem_for(out_dir: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow filesystem + path for a local dir or ``s3://``/``s3a://`` URI."""
    if not isinstance(out_dir, str) or not out_dir:
        raise ValueError(f"out_dir must be a non-empty string, got {out_dir!r}")
    if out_dir.startswith("s3a://"):  # Hadoop's scheme; pyarrow only knows s3://
        out_dir = "s3://" + out_dir[len("s3a://"):]
    if "://" in out_dir:
        return pafs.FileSystem.from_uri(out_dir)
    return pafs.LocalFileSystem(), out_dir


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
    fs.create_dir(base, recursive=True)
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


def _check_info(info: Mapping) -> dict:
    required = {"file": str, "shard": int, "rows": int, "bytes": int, "sha256": str,
                "hosts": int, "lanes": dict}
    for key, kind in required.items():
        if not isinstance(info.get(key), kind) or isinstance(info.get(key), bool):
            raise ValueError(f"shard info field {key!r} must be {kind.__name__}: {dict(info)!r}")
    if sum(info["lanes"].values()) != info["rows"]:
        raise ValueError(f"lane counts do not add up to rows in {info['file']}")
    return {key: info[key] for key in required}


def write_shard_index(out_dir: str, infos: Iterable[Mapping]) -> str:
    """Write ``_shards.json`` (sorted by shard) next to the shard files; returns its path.

    The driver calls this after the Spark job, from the collected info rows. Identical
    duplicates (speculative task attempts) collapse; conflicting ones are an error.
    """
    by_shard: dict[int, dict] = {}
    for info in map(_check_info, infos):
        previous = by_shard.setdefault(info["shard"], info)
        if previous != info:
            raise ValueError(f"two different files for shard {info['shard']}: "
                             f"{previous['file']} and {info['file']}")
    index = {"schema_version": SCHEDULE_SCHEMA_VERSION,
             "shards": [by_shard[s] for s in sorted(by_shard)]}
    fs, base = filesystem_for(out_dir)
    fs.create_dir(base, recursive=True)
    path = f"{base.rstrip('/')}/{SHARD_INDEX_NAME}"
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(index, sort_keys=True, indent=2).encode() + b"\n")
    return path


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
    infos = [_check_info(info) for info in index.get("shards", [])]
    if len({i["shard"] for i in infos}) != len(infos):
        raise ValueError(f"{source}: duplicate shard ids")
    return infos
