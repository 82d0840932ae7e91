import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import schemas


def test_contract_doc_matches_code():
    with open("docs/contract.md") as fh:
        doc = fh.read()
    assert schemas.markdown().strip() in doc


def test_kinds_accept_any_width_and_naive_timestamps(tmp_path):
    table = pa.table({
        "url": pa.array(["https://a/"], pa.large_string()),
        "fetched_at": pa.array([0], pa.timestamp("ms")),
        "status": pa.array([200], pa.int16()), "conditional": [True],
        "etag": pa.array([None], pa.null()), "last_modified": pa.array([None], pa.string()),
        "content_hash": ["x"], "bytes": pa.array([1], pa.int32()), "extra": [1]})
    path = tmp_path / "a.parquet"
    pq.write_table(table, path)
    schemas.check_files(schemas.FETCH_LOG, [str(path)])


@pytest.mark.parametrize("drop, retype, column", [
    ("status", None, "status"),
    (None, ("bytes", pa.array(["1"])), "bytes"),
    (None, ("fetched_at", pa.array(["2026-01-01"])), "fetched_at"),
])
def test_named_error_for_missing_or_mistyped_column(tmp_path, drop, retype, column):
    cols = {"url": ["https://a/"], "fetched_at": pa.array([0], pa.timestamp("us", "UTC")),
            "status": pa.array([200], pa.int32()), "conditional": [True], "etag": ["\"e\""],
            "last_modified": [None], "content_hash": ["x"], "bytes": [1]}
    if drop:
        cols.pop(drop)
    if retype:
        cols[retype[0]] = retype[1]
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(cols), path)
    with pytest.raises(schemas.SchemaError) as err:
        schemas.check_files(schemas.FETCH_LOG, [str(path)])
    assert err.value.column == column and err.value.file == str(path)
    assert str(path) in str(err.value) and column in str(err.value)


def test_unreadable_file_is_named(tmp_path):
    path = tmp_path / "junk.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(schemas.SchemaError, match="unreadable") as err:
        schemas.check_files(schemas.FETCH_LOG, [str(path)])
    assert err.value.file == str(path)
