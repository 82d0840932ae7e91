"""The fleet SDK against the real parts: a day published to the S3 protocol (moto over HTTP on
loopback) streamed back shard by shard, 403s, manifest versions, and a day written with
FetchLogWriter that the planner's own ingest (validate_logs footers, Spark read_fetch_logs)
accepts without a quarantined row.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import ingest, schemas
from jobs.fleet.fetch_log import FetchLogWriter
from jobs.fleet.manifest import ManifestVersionError
from jobs.fleet.reader import ScheduleObjectMissing, ScheduleReader
from jobs.publish import ensure_bucket, publish
from jobs.shards import to_schedule_table
from tests.conftest import make_config
from tests.s3server import FlakyProxy, sample_schedule, stage_schedule

pytestmark = pytest.mark.e2e

DATE = "2024-05-02"


@pytest.fixture
def published(s3, request, tmp_path):
    """A day published to S3 with empty shards: (target, bucket, manifest key, source rows)."""
    bucket = "fleet-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
    ensure_bucket(s3.endpoint_url, bucket)
    df = sample_schedule(n_rows=400, n_hosts=5, day=DATE)
    stage_schedule(df, str(tmp_path / "staging"), n_shards=8)
    result = publish(str(tmp_path / "staging"), f"s3://{bucket}/crawl", DATE, {"run": 1},
                     endpoint_url=s3.endpoint_url)
    return f"s3://{bucket}/crawl", bucket, result.manifest_key, df


def test_a_published_day_streams_back_shard_by_shard_with_its_empty_shards(s3, published):
    target, bucket, manifest_key, df = published
    reader = ScheduleReader(target, endpoint_url=s3.endpoint_url, batch_rows=64)
    manifest = reader.manifest(DATE)
    assert manifest.shard_count == 8 and manifest.rows == len(df)
    empty = [s.shard for s in manifest.shards if s.empty]
    assert empty, "5 hosts in 8 shards leave some shard without rows"
    keys = {o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert not any(f"shard-{s:05d}-" in k for s in empty for k in keys)  # no file, yet listed
    tables = []
    for entry, batches in reader.day(DATE):
        got = list(batches)
        assert sum(b.num_rows for b in got) == entry.rows and all(b.num_rows <= 64 for b in got)
        tables += [pa.Table.from_batches([b]) for b in got]
    back = pa.concat_tables(tables).replace_schema_metadata(None).to_pandas()
    assert to_schedule_table(back).equals(to_schedule_table(df))
    assert (back.groupby("host")["crawl_delay_s"].nunique() == 1).all()
    assert set(back["expires_at"]) == {datetime(2024, 5, 3, tzinfo=timezone.utc)}


@pytest.mark.parametrize("denied", ["_manifest.json", "shard-"])
def test_403_is_missing_or_denied_never_an_empty_day(s3, published, denied):
    target, _, _, _ = published
    with FlakyProxy(s3.endpoint_url, failures=10_000, methods=("GET",), path_contains=denied,
                    mode="403") as proxy:
        reader = ScheduleReader(target, endpoint_url=proxy.endpoint_url)
        with pytest.raises(ScheduleObjectMissing, match="missing or denied") as caught:
            for _, batches in reader.day(DATE):
                list(batches)
        assert caught.value.status == 403
        if denied == "shard-":  # the one-shard API re-reads the manifest, then gives up by name
            shard = next(s.shard for s in reader.manifest(DATE).shards if not s.empty)
            with pytest.raises(ScheduleObjectMissing, match="403"):
                list(reader.shard_batches(DATE, shard))


def _rewrite_manifest(s3, bucket, key, **changes) -> None:
    client = s3.client()
    manifest = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    manifest.update(changes)
    client.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest).encode())


def test_a_minor_version_is_read_and_another_major_refused(s3, published):
    target, bucket, key, df = published
    reader = ScheduleReader(target, endpoint_url=s3.endpoint_url)
    _rewrite_manifest(s3, bucket, key, schema_version="2.7", added_later={"anything": [1]})
    rows = sum(b.num_rows for _, batches in reader.day(DATE) for b in batches)
    assert reader.manifest(DATE).version == (2, 7) and rows == len(df)
    for version, hint in (("3.0", "upgrade the reader"), (1, "republish")):
        _rewrite_manifest(s3, bucket, key, schema_version=version)
        with pytest.raises(ManifestVersionError, match=hint):
            reader.manifest(DATE)


def test_fetch_log_writer_parts_on_s3_meet_the_contract(s3, tmp_path):
    bucket = "fleet-logs"
    ensure_bucket(s3.endpoint_url, bucket)
    out = f"s3://{bucket}/root/fetch_logs/dt={DATE}"
    at = datetime(2024, 5, 2, 9, tzinfo=timezone.utc)
    with FetchLogWriter(out, date=DATE, endpoint_url=s3.endpoint_url, rows_per_part=2,
                        writer_id="s3w") as log:
        for i in range(3):
            log.write({"url": f"https://example.org/{i}", "fetched_at": at, "status": 200,
                       "conditional": False, "etag": None, "last_modified": None,
                       "content_hash": "cd" * 16, "bytes": 10})
    assert log.parts == [f"{out}/part-s3w-00000.parquet", f"{out}/part-s3w-00001.parquet"]
    client = s3.client()
    for part in log.parts:
        data = client.get_object(Bucket=bucket, Key=part.split(f"{bucket}/", 1)[1])["Body"].read()
        (tmp_path / "p.parquet").write_bytes(data)
        schemas.check_files(schemas.FETCH_LOG, [str(tmp_path / "p.parquet")])


def test_a_day_written_by_fetch_log_writer_is_accepted_by_ingest(tmp_path, spark):
    """validate_logs' footer checks and update_state's read: every row clean."""
    from jobs import validate_logs

    cfg = make_config(str(tmp_path))
    out = cfg.paths.table("fetch_logs", DATE)
    at = datetime(2024, 5, 2, 0, 0, 1, tzinfo=timezone.utc)
    rows = [{"url": f"https://h{i % 3}.example.org/p/{i}", "host": f"H{i % 3}.Example.org",
             "fetched_at": at + timedelta(minutes=i), "status": (200, 304, 404, 0)[i % 4],
             "conditional": i % 4 == 1, "etag": f'"v{i}"' if i % 4 < 2 else None,
             "last_modified": "Sun, 06 Nov 1994 08:49:37 GMT" if i % 3 == 0 else None,
             "content_hash": "ef" * 16 if i % 4 == 0 else None, "bytes": 100 * i,
             "elapsed_ms": None if i % 4 == 3 else 40 + i, "lane": ("refresh", "audit")[i % 2]}
            for i in range(40)]
    for writer_id, part in (("a", rows[:25]), ("b", rows[25:])):
        with FetchLogWriter(out, date=DATE, writer_id=writer_id, rows_per_part=10) as log:
            log.write_rows(part)
    assert validate_logs.run(cfg, DATE)["fetch_logs_files"] == 5
    clean, bad = ingest.read_fetch_logs(spark, cfg, DATE)
    assert bad.count() == 0 and clean.count() == 40
    assert {r["fingerprint_version"] for r in clean.select("fingerprint_version").collect()} \
        == {1}  # carried to the fold, row by row
    got = {r["url"]: r for r in clean.collect()}
    assert got["https://h1.example.org/p/1"]["host"] == "h1.example.org"
    assert got["https://h1.example.org/p/1"]["etag"] == '"v1"'
    # A writer of another version in the same day (half the fleet upgraded): accepted, each
    # row with its own version (the fold compares a hash only with one of its version).
    with FetchLogWriter(out, date=DATE, writer_id="c", fingerprint_version=2) as log:
        log.write(rows[0])
    validate_logs.run(cfg, DATE)
    clean, _ = ingest.read_fetch_logs(spark, cfg, DATE)
    versions = clean.groupBy("fingerprint_version").count().collect()
    assert {r["fingerprint_version"]: r["count"] for r in versions} == {1: 40, 2: 1}
    assert pq.read_table(out).num_rows == 41
