"""publish() against a real S3-protocol server (moto over HTTP on loopback) and a local dir."""
from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import botocore.exceptions
import pytest

from jobs import objstore
from jobs import publish as publish_module
from jobs.objstore import with_retries
from jobs.publish import PublishError, ensure_bucket, publish
from jobs.shards import to_schedule_table
from jobs.verify import read_schedule, verify
from tests.s3server import FlakyProxy, sample_schedule, stage_schedule

DATE = "2024-05-02"
EXTRA = {"config": {"n_shards": 4, "budget": 600}, "run_date": "2024-05-01",
         "window": ["2024-05-02T00:00:00Z", "2024-05-03T00:00:00Z"]}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bucket(s3, request):
    name = "pub-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:50].strip("-")
    assert ensure_bucket(s3.endpoint_url, name) is True
    return name


def snapshot(s3, bucket, locks=False):
    """Every schedule object in the bucket: key -> (etag, bytes); publish locks (bookkeeping
    outside the day's prefix) only if asked."""
    client = s3.client()
    listing = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: (o["ETag"], client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
            for o in listing if locks or "/_locks/" not in o["Key"]}


def lock_state(s3, bucket, key):
    """The ``state`` field of a publish lock object."""
    return json.loads(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())["state"]


def sorted_rows(df):
    """Rows as a canonical (typed, fully sorted) Arrow table, for exact comparison."""
    return to_schedule_table(df)


def test_publish_then_read_back_through_the_manifest(s3, bucket, tmp_path):
    df = sample_schedule()
    infos = stage_schedule(df, str(tmp_path))
    result = publish(str(tmp_path), f"s3://{bucket}/crawl", DATE, EXTRA, endpoint_url=s3.endpoint_url)
    prefix = f"crawl/schedules/dt={DATE}"
    assert result.manifest_key == f"{prefix}/_manifest.json"
    assert sorted(result.uploaded) == sorted(f"{prefix}/{i['file']}" for i in infos)
    objects = snapshot(s3, bucket)
    manifest = json.loads(objects[result.manifest_key][1])
    assert manifest["extra"] == EXTRA and manifest["schema_version"] == "2.0"
    assert manifest["totals"]["rows"] == len(df) and manifest["totals"]["hosts"] == df["host"].nunique()
    assert manifest["totals"]["lanes"] == df["lane"].value_counts().to_dict()
    for entry in manifest["files"]:
        assert len(objects[entry["key"]][1]) == entry["bytes"]
    assert set(objects) == {e["key"] for e in manifest["files"]} | {result.manifest_key}
    assert lock_state(s3, bucket, f"crawl/schedules/_locks/dt={DATE}.json") == "released"
    back = read_schedule(f"s3://{bucket}/crawl", DATE, endpoint_url=s3.endpoint_url)
    assert sorted_rows(back).equals(sorted_rows(df))
    one = read_schedule(f"s3://{bucket}/crawl", DATE, endpoint_url=s3.endpoint_url, shards={infos[0]["shard"]})
    assert len(one) == infos[0]["rows"]


def test_rerun_leaves_byte_identical_objects(s3, bucket, tmp_path):
    stage_schedule(sample_schedule(), str(tmp_path / "a"))
    stage_schedule(sample_schedule(), str(tmp_path / "b"))  # rebuilt from the same inputs
    target = f"s3://{bucket}"
    publish(str(tmp_path / "a"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    before = snapshot(s3, bucket, locks=True)
    again = publish(str(tmp_path / "b"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    assert snapshot(s3, bucket, locks=True) == before  # the released lock too
    assert again.uploaded == () and len(again.skipped) == 4 and again.deleted == ()


def test_rerun_with_new_content_replaces_the_day_and_deletes_stale_files(s3, bucket, tmp_path):
    target = f"s3://{bucket}/p"
    old_infos = stage_schedule(sample_schedule(seed=1), str(tmp_path / "old"))
    publish(str(tmp_path / "old"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    publish(str(tmp_path / "old"), target, "2024-05-03", EXTRA, endpoint_url=s3.endpoint_url)
    new_df = sample_schedule(seed=2)
    new_infos = stage_schedule(new_df, str(tmp_path / "new"), n_shards=3)
    result = publish(str(tmp_path / "new"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    day = f"p/schedules/dt={DATE}"
    assert sorted(result.deleted) == sorted(f"{day}/{i['file']}" for i in old_infos)
    keys = {k for k in snapshot(s3, bucket) if k.startswith(day)}
    assert keys == {f"{day}/{i['file']}" for i in new_infos} | {f"{day}/_manifest.json"}
    assert len([k for k in snapshot(s3, bucket) if "dt=2024-05-03" in k]) == 5  # other day untouched
    assert sorted_rows(read_schedule(target, DATE, endpoint_url=s3.endpoint_url)).equals(sorted_rows(new_df))


def test_manifest_only_reader_never_sees_a_half_published_day(s3, bucket, tmp_path):
    target = f"s3://{bucket}"
    old_df, new_df = sample_schedule(seed=1), sample_schedule(seed=2)
    stage_schedule(old_df, str(tmp_path / "old"))
    stage_schedule(new_df, str(tmp_path / "new"))
    publish(str(tmp_path / "old"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    seen_while_publishing = []

    def read_just_before_the_manifest_lands(method, path):
        if method == "PUT" and path.endswith("_manifest.json"):
            # New data files are all uploaded; the old manifest must still be fully readable.
            seen_while_publishing.append(read_schedule(target, DATE, endpoint_url=s3.endpoint_url))

    with FlakyProxy(s3.endpoint_url, hook=read_just_before_the_manifest_lands) as proxy:
        publish(str(tmp_path / "new"), target, DATE, EXTRA, endpoint_url=proxy.endpoint_url)
    assert len(seen_while_publishing) == 1
    assert sorted_rows(seen_while_publishing[0]).equals(sorted_rows(old_df))
    assert sorted_rows(read_schedule(target, DATE, endpoint_url=s3.endpoint_url)).equals(sorted_rows(new_df))


def test_reader_holding_an_old_manifest_rereads_it_after_a_404(s3, bucket, tmp_path):
    target = f"s3://{bucket}"
    old_df, new_df = sample_schedule(seed=3), sample_schedule(seed=4)
    stage_schedule(old_df, str(tmp_path / "old"))
    stage_schedule(new_df, str(tmp_path / "new"))
    publish(str(tmp_path / "old"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    republished = []

    def republish_after_manifest_was_read(method, path):
        if method == "GET" and "shard-" in path and not republished:
            republished.append(publish(str(tmp_path / "new"), target, DATE, EXTRA,
                                       endpoint_url=s3.endpoint_url))

    with FlakyProxy(s3.endpoint_url, hook=republish_after_manifest_was_read) as proxy:
        got = read_schedule(target, DATE, endpoint_url=proxy.endpoint_url)
    assert republished and republished[0].deleted  # the file the reader asked for was gone
    assert sorted_rows(got).equals(sorted_rows(new_df))


@pytest.mark.parametrize("mode, botocore_attempts", [("503", 3), ("503", 1), ("drop", 1)])
def test_transient_upload_failures_are_retried(s3, bucket, tmp_path, monkeypatch, mode,
                                               botocore_attempts):
    # With botocore retries off (1 attempt), our own with_retries must absorb every failure.
    monkeypatch.setattr(objstore, "BOTOCORE_MAX_ATTEMPTS", botocore_attempts)
    df = sample_schedule()
    stage_schedule(df, str(tmp_path))
    with FlakyProxy(s3.endpoint_url, failures=3, path_contains="shard-", mode=mode) as proxy:
        result = publish(str(tmp_path), f"s3://{bucket}", DATE, EXTRA, endpoint_url=proxy.endpoint_url,
                         backoff_base_s=0.01)
    assert proxy.failed == 3 and len(result.uploaded) == 4
    assert verify(f"s3://{bucket}", DATE, endpoint_url=s3.endpoint_url).rows == len(df)


def test_persistent_failure_keeps_the_previous_day_live(s3, bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(objstore, "BOTOCORE_MAX_ATTEMPTS", 1)
    old_df = sample_schedule(seed=5)
    stage_schedule(old_df, str(tmp_path / "old"))
    stage_schedule(sample_schedule(seed=6), str(tmp_path / "new"))
    publish(str(tmp_path / "old"), f"s3://{bucket}", DATE, EXTRA, endpoint_url=s3.endpoint_url)
    with FlakyProxy(s3.endpoint_url, failures=10_000, path_contains="shard-") as proxy:
        with pytest.raises(PublishError, match="manifest not written"):
            publish(str(tmp_path / "new"), f"s3://{bucket}", DATE, EXTRA,
                    endpoint_url=proxy.endpoint_url, retries=3, backoff_base_s=0.01)
    assert proxy.failed == 4 * 3  # every new file tried `retries` times, none got through
    back = read_schedule(f"s3://{bucket}", DATE, endpoint_url=s3.endpoint_url)
    assert sorted_rows(back).equals(sorted_rows(old_df))


def slow_down_error():
    return botocore.exceptions.ClientError(
        {"Error": {"Code": "SlowDown"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "PutObject")


def test_with_retries_backs_off_exponentially_with_jitter():
    calls, sleeps = [], []

    def fails_twice():
        calls.append(1)
        if len(calls) <= 2:
            raise slow_down_error()
        return "ok"

    assert with_retries(fails_twice, attempts=5, base_delay_s=1.0, sleep=sleeps.append,
                        rng=random.Random(0)) == "ok"
    assert len(calls) == 3 and len(sleeps) == 2
    assert 0 <= sleeps[0] <= 1.0 and 0 <= sleeps[1] <= 2.0 and sleeps != [1.0, 2.0]


def test_with_retries_gives_up_and_does_not_retry_permanent_errors():
    attempts = []

    def always_throttled():
        attempts.append(1)
        raise slow_down_error()

    with pytest.raises(botocore.exceptions.ClientError):
        with_retries(always_throttled, attempts=3, sleep=lambda s: None)
    assert len(attempts) == 3
    denied = botocore.exceptions.ClientError(
        {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "PutObject")
    attempts.clear()

    def forbidden():
        attempts.append(1)
        raise denied

    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        with_retries(forbidden, attempts=3, sleep=lambda s: None)
    assert len(attempts) == 1


def test_local_directory_target_has_the_same_layout(tmp_path):
    df = sample_schedule()
    infos = stage_schedule(df, str(tmp_path / "staging"))
    out = tmp_path / "out"
    first = publish(str(tmp_path / "staging"), f"file://{out}", DATE, EXTRA)
    day_files = lambda: {p.relative_to(out).as_posix(): p.read_bytes()
                         for p in (out / "schedules" / f"dt={DATE}").rglob("*") if p.is_file()}
    before = day_files()
    assert set(before) == {f"schedules/dt={DATE}/{i['file']}" for i in infos} | {first.manifest_key}
    assert json.loads((out / "schedules" / "_locks" / f"dt={DATE}.json").read_text())["state"] == "released"
    again = publish(str(tmp_path / "staging"), str(out), DATE, EXTRA)
    assert day_files() == before and again.uploaded == ()
    assert sorted_rows(read_schedule(str(out), DATE)).equals(sorted_rows(df))
    stage_schedule(sample_schedule(seed=9), str(tmp_path / "staging2"), n_shards=2)
    second = publish(str(tmp_path / "staging2"), str(out), DATE, EXTRA)
    assert len(second.deleted) == 4 and not any((out / k).exists() for k in second.deleted)


@pytest.mark.parametrize("kwargs, message", [
    ({"date": "2024-02-30"}, "YYYY-MM-DD"),
    ({"date": "20240501"}, "YYYY-MM-DD"),
    ({"manifest_extra": {"x": float("nan")}}, "plain JSON"),
    ({"target": "ftp://host/x"}, "unsupported location scheme"),
])
def test_publish_checks_inputs_first(tmp_path, kwargs, message):
    args = {"staging_dir": str(tmp_path), "target": str(tmp_path / "out"), "date": DATE,
            "manifest_extra": {}} | kwargs
    with pytest.raises(ValueError, match=message):
        publish(**args)


def test_local_stack_script_and_clis(tmp_path, monkeypatch):
    """infra/local_s3.sh start (twice: idempotent) → publish CLI → verify CLI → stop."""
    from tests.s3server import DUMMY_AWS_ENV
    from jobs import verify as verify_module
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**DUMMY_AWS_ENV, "PATH": "/usr/bin:/bin", "LOCAL_S3_STATE_DIR": str(tmp_path / "state")}
    script = str(REPO / "infra" / "local_s3.sh")
    run = lambda *args: subprocess.run([script, *args, str(port)], env=env, capture_output=True,
                                       text=True, timeout=60)
    started = run("start")
    try:
        assert started.returncode == 0, started.stderr
        endpoint = started.stdout.strip()
        assert endpoint == f"http://127.0.0.1:{port}" and run("start").stdout.strip() == endpoint
        stage_schedule(sample_schedule(), str(tmp_path / "staging"))
        for key, value in DUMMY_AWS_ENV.items():
            monkeypatch.setenv(key, value)
        assert publish_module.main(["--staging", str(tmp_path / "staging"), "--target", "s3://demo/x",
                                    "--date", DATE, "--endpoint-url", endpoint, "--ensure-bucket",
                                    "--extra-json", json.dumps(EXTRA)]) == 0
        assert verify_module.main(["--target", "s3://demo/x", "--date", DATE,
                                   "--endpoint-url", endpoint]) == 0
        with pytest.raises(verify_module.VerificationError):  # the CLI exits 4 on it
            verify_module.main(["--target", "s3://demo/x", "--date", "2024-05-09",
                                "--endpoint-url", endpoint])
    finally:
        stopped = run("stop")
    assert stopped.stdout.strip() == "stopped" and run("status").returncode == 1


KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"


def test_sse_kms_headers_on_every_object_when_a_key_is_configured(s3, bucket, tmp_path):
    """The production bucket policy denies puts without SSE-KMS: shards, manifest and lock
    must all carry it; a rerun still recognises identical shards (no re-upload)."""
    stage_schedule(sample_schedule(), str(tmp_path))
    target = f"s3://{bucket}"
    result = publish(str(tmp_path), target, DATE, EXTRA, endpoint_url=s3.endpoint_url,
                     sse_kms_key_id=KMS_KEY)
    client = s3.client()
    keys = [*result.uploaded, result.manifest_key, f"schedules/_locks/dt={DATE}.json"]
    for key in keys:
        head = client.head_object(Bucket=bucket, Key=key)
        assert (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) == ("aws:kms", KMS_KEY), key
    again = publish(str(tmp_path), target, DATE, EXTRA, endpoint_url=s3.endpoint_url,
                    sse_kms_key_id=KMS_KEY)
    assert again.uploaded == () and len(again.skipped) == 4


def test_no_sse_header_without_a_key(s3, bucket, tmp_path):
    stage_schedule(sample_schedule(), str(tmp_path))
    result = publish(str(tmp_path), f"s3://{bucket}", DATE, EXTRA, endpoint_url=s3.endpoint_url)
    for key in [*result.uploaded, result.manifest_key]:
        assert "ServerSideEncryption" not in s3.client().head_object(Bucket=bucket, Key=key)


def test_config_kwargs_carry_the_publish_section(monkeypatch):
    from jobs.config import load_config
    cfg = load_config(None, [f"publish.sse_kms_key_id={KMS_KEY}", "publish.lock_lease_s=90",
                             "publish.endpoint_url=https://s3.eu-west-1.amazonaws.com"])
    kwargs = publish_module.config_kwargs(cfg.publish)
    assert kwargs["sse_kms_key_id"] == KMS_KEY and kwargs["lock_lease_s"] == 90.0
    assert kwargs["endpoint_url"] == "https://s3.eu-west-1.amazonaws.com"
    assert publish_module.config_kwargs(load_config(None, []).publish)["endpoint_url"] is None


@pytest.mark.parametrize("denied", ["_manifest.json", "shard-"])
def test_reader_reports_403_as_missing_or_denied(s3, bucket, tmp_path, denied):
    """Without s3:ListBucket S3 answers 403 for a missing key: the reader and verify must
    say "missing or denied" (a named VerificationError), not crash on a raw ClientError."""
    from jobs.verify import VerificationError
    stage_schedule(sample_schedule(), str(tmp_path))
    target = f"s3://{bucket}"
    publish(str(tmp_path), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    with FlakyProxy(s3.endpoint_url, failures=10_000, methods=("GET",), path_contains=denied,
                    mode="403") as proxy:
        with pytest.raises(VerificationError, match="missing or denied|403"):
            read_schedule(target, DATE, endpoint_url=proxy.endpoint_url)
        with pytest.raises(VerificationError, match="missing or denied"):
            verify(target, DATE, endpoint_url=proxy.endpoint_url)
