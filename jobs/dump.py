"""Export a filtered slice of one committed table of run date D as CSV or Parquet.

``--table state|plan`` reads ``state/dt=D`` or ``plan/dt=D`` (committed files only);
``--table schedule`` the staged schedule the run for D built (``schedules/dt=D+1``, the
files its ``_shards.json`` names). ``--host H`` is pushed down to the Parquet reader;
``--where`` is a SQL condition on the table's columns (e.g. ``"lambda_hat > 1 AND
lane = 'fast'"``), run by DuckDB over the rows streamed from those files with file system
access disabled and the configuration locked, so it can read nothing but the table. No Spark.

Run: ``recrawl dump --date D --table state [--host H] [--where SQL] [--format csv|parquet]
[--out FILE]`` (CSV to stdout without ``--out``).
"""
from __future__ import annotations

import sys
from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from jobs import partitions, schemas
from jobs.cli import Parser, add_date_arg, guarded, output_file
from jobs.config import Config, add_config_args, config_from_args
from jobs.errors import MissingPartitionError, UsageError
from jobs.fleet.schedule import SCHEDULE_SCHEMA, filesystem_for, read_shard_index
from jobs.paths import schedule_date

TABLES = ("state", "plan", "schedule")
FORMATS = ("csv", "parquet")
BATCH_ROWS = 65_536


def table_files(cfg: Config, table: str, run_date: str) -> tuple[list[str], pa.Schema]:
    """The files of ``table`` for run date D and the schema they are read as."""
    if table == "schedule":
        where = cfg.paths.table("schedules", schedule_date(run_date))
        try:
            infos = read_shard_index(where)
        except FileNotFoundError as exc:
            raise MissingPartitionError("schedules", where, str(exc)) from None
        return [f"{where.rstrip('/')}/{i['file']}" for i in infos], SCHEDULE_SCHEMA
    contract = {"state": schemas.STATE, "plan": schemas.PLAN}[table]
    files = partitions.committed_files(cfg.paths.table(table, run_date), table)
    return files, contract.arrow_schema(all_nullable=True)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns and types (files of one table may differ in
    integer widths; an optional column an older file lacks is null)."""
    names = batch.schema.names
    return pa.record_batch([batch.column(names.index(f.name)).cast(f.type) if f.name in names
                            else pa.nulls(batch.num_rows, f.type) for f in schema],
                           schema=schema)


def rows(files: list[str], schema: pa.Schema, host: Optional[str]) -> pa.RecordBatchReader:
    """The rows of ``files`` (only ``host``'s when given), streamed batch by batch."""
    def batches() -> Iterator[pa.RecordBatch]:
        for f in files:
            fs, path = filesystem_for(f)
            table = pq.read_table(path, filesystem=fs,
                                  filters=[("host", "=", host)] if host else None)
            for batch in table.to_batches(max_chunksize=BATCH_ROWS):
                yield _conform(batch, schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def filtered(reader: pa.RecordBatchReader, where: Optional[str]) -> pa.RecordBatchReader:
    """``reader``'s rows where the SQL condition ``where`` holds (DuckDB, sandboxed)."""
    if not where:
        return reader
    import duckdb

    con = duckdb.connect(config={"enable_external_access": False, "lock_configuration": True})
    con.register("t", reader)
    try:
        return con.sql(f"SELECT * FROM t WHERE ({where})").fetch_arrow_reader(BATCH_ROWS)
    except duckdb.Error as exc:
        raise UsageError(f"--where {where!r}: {str(exc).splitlines()[0]}") from None


def dump(cfg: Config, run_date: str, table: str, out, *, fmt: str = "csv",
         host: Optional[str] = None, where: Optional[str] = None) -> int:
    """Write the slice to ``out`` (a path or a binary file object); rows written."""
    if table not in TABLES or fmt not in FORMATS:
        raise UsageError(f"--table must be one of {TABLES}, --format one of {FORMATS}")
    files, schema = table_files(cfg, table, run_date)
    reader = filtered(rows(files, schema, host), where)
    n = 0
    if fmt == "parquet":
        with pq.ParquetWriter(out, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
                n += batch.num_rows
        return n
    from pyarrow import csv

    with csv.CSVWriter(out, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            n += batch.num_rows
    return n


def main(argv=None) -> int:
    parser = Parser(description="Export a filtered slice of state/, plan/ or the staged "
                                "schedule of run date D. No Spark.",
                    epilog="A missing or uncommitted partition is a named error (exit 2), as "
                           "is a --where DuckDB cannot run. --where sees only the table.")
    add_date_arg(parser)
    parser.add_argument("--table", required=True, choices=TABLES)
    parser.add_argument("--host", default=None, help="only this host's rows")
    parser.add_argument("--where", default=None, metavar="SQL",
                        help="a SQL condition on the table's columns (DuckDB)")
    parser.add_argument("--format", default="csv", choices=FORMATS)
    parser.add_argument("--out", default=None, help="output file (CSV: default stdout)")
    add_config_args(parser)
    args = parser.parse_args(argv)
    if args.format == "parquet" and not args.out:
        parser.error("--format parquet needs --out FILE")
    cfg = config_from_args(args)
    if not args.out:
        dump(cfg, args.date, args.table, sys.stdout.buffer, fmt=args.format, host=args.host,
             where=args.where)
        return 0
    with output_file(args.out) as fh:  # whole or not at all
        n = dump(cfg, args.date, args.table, fh, fmt=args.format, host=args.host,
                 where=args.where)
    print(f"{n} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
