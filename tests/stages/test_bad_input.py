"""Bad input files fail the run with an error naming the file and column (section 3)."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import schemas, update_state, validate_logs
from tests import tiny_web
from tests.conftest import make_config

DAY = "2026-11-01"


def good_rows():
    return [tiny_web.fetch("https://a.example/1", f"{DAY}T01:00", etag='"x"', h="h1")]


def _broken(root, kind):
    path = tiny_web.write(root, "fetch_logs", good_rows(), dt=DAY)
    table = pq.read_table(path)
    bad = os.path.join(os.path.dirname(path), "part-1.parquet")
    if kind == "missing_column":
        pq.write_table(table.drop(["status"]), bad)
        return bad, "status"
    if kind == "wrong_type":
        idx = table.schema.get_field_index("bytes")
        pq.write_table(table.set_column(idx, "bytes", pa.array(["many"])), bad)
        return bad, "bytes"
    if kind == "unreadable":
        with open(bad, "wb") as fh:
            fh.write(b"PAR1 truncated garbage")
        return bad, None
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["missing_column", "wrong_type", "unreadable"])
def test_validate_logs_names_file_and_column(tmp_path, kind):
    bad, column = _broken(str(tmp_path), kind)
    with pytest.raises(schemas.SchemaError) as err:
        validate_logs.run(make_config(str(tmp_path)), DAY)
    assert err.value.file == bad and err.value.column == column
    assert bad in str(err.value)


def test_missing_partition_is_a_named_error(tmp_path):
    with pytest.raises(schemas.SchemaError, match="no Parquet files found"):
        validate_logs.run(make_config(str(tmp_path)), DAY)


def test_optional_table_with_wrong_type_is_named(tmp_path):
    tiny_web.write(str(tmp_path), "fetch_logs", good_rows(), dt=DAY)
    path = os.path.join(tmp_path, "host_policy")
    os.makedirs(path)
    pq.write_table(pa.table({"host": ["a.example"], "crawl_delay_s": ["slow"],
                             "max_fetches_per_day": [1]}), os.path.join(path, "p.parquet"))
    with pytest.raises(schemas.SchemaError) as err:
        validate_logs.run(make_config(str(tmp_path)), DAY)
    assert err.value.column == "crawl_delay_s" and err.value.table == "host_policy"


def test_spark_stage_checks_its_own_boundary(spark, tmp_path):
    bad, column = _broken(str(tmp_path), "missing_column")
    with pytest.raises(schemas.SchemaError) as err:
        update_state.run(make_config(str(tmp_path)), DAY, spark, from_empty=True)
    assert err.value.file == bad and err.value.column == column
    assert not os.path.exists(os.path.join(tmp_path, "state", f"dt={DAY}"))
