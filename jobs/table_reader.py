"""Reading a few rows or a stream of batches from a committed table's Parquet files, with
pyarrow alone (no Spark): what ``explain``, ``report`` and ``stats`` share.

Each file is read on its own (the files of one table may differ in integer widths), through
the file system its URI names (local path or ``s3://``).
"""
from __future__ import annotations

import math

import pandas as pd
import pyarrow.parquet as pq

from jobs.fleet.schedule import filesystem_for

BATCH_ROWS = 200_000  # rows in memory at once


def rows_where(files: list[str], column: str, value: str, columns=None) -> pd.DataFrame:
    """Rows of ``files`` whose ``column`` equals ``value`` (each file on its own: the files
    of one table may differ in integer widths), only ``columns`` that exist."""
    frames = []
    for f in files:
        fs, path = filesystem_for(f)
        names = pq.read_schema(path, filesystem=fs).names
        cols = [c for c in (columns or names) if c in names]
        table = pq.read_table(path, filesystem=fs, columns=cols, filters=[(column, "=", value)])
        if table.num_rows:
            frames.append(table.replace_schema_metadata(None).to_pandas())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def plain(value):
    """A JSON-ready scalar (timestamps as ISO strings, NaN/NA as None)."""
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):  # a timestamp without a zone is UTC (the contract)
        return (value.tz_convert("UTC") if value.tzinfo else value.tz_localize("UTC")).isoformat()
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def batches(files: list[str], columns):
    """Record batches of ``columns`` (None: all) from ``files``, file by file, as pandas
    frames."""
    for f in files:
        fs, path = filesystem_for(f)
        with fs.open_input_file(path) as fh:
            pf = pq.ParquetFile(fh)
            cols = None if columns is None else list(columns)
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols):
                yield batch.to_pandas()
