"""Shard assignment, deterministic content-addressed shard files and the shard index."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from jobs.fleet.schedule import (SCHEDULE_SCHEMA, ScheduleSchemaError, parse_shard_index,
                                 read_shard_index)
from jobs.shards import (SHARD_INFO_DDL, shard_info_from_record, shard_of, shard_writer,
                         write_shard, write_shard_index)
from tests.s3server import sample_schedule

REPO = Path(__file__).resolve().parents[2]


def test_shard_of_is_a_fixed_function_of_the_host():
    # Pinned values: changing the hash would silently move every host to another fetcher.
    assert [shard_of(h, 64) for h in ("example.com", "www.wikipedia.org", "bücher.de")] == [57, 8, 37]
    hosts = pd.Series(["example.com", "bücher.de", "example.com"], index=[10, 20, 30])
    assert shard_of(hosts, 64).tolist() == [57, 37, 57]
    assert shard_of(hosts, 64).index.tolist() == [10, 20, 30]


def test_shard_of_does_not_depend_on_the_process_hash_seed():
    code = "from jobs.shards import shard_of; print(shard_of('example.com', 1000))"
    outputs = {subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
               for seed in ("1", "2")}
    assert outputs == {f"{shard_of('example.com', 1000)}\n"}


@pytest.mark.parametrize("bad", [0, -3, 2.0, True])
def test_shard_of_rejects_bad_shard_counts(bad):
    with pytest.raises(ValueError, match="n_shards"):
        shard_of("example.com", bad)


def test_write_shard_is_byte_identical_for_the_same_rows_in_any_order(tmp_path):
    df = sample_schedule(n_hosts=5)
    first = write_shard(df, str(tmp_path / "a"), 3)
    second = write_shard(df.sample(frac=1.0, random_state=7), str(tmp_path / "b"), 3)
    assert first == second
    assert (tmp_path / "a" / first["file"]).read_bytes() == (tmp_path / "b" / first["file"]).read_bytes()


def test_write_shard_names_the_file_by_its_content(tmp_path):
    df = sample_schedule(n_hosts=5)
    info = write_shard(df, str(tmp_path), 7)
    data = (tmp_path / info["file"]).read_bytes()
    assert info["sha256"] == hashlib.sha256(data).hexdigest()
    assert info["file"] == f"shard-00007-{info['sha256'][:12]}.parquet"
    assert info["bytes"] == len(data) and info["rows"] == len(df)
    assert info["hosts"] == df["host"].nunique()
    assert info["lanes"] == df["lane"].value_counts().to_dict()
    changed = df.assign(priority=df["priority"] + 1.0)
    assert write_shard(changed, str(tmp_path), 7)["file"] != info["file"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [info["file"], write_shard(changed, str(tmp_path), 7)["file"]])  # no temp files left


def test_shard_file_is_sorted_typed_and_free_of_pandas_metadata(tmp_path):
    df = sample_schedule(n_hosts=5)
    df["not_before"] = df["not_before"].dt.tz_localize(None)  # Spark hands naive UTC times
    info = write_shard(df, str(tmp_path), 0)
    table = pq.read_table(tmp_path / info["file"])
    assert table.schema.remove_metadata().equals(SCHEDULE_SCHEMA)
    assert b"pandas" not in (table.schema.metadata or {})
    rows = table.to_pandas()
    assert rows[["host", "not_before", "url"]].equals(
        rows.sort_values(["host", "not_before", "url"]).reset_index(drop=True)[["host", "not_before", "url"]])
    assert rows["not_before"].min() == df["not_before"].min().tz_localize("UTC")


@pytest.mark.parametrize("mutate, column", [
    (lambda d: d.drop(columns=["lane"]), "lane"),
    (lambda d: d.assign(priority="high"), "priority"),
    (lambda d: d.assign(url=None), "url"),
    (lambda d: d.assign(lane="slow"), "lane"),
    (lambda d: d.assign(p_changed=1.5), "p_changed"),
    (lambda d: d.assign(not_before="tomorrow"), "not_before"),
    (lambda d: d.assign(extra_col=1), "extra_col"),
])
def test_write_shard_rejects_rows_off_schema_naming_the_column(tmp_path, mutate, column):
    with pytest.raises(ScheduleSchemaError, match=column):
        write_shard(mutate(sample_schedule(n_rows=20)), str(tmp_path), 0)
    assert list(tmp_path.iterdir()) == []


def test_write_shard_refuses_hosts_of_another_shard(tmp_path):
    df = sample_schedule(n_hosts=30)
    with pytest.raises(ValueError, match="do not belong to shard 1"):
        write_shard(df, str(tmp_path), 1, n_shards=4)


def test_shard_index_round_trip_and_conflicts(tmp_path):
    df = sample_schedule()
    shards = shard_of(df["host"], 3)
    infos = [write_shard(g, str(tmp_path), int(s), n_shards=3) for s, g in df.groupby(shards)]
    # duplicate attempt collapses
    write_shard_index(str(tmp_path), list(reversed(infos)) + infos[:1], n_shards=3)
    assert read_shard_index(str(tmp_path)) == sorted(infos, key=lambda i: i["shard"])
    written = json.loads((tmp_path / "_shards.json").read_text())
    assert (written["schema_version"], written["n_shards"]) == (2, 3)
    conflicting = dict(infos[0], file="shard-other.parquet")
    with pytest.raises(ValueError, match="two different files"):
        write_shard_index(str(tmp_path), [infos[0], conflicting], n_shards=3)
    with pytest.raises(ValueError, match="n_shards"):
        write_shard_index(str(tmp_path), infos, n_shards=2)  # shard 2 cannot exist then
    with pytest.raises(FileNotFoundError, match="_shards.json"):
        read_shard_index(str(tmp_path / "nowhere"))
    index = json.loads((tmp_path / "_shards.json").read_text())
    for broken, message in ((dict(index, schema_version=1), "schema_version"),
                            (dict(index, n_shards=0), "n_shards"),
                            (dict(index, n_shards=2), "outside"),
                            (dict(index, shards=index["shards"] + index["shards"][:1]), "duplicate"),
                            (dict(index, shards=[dict(infos[0], rows=-1)]), "lane counts")):
        with pytest.raises(ValueError, match=message):
            parse_shard_index(json.dumps(broken).encode())


def test_spark_executors_write_one_file_per_shard_with_each_host_in_one(tmp_path, spark):
    from pyspark.sql import functions as F  # the shared session fixture lives in conftest.py
    df = sample_schedule(n_rows=800, n_hosts=60)
    n_shards, out_dir = 5, str(tmp_path / "staging")
    # Spark's native crc32 must agree with shard_of, so the job needs no Python UDF.
    rows = (spark.createDataFrame(df)
            .withColumn("shard", F.pmod(F.crc32(F.col("host").cast("binary")), F.lit(n_shards)).cast("int"))
            .groupBy("shard").applyInPandas(shard_writer(out_dir, n_shards), SHARD_INFO_DDL)
            .collect())
    infos = [shard_info_from_record(r.asDict()) for r in rows]
    write_shard_index(out_dir, infos, n_shards=n_shards)
    assert sum(i["rows"] for i in infos) == len(df)
    hosts_by_file = {i["file"]: set(pq.read_table(Path(out_dir, i["file"]), columns=["host"])
                                    .column("host").to_pylist()) for i in read_shard_index(out_dir)}
    all_hosts = [h for hosts in hosts_by_file.values() for h in hosts]
    assert sorted(all_hosts) == sorted(df["host"].unique())  # each host in exactly one file
    for info in infos:
        assert set(shard_of(pd.Series(sorted(hosts_by_file[info["file"]])), n_shards)) == {info["shard"]}
    # Executors wrote the same bytes the pure function writes for that shard's rows.
    expected = write_shard(df[shard_of(df["host"], n_shards) == infos[0]["shard"]],
                           str(tmp_path / "direct"), infos[0]["shard"])
    assert expected == infos[0]
