"""Committed partitions (jobs.partitions): readers see the last commit or a named error."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import partitions, storage
from tests.conftest import REPO


def _file(directory, name, n):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    pq.write_table(pa.table({"x": list(range(n))}), path)
    return path


def test_reader_sees_only_the_committed_files_and_gc_removes_the_rest(tmp_path):
    part = str(tmp_path / "t" / "dt=2026-01-01")
    old = _file(part, "part-00000-old.parquet", 3)
    partitions.commit_files(part, "t", [old])
    assert partitions.committed_files(part, "t") == [old]
    # A second writer's files, and a killed attempt's leftovers, are invisible until committed.
    new = _file(part, "part-00000-new.parquet", 5)
    junk = _file(part, "part-00001-killed.parquet", 7)
    assert partitions.committed_files(part, "t") == [old]
    marker = partitions.commit_files(part, "t", [new], extra={"cut": {"level": 1.5}})
    assert partitions.committed_files(part, "t") == [new]
    assert marker["rows"] == 5 and partitions.committed_extra(part, "t") == {"cut": {"level": 1.5}}
    assert not os.path.exists(old) and not os.path.exists(junk)
    assert [f for f in os.listdir(part) if ".tmp-" in f] == []  # the marker was renamed in


def test_missing_and_uncommitted_partitions_are_named_errors(tmp_path):
    part = str(tmp_path / "state" / "dt=2026-01-01")
    with pytest.raises(partitions.MissingPartitionError, match="is missing") as err:
        partitions.committed_files(part, "state")
    assert err.value.table == "state" and err.value.path == part
    _file(part, "part-00000-a.parquet", 2)  # files without a marker: a writer died
    with pytest.raises(partitions.MissingPartitionError, match="never committed"):
        partitions.committed_files(part, "state")


def test_a_committed_file_that_vanished_is_an_error_not_fewer_rows(tmp_path):
    part = str(tmp_path / "state" / "dt=2026-01-01")
    a, b = _file(part, "part-00000-a.parquet", 2), _file(part, "part-00001-a.parquet", 2)
    partitions.commit_files(part, "state", [a, b])
    os.remove(b)
    with pytest.raises(partitions.MissingPartitionError, match="is missing"):
        partitions.committed_files(part, "state")


def test_files_of_two_spark_jobs_in_one_write_are_refused(tmp_path):
    part = str(tmp_path / "t" / "dt=2026-01-01")
    files = [_file(part, f"part-00000-{u}-c000.snappy.parquet", 1) for u in (
        "0f7a4c43-5f1c-4d8a-9d36-2f2b1b6c1a01", "9a1e5a0c-0c8e-4a57-b0a4-3a8b5a1e2c02")]
    with pytest.raises(partitions.ConcurrentWriteError):
        partitions.commit_files(part, "t", files)
    assert not partitions.is_committed(part)


def test_adopting_a_legacy_partition_needs_spark_success(tmp_path):
    part = str(tmp_path / "state" / "dt=2026-01-01")
    _file(part, "part-00000-a.parquet", 4)
    with pytest.raises(partitions.MissingPartitionError, match="_SUCCESS"):
        partitions.adopt_legacy(part, "state")
    open(os.path.join(part, "_SUCCESS"), "w").close()
    out = subprocess.run([sys.executable, "-m", "jobs.partitions", part], cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert "1 files, 4 rows" in out.stdout
    assert json.loads(open(partitions.marker_path(part)).read())["rows"] == 4


def test_json_writes_leave_no_partial_file(tmp_path):
    target = str(tmp_path / "_runs" / "dt=2026-01-01" / "allocate.json")
    storage.write_json(target, {"a": 1})
    storage.write_json(target, {"a": 2})
    assert storage.read_json(target) == {"a": 2}
    assert os.listdir(os.path.dirname(target)) == ["allocate.json"]
