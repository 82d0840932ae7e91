"""verify() finds tampered, missing and inconsistent objects on S3 (moto over HTTP) and locally."""
from __future__ import annotations

import json
import re

import pytest

from jobs.publish import ensure_bucket, publish
from jobs.shards import write_shard, write_shard_index
from jobs.verify import VerificationError, verify
from tests.s3server import MotoS3Server, dummy_aws_env, sample_schedule, stage_schedule

DATE = "2024-05-02"


@pytest.fixture(scope="module")
def s3():
    with dummy_aws_env(), MotoS3Server() as server:
        yield server


@pytest.fixture
def published(s3, request, tmp_path):
    """A freshly published day: (target, client, bucket, manifest, source rows)."""
    bucket = "ver-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:50].strip("-")
    ensure_bucket(s3.endpoint_url, bucket)
    df = sample_schedule(n_rows=500, n_hosts=30)
    stage_schedule(df, str(tmp_path / "staging"))
    result = publish(str(tmp_path / "staging"), f"s3://{bucket}/x", DATE, {"run": 1},
                     endpoint_url=s3.endpoint_url)
    client = s3.client()
    manifest = json.loads(client.get_object(Bucket=bucket, Key=result.manifest_key)["Body"].read())
    return f"s3://{bucket}/x", client, bucket, manifest, df


def test_verify_accepts_a_good_day(s3, published):
    target, _, _, manifest, df = published
    result = verify(target, DATE, endpoint_url=s3.endpoint_url)
    assert (result.files, result.rows, result.hosts) == (4, len(df), df["host"].nunique())
    assert result.lanes == df["lane"].value_counts().sort_index().to_dict()
    assert result.bytes == sum(f["bytes"] for f in manifest["files"]) and result.unlisted == ()


def test_verify_catches_a_tampered_object(s3, published):
    target, client, bucket, manifest, _ = published
    victim = manifest["files"][1]["key"]
    body = bytearray(client.get_object(Bucket=bucket, Key=victim)["Body"].read())
    body[100] ^= 0xFF  # same size, different bytes
    client.put_object(Bucket=bucket, Key=victim, Body=bytes(body))
    with pytest.raises(VerificationError, match="sha256") as caught:
        verify(target, DATE, endpoint_url=s3.endpoint_url)
    assert len(caught.value.problems) == 1 and victim in caught.value.problems[0]


def test_verify_catches_a_missing_object(s3, published):
    target, client, bucket, manifest, _ = published
    victim = manifest["files"][0]["key"]
    client.delete_object(Bucket=bucket, Key=victim)
    with pytest.raises(VerificationError, match="missing") as caught:
        verify(target, DATE, endpoint_url=s3.endpoint_url)
    assert victim in str(caught.value)


def test_verify_catches_a_manifest_that_does_not_add_up(s3, published):
    target, client, bucket, manifest, _ = published
    manifest["totals"]["lanes"]["fast"] += 1
    manifest["files"][2]["rows"] += 1
    client.put_object(Bucket=bucket, Key=f"x/schedules/dt={DATE}/_manifest.json",
                      Body=json.dumps(manifest).encode())
    with pytest.raises(VerificationError) as caught:
        verify(target, DATE, endpoint_url=s3.endpoint_url)
    text = str(caught.value)
    assert "footer rows" in text and "totals.lanes" in text and "totals.rows" in text


def test_verify_reports_leftovers_and_missing_manifest(s3, published):
    target, client, bucket, _, _ = published
    leftover = f"x/schedules/dt={DATE}/shard-00009-deadbeef0000.parquet"
    client.put_object(Bucket=bucket, Key=leftover, Body=b"orphan")
    assert verify(target, DATE, endpoint_url=s3.endpoint_url).unlisted == (leftover,)
    with pytest.raises(VerificationError, match="no manifest"):
        verify(target, "2024-05-03", endpoint_url=s3.endpoint_url)


def test_verify_catches_a_host_split_across_files(tmp_path):
    df = sample_schedule(n_rows=200, n_hosts=10)
    first, second = df.iloc[:100], df.iloc[100:]
    staging = str(tmp_path / "staging")
    # Written without n_shards, so nothing stops the same host landing in two shards.
    write_shard_index(staging, [write_shard(first, staging, 0), write_shard(second, staging, 1)])
    publish(staging, str(tmp_path / "out"), DATE, {})
    with pytest.raises(VerificationError, match="more than one file"):
        verify(str(tmp_path / "out"), DATE)


def test_verify_on_a_local_directory(tmp_path):
    stage_schedule(sample_schedule(), str(tmp_path / "staging"))
    result = publish(str(tmp_path / "staging"), f"file://{tmp_path}/out", DATE, {})
    assert verify(f"file://{tmp_path}/out", DATE).rows == 600
    shard = tmp_path / "out" / result.uploaded[0]
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(VerificationError, match="size"):
        verify(str(tmp_path / "out"), DATE)
