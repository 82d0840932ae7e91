"""Committed partitions: a table's ``dt=D`` exists for readers only once its marker does.

Spark's ``mode("overwrite")`` deletes the old partition before the new one is complete, so a
killed writer would leave nothing (or half a day) where yesterday's state had been, and the
next stage would read that as "empty". Here a partition is committed in three steps:

1. the writer appends its files into ``dt=D/`` (Spark names them with a per-job UUID, so they
   never overwrite the files of an earlier commit);
2. it writes ``dt=D/_COMMITTED.json`` naming exactly its own files, with their row counts,
   in one atomic step (a rename on a local or HDFS path, a single PUT on an object store,
   where a PUT is atomic and there is no rename);
3. it deletes every other data file in ``dt=D/`` (the previous commit's and any killed
   attempt's).

Readers take the file list from the marker and never list the directory, so a writer killed
at any point leaves the previous commit (or no commit) readable, and the next attempt
recovers. A missing marker is :class:`MissingPartitionError`, never an empty table.
See docs/contract.md, "Committed partitions".
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import sys
import time
import uuid
from typing import Optional

from jobs import storage
from jobs.errors import (AlreadyCommitted, ConcurrentWriteError,  # noqa: F401  (home:
                         MissingPartitionError)  # jobs.errors)

MARKER = "_COMMITTED.json"
FORMAT = 1
# Spark's output names: part-<task>-<job uuid>[-c<n>][.<codec>].parquet
_SPARK_JOB = re.compile(r"part-\d+-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


# Fault injection for the kill and concurrency tests (tests/stages/test_state_safety.py,
# test_stage_safety.py), inert unless set: RECRAWL_TEST_PAUSE_AT="<table>:<point>" makes the
# writer of <table> stop at <point>, after writing a JSON note to the file
# RECRAWL_TEST_PAUSE_NOTE, until it is killed or the note is removed (then it goes on). Points:
# "files_written" (the new data files are in dt=D/, the marker is still the old one) and
# "marker_written" (the new marker is in place, the old commit's files not yet deleted).
PAUSE_ENV, PAUSE_NOTE_ENV = "RECRAWL_TEST_PAUSE_AT", "RECRAWL_TEST_PAUSE_NOTE"
PAUSE_POINTS = ("files_written", "marker_written")


def _pause_point(point: str, table: str, path: str, files: list[str]) -> None:
    if os.environ.get(PAUSE_ENV) != f"{table}:{point}":
        return
    note = os.environ[PAUSE_NOTE_ENV]
    with open(note + ".tmp", "w") as f:
        json.dump({"point": point, "table": table, "path": path, "pid": os.getpid(),
                   "files": sorted(posixpath.basename(x) for x in files)}, f)
    os.replace(note + ".tmp", note)
    while os.path.exists(note):  # until the test kills the process or lets it go on
        time.sleep(0.05)


# Scoped commits (``recrawl import-warc|import-cdx``, jobs/import_archive.py) into a partition
# recrawl does not own (``fetch_logs/dt=D``, the fleet's): one source file's parts
# ``part-imp-<source>-<attempt>-NNNNN.parquet`` are data only once ``_IMPORT-<source>.json``
# in the same directory names them; readers take a day's files from :func:`visible_files`.
IMPORT_PART_PREFIX, IMPORT_MARKER_PREFIX = "part-imp-", "_IMPORT-"


def import_marker_path(path: str, source: str) -> str:
    return f"{path.rstrip('/')}/{IMPORT_MARKER_PREFIX}{source}.json"


def visible_files(path: str) -> list[str]:
    """The data files readers take from a partition others write into (``fetch_logs/dt=D``):
    every file but the import parts their source's marker does not name (a killed, running
    or superseded import's), sorted."""
    named: dict[str, set[str]] = {}
    out = []
    for f in storage.list_parquet_files(path):
        name = posixpath.basename(f)
        if name.startswith(IMPORT_PART_PREFIX):
            source = name[len(IMPORT_PART_PREFIX):].split("-", 1)[0]
            if source not in named:
                marker = storage.read_json(import_marker_path(path, source))
                named[source] = {e["name"] for e in marker["files"]} if marker else set()
            if name not in named[source]:
                continue
        out.append(f)
    return out


def marker_path(path: str) -> str:
    return f"{path.rstrip('/')}/{MARKER}"


def read_marker(path: str) -> Optional[dict]:
    return storage.read_json(marker_path(path))


def is_committed(path: str) -> bool:
    return storage.exists(marker_path(path))


def committed_files(path: str, table: str) -> list[str]:
    """The data files of the partition's last commit (full URIs, sorted).

    Raises
    ------
    MissingPartitionError
        No marker (never written, or the writer died before committing), or a file the
        marker names has gone (someone deleted it by hand or a lifecycle rule expired it).
    """
    marker = read_marker(path)
    if marker is None:
        why = ("exists but was never committed (a writer died half way?)"
               if storage.exists(path) else "is missing")
        raise MissingPartitionError(table, path, f"partition {why}; run the stage that "
                                                 f"writes it for this date first")
    base = path.rstrip("/")
    files = [f"{base}/{entry['name']}" for entry in marker["files"]]
    present = set(storage.list_parquet_files(path))
    gone = [f for f in files if f not in present]
    if gone:
        raise MissingPartitionError(table, path, f"committed file {gone[0]} is missing "
                                                 f"({len(gone)} of {len(files)})")
    return files


def committed_extra(path: str, table: str) -> dict:
    """The small JSON the writer committed beside its files (e.g. allocate's budget cut)."""
    committed_files(path, table)
    return read_marker(path).get("extra", {})


def write_committed(df, path: str, table: str, extra: Optional[dict] = None) -> dict:
    """Write a Spark DataFrame as the new commit of partition ``path``; return the marker.

    ``extra`` is committed in the same marker, so it can never disagree with the files.
    """
    return commit_files(path, table, append_files(df, path), extra)


def append_files(df, path: str) -> list[str]:
    """Write ``df``'s files into ``path`` beside any existing ones; uncommitted until
    :func:`commit_files`. Returns the new files."""
    storage.delete_dir(f"{path.rstrip('/')}/_temporary")  # a killed job's task outputs
    before = set(storage.list_parquet_files(path))
    df.write.mode("append").parquet(path)
    return [f for f in storage.list_parquet_files(path) if f not in before]


def commit_files(path: str, table: str, files: list[str], extra: Optional[dict] = None) -> dict:
    """Commit ``files`` (already written under ``path``) and delete every other data file."""
    jobs = {m.group(1) for f in files if (m := _SPARK_JOB.match(posixpath.basename(f)))}
    if len(jobs) > 1:
        raise ConcurrentWriteError(f"[{table}] {path}: files of {len(jobs)} Spark jobs "
                                   f"appeared during one write; another writer is running")
    _pause_point("files_written", table, path, files)
    entries = []
    for f in sorted(files):
        try:
            meta = storage.parquet_metadata(f)
        except FileNotFoundError:  # another writer's commit of the partition deleted it
            raise ConcurrentWriteError(f"[{table}] {path}: {posixpath.basename(f)} vanished "
                                       f"before the commit; another writer committed this "
                                       f"partition meanwhile") from None
        entries.append({"name": f[len(path.rstrip('/')) + 1:], "rows": meta.num_rows})
    marker = {"format": FORMAT, "table": table, "attempt": uuid.uuid4().hex,
              "rows": sum(e["rows"] for e in entries), "files": entries, "extra": extra or {}}
    storage.write_json(marker_path(path), marker, atomic=True)
    _pause_point("marker_written", table, path, files)
    keep = set(files)
    for f in storage.list_parquet_files(path):
        if f not in keep:
            storage.delete_file(f)
    return marker


def adopt_legacy(path: str, table: str) -> dict:
    """Commit a partition written before markers existed, if Spark's _SUCCESS says it is whole."""
    if is_committed(path):
        raise AlreadyCommitted(f"{path} is already committed: nothing to adopt")
    if not storage.exists(f"{path.rstrip('/')}/_SUCCESS"):
        raise MissingPartitionError(table, path, "no _SUCCESS: not a complete Spark output")
    return commit_files(path, table, storage.list_parquet_files(path))


def main(argv=None) -> int:
    from jobs.cli import Parser

    parser = Parser(
        description="Commit partitions written before commit markers existed (needs _SUCCESS).")
    parser.add_argument("paths", nargs="+", help="partition directories, e.g. var/data/state/dt=D")
    args = parser.parse_args(argv)
    for p in args.paths:
        name = posixpath.basename(posixpath.dirname(p.rstrip("/")))
        marker = adopt_legacy(p, name)
        print(f"committed {p}: {len(marker['files'])} files, {marker['rows']} rows")
    return 0


if __name__ == "__main__":
    from jobs.cli import guarded

    sys.exit(guarded(main))
