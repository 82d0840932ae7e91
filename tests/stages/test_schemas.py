import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import schemas


def test_tables_page_is_generated_from_the_code():
    with open("docs/tables.md") as fh:
        doc = fh.read()
    assert doc.strip() == (schemas.PAGE_HEAD + schemas.markdown()).strip()


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


def test_derived_schedule_forms_equal_the_contract():
    """schemas.SCHEDULE is the schedule's one source; the writer's and reader's Arrow
    schema and the writer's sort order are derived from it."""
    from jobs import shards
    from jobs.fleet import schedule

    expected = pa.schema([
        pa.field("host", pa.string(), nullable=False), pa.field("url", pa.string(), nullable=False),
        pa.field("not_before", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("lane", pa.string(), nullable=False), pa.field("method", pa.string(), nullable=False),
        pa.field("if_none_match", pa.string()), pa.field("if_modified_since", pa.string()),
        pa.field("priority", pa.float64(), nullable=False),
        pa.field("p_changed", pa.float64(), nullable=False),
        pa.field("crawl_delay_s", pa.float64(), nullable=False),
        pa.field("expires_at", pa.timestamp("us", tz="UTC"), nullable=False)])
    assert schemas.SCHEDULE.arrow_schema().equals(expected, check_metadata=True)
    assert schedule.SCHEDULE_SCHEMA.equals(schemas.SCHEDULE.arrow_schema(), check_metadata=True)
    assert shards.SCHEDULE_SCHEMA is schedule.SCHEDULE_SCHEMA
    keys = [name for name, _ in shards.SORT_KEYS]
    assert sorted(keys) == sorted(schemas.SCHEDULE.names) and len(set(keys)) == len(keys)


@pytest.mark.parametrize("name, contract", [
    ("FETCH_LOG_SCHEMA", schemas.FETCH_LOG), ("IMPORTANCE_SCHEMA", schemas.IMPORTANCE),
    ("HOST_POLICY_SCHEMA", schemas.HOST_POLICY), ("SIGNALS_SCHEMA", schemas.SIGNALS),
    ("FRONTIER_SCHEMA", schemas.FRONTIER)])
def test_simulator_writes_the_planners_input_contracts(name, contract):
    """What the sim writes is what the planner reads: same columns, order and types (every
    field nullable in the sim's files), and the files pass the planner's own check."""
    from lab.sim import contract as sim_contract

    derived = getattr(sim_contract, name)
    assert derived.names == contract.names
    assert [f.type for f in derived] == [f.type for f in contract.arrow_schema()]
    assert all(f.nullable for f in derived)
    schemas.check_schema(contract, derived, name)


def test_table_from_pandas_gives_exactly_the_schema_with_absent_fields_null():
    import pandas as pd

    schema = pa.schema([pa.field("url", pa.string()), pa.field("n", pa.int64()),
                        pa.field("x", pa.float64()),
                        pa.field("at", pa.timestamp("us", tz="UTC"))])
    pdf = pd.DataFrame({"x": [1.5, float("nan")], "url": ["a", None], "extra": [1, 2],
                        "n": [3, 4]}, index=[10, 11])
    t = schemas.table_from_pandas(pdf, schema)
    assert t.schema == schema and t.schema.metadata is None  # no pandas index metadata
    assert t.column("url").to_pylist() == ["a", None]
    assert t.column("x").to_pylist() == [1.5, None]  # NaN is a null, as Spark reads it
    assert t.column("at").null_count == 2
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        schemas.table_from_pandas(pdf.assign(n=["three", "four"]), schema)
