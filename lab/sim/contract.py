"""Arrow schemas of the input contracts (from ``jobs.schemas``) and a deterministic partitioned writer."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs import schemas

# The inputs the simulator writes are the planner's input contracts (jobs.schemas), so the
# two cannot drift: same columns, order and types; every field nullable, as written so far.
FETCH_LOG_SCHEMA = schemas.FETCH_LOG.arrow_schema(all_nullable=True)
IMPORTANCE_SCHEMA = schemas.IMPORTANCE.arrow_schema(all_nullable=True)
HOST_POLICY_SCHEMA = schemas.HOST_POLICY.arrow_schema(all_nullable=True)
SIGNALS_SCHEMA = schemas.SIGNALS.arrow_schema(all_nullable=True)
FRONTIER_SCHEMA = schemas.FRONTIER.arrow_schema(all_nullable=True)

# Fixed writer settings so the same table always gives the same bytes.
_WRITE_OPTS = dict(compression="zstd", compression_level=3, use_dictionary=True,
                   write_statistics=True, store_schema=True)


def partition_dir(root: str | Path, dataset: str, day: dt.date | None = None) -> Path:
    """``root/dataset`` or ``root/dataset/dt=YYYY-MM-DD``."""
    path = Path(root) / dataset
    return path / f"dt={day.isoformat()}" if day is not None else path


def write_table(table: pa.Table, path: str | Path, schema: pa.Schema) -> None:
    """Write one Parquet file, casting to ``schema`` (raises on a mismatch)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.select(schema.names).cast(schema), path, **_WRITE_OPTS)


class PartWriter:
    """Appends row groups to ``part-NNNNN.parquet`` files in one directory.

    A new part file starts after ``rows_per_file`` rows so files stay a
    manageable size at scale. Tables are cast to ``schema`` on the way in.
    """

    def __init__(self, directory: str | Path, schema: pa.Schema, rows_per_file: int = 5_000_000):
        if rows_per_file < 1:
            raise ValueError("rows_per_file must be >= 1")
        self.directory = Path(directory)
        self.schema = schema
        self.rows_per_file = rows_per_file
        self._writer: pq.ParquetWriter | None = None
        self._part = 0
        self._rows_in_part = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        """Append ``table`` as one row group (skipped when empty)."""
        if table.num_rows == 0:
            return
        table = table.select(self.schema.names).cast(self.schema)
        if self._writer is not None and self._rows_in_part >= self.rows_per_file:
            self._writer.close()
            self._writer = None
            self._part += 1
        if self._writer is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"part-{self._part:05d}.parquet"
            self._writer = pq.ParquetWriter(path, self.schema, **_WRITE_OPTS)
            self._rows_in_part = 0
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._rows_in_part += table.num_rows
        self.rows += table.num_rows

    def close(self) -> None:
        """Finish the open file; an untouched writer leaves an empty part so the partition exists."""
        if self._writer is None and self.rows == 0:
            self.directory.mkdir(parents=True, exist_ok=True)
            pq.write_table(self.schema.empty_table(), self.directory / "part-00000.parquet",
                           **_WRITE_OPTS)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
