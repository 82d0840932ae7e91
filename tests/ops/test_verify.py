"""verify() finds tampered, missing and inconsistent objects on S3 (moto over HTTP) and locally."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from jobs.publish import ensure_bucket, publish
from jobs.shards import write_shard, write_shard_index
from jobs.verify import VerificationError, verify
from tests.s3server import sample_schedule, stage_schedule

DATE = "2024-05-02"


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
    manifest["shards"][manifest["files"][2]["shard"]]["rows"] += 1  # self-consistent listing
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
    write_shard_index(staging, [write_shard(first, staging, 0), write_shard(second, staging, 1)],
                      n_shards=2)
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


# ---- issue 9: every published header value and the gap at midnight are re-checked ----

NEXT = "2024-05-03"


def _publish_local(tmp_path, df, date, extra=None, name="out"):
    staging = tmp_path / f"staging-{date}"
    stage_schedule(df, str(staging))
    publish(str(staging), str(tmp_path / name), date, extra if extra is not None else {})
    return str(tmp_path / name)


@pytest.mark.parametrize("column, value", [
    ("if_none_match", '"e"\n'),                              # trailing LF (old "$" match)
    ("if_none_match", '"e\x85"'),                            # C1 control
    ("if_none_match", '"\u00e9t\u00e9"'),                    # non-ASCII
    ("if_modified_since", "Sun, 06 Nov 1994 08:49:37 GMT\n"),
    ("if_modified_since", "Mon, 06 Nov 1994 08:49:37 GMT"),  # weekday disagrees with the date
    ("url", "https://h0.example.org/a\r\nX-Injected: 1"),
])
def test_verify_names_the_file_and_row_of_a_bad_published_value(tmp_path, column, value):
    df = sample_schedule(n_rows=200, n_hosts=10)
    victim = int(np.flatnonzero(df["method"] == "conditional")[3])
    df.loc[victim, column] = value
    target = _publish_local(tmp_path, df, DATE)
    with pytest.raises(VerificationError) as caught:
        verify(target, DATE)
    bad = [p for p in caught.value.problems if f" {column} " in p]
    assert len(bad) == 1 and repr(value) in bad[0] and re.search(r"shard-\d{5}-\w+\.parquet: row \d+", bad[0])
    # The named row really holds the bad value.
    key, row = re.search(r"(\S+\.parquet): row (\d+)", bad[0]).groups()
    assert pq.read_table(tmp_path / "out" / key)[column][int(row)].as_py() == value


def test_verify_refuses_a_full_row_that_carries_a_validator(tmp_path):
    df = sample_schedule(n_rows=100, n_hosts=5)
    victim = int(np.flatnonzero(df["method"] == "full")[0])
    df.loc[victim, "if_modified_since"] = "Sun, 06 Nov 1994 08:49:37 GMT"
    with pytest.raises(VerificationError, match="method"):
        verify(_publish_local(tmp_path, df, DATE), DATE)


def test_verify_counts_bad_values_beyond_the_ones_it_names(tmp_path):
    df = sample_schedule(n_rows=300, n_hosts=1)  # one host: one file
    conditional = np.flatnonzero(df["method"] == "conditional")
    df.loc[conditional, "if_none_match"] = '"e"\n'
    with pytest.raises(VerificationError) as caught:
        verify(_publish_local(tmp_path, df, DATE), DATE)
    named = [p for p in caught.value.problems if "row" in p and "if_none_match" in p]
    assert len(named) == 5
    assert any(f"{len(conditional) - 5} more bad if_none_match" in p for p in caught.value.problems)


def _two_days(last_of_day, first_of_next, host="h1.example.org"):
    """Day DATE ending with a visit of ``host`` at ``last_of_day`` s after midnight, and
    day NEXT starting with one at ``first_of_next`` s after its midnight."""
    today = sample_schedule(n_rows=50, n_hosts=5, day=DATE)
    nxt = sample_schedule(n_rows=50, n_hosts=5, day=NEXT, seed=1)
    for df, day, at in ((today, DATE, last_of_day), (nxt, NEXT, first_of_next)):
        rows = df.index[df["host"] == host]
        df.loc[rows, "not_before"] = pd.Timestamp(day, tz="UTC") + pd.Timedelta(seconds=at)
        df.drop(index=rows[1:], inplace=True)  # one visit of the host per day
    # Other hosts: far from midnight, so only ``host`` is ever close.
    for df, day in ((today, DATE), (nxt, NEXT)):
        others = df["host"] != host
        df.loc[others, "not_before"] = pd.Timestamp(day, tz="UTC") + pd.Timedelta(hours=12)
    return today.reset_index(drop=True), nxt.reset_index(drop=True)


def _config(delay, root=None):
    return {"config": {"politeness": {"default_crawl_delay_s": delay},
                       "paths": {"root": root} if root else {}}}


def test_verify_catches_a_host_closer_than_its_delay_across_midnight(tmp_path):
    # place_in_slots before issue 9: 23:59:55 on D and 00:00:00 on D+1, 5 s against 30 s.
    today, nxt = _two_days(86400 - 5, 0)
    target = _publish_local(tmp_path, today, DATE, _config(30.0))
    _publish_local(tmp_path, nxt, NEXT, _config(30.0))
    assert verify(target, DATE).previous_date is None  # nothing published before DATE
    with pytest.raises(VerificationError) as caught:
        verify(target, NEXT)
    (gap,) = [p for p in caught.value.problems if "midnight" in p or "crawl delay" in p]
    assert "h1.example.org" in gap and "5.000000s" in gap and f"dt={DATE}" in gap
    # A host whose own delay is 5 s or less keeps its gap: a per-host delay beats the default.
    assert verify(target, NEXT, crawl_delays={"h1.example.org": 5.0}).midnight_hosts_checked == 5


def test_verify_passes_a_gap_of_exactly_the_delay_and_reads_the_recorded_host_policy(tmp_path):
    root = tmp_path / "root"
    policy = pd.DataFrame({"host": ["H1.example.org", "h2.example.org"],
                           "crawl_delay_s": [60.0, 1.0], "max_fetches_per_day": [None, None]})
    (root / "host_policy").mkdir(parents=True)
    policy.to_parquet(root / "host_policy" / "part-0.parquet")
    today, nxt = _two_days(86400 - 30, 0)
    target = _publish_local(tmp_path, today, DATE, _config(30.0, str(root)))
    _publish_local(tmp_path, nxt, NEXT, _config(30.0, str(root)))
    # 30 s is the default delay, but host_policy says 60 s for this host (case-folded).
    with pytest.raises(VerificationError, match="less than its crawl delay 60.0s"):
        verify(target, NEXT)
    result = verify(target, NEXT, default_crawl_delay_s=30.0)  # caller: every host 30 s
    assert result.previous_date == DATE and result.midnight_hosts_checked == 5


def test_verify_reads_the_host_policy_snapshot_of_the_run_that_planned_the_day(tmp_path):
    """Dated host_policy snapshots: the day NEXT was planned by the run of DATE, which read
    the latest committed snapshot dated on or before DATE; a later snapshot and an
    uncommitted one are not what the planner used."""
    from jobs import partitions
    from jobs.paths import shift_day

    root = tmp_path / "root"
    dirs = {}
    for dt, delay, commit in ((shift_day(DATE, -3), 20.0, True), (shift_day(DATE, -1), 45.0, False),
                              (NEXT, 60.0, True)):
        d = dirs[delay] = root / "host_policy" / f"dt={dt}"
        d.mkdir(parents=True)
        pd.DataFrame({"host": ["h1.example.org"], "crawl_delay_s": [delay],
                      "max_fetches_per_day": [None]}).to_parquet(d / "part-0.parquet")
        if commit:
            partitions.commit_files(str(d), "host_policy", [str(d / "part-0.parquet")])
    today, nxt = _two_days(86400 - 30, 0)
    target = _publish_local(tmp_path, today, DATE, _config(600.0, str(root)))
    _publish_local(tmp_path, nxt, NEXT, _config(600.0, str(root)))
    # 30 s apart: the 20 s of the snapshot the run of DATE read (45 s: not committed; 60 s:
    # dated after the run).
    assert verify(target, NEXT).midnight_hosts_checked == 5
    d = dirs[45.0]
    partitions.commit_files(str(d), "host_policy", [str(d / "part-0.parquet")])
    with pytest.raises(VerificationError, match=r"less than its crawl delay 45.0s"):
        verify(target, NEXT)


def test_verify_fails_when_the_gap_cannot_be_checked(tmp_path):
    today, nxt = _two_days(86400 - 600, 0)
    target = _publish_local(tmp_path, today, DATE)
    _publish_local(tmp_path, nxt, NEXT)  # no config recorded: delays unknown
    with pytest.raises(VerificationError, match="no known crawl delay"):
        verify(target, NEXT)
    assert verify(target, NEXT, default_crawl_delay_s=600.0).midnight_hosts_checked == 5
    # A previous day that is published but broken is not silently skipped either.
    manifest = json.loads((tmp_path / "out" / f"schedules/dt={DATE}/_manifest.json").read_text())
    (tmp_path / "out" / manifest["files"][0]["key"]).unlink()
    with pytest.raises(VerificationError, match=f"previous day {DATE}: .* missing"):
        verify(target, NEXT, default_crawl_delay_s=600.0)


def test_verify_checks_the_midnight_gap_on_s3(s3, tmp_path):
    bucket = "ver-midnight"
    ensure_bucket(s3.endpoint_url, bucket)
    today, nxt = _two_days(86400 - 5, 0)
    for df, day in ((today, DATE), (nxt, NEXT)):
        stage_schedule(df, str(tmp_path / day))
        publish(str(tmp_path / day), f"s3://{bucket}/x", day, _config(30.0),
                endpoint_url=s3.endpoint_url)
    with pytest.raises(VerificationError, match="less than its crawl delay 30.0s"):
        verify(f"s3://{bucket}/x", NEXT, endpoint_url=s3.endpoint_url)


def test_verify_clamps_recorded_host_policy_delays_like_the_planner(tmp_path):
    root = tmp_path / "root"
    (root / "host_policy").mkdir(parents=True)
    pd.DataFrame({"host": ["h1.example.org"], "crawl_delay_s": [1e9],
                  "max_fetches_per_day": [None]}).to_parquet(root / "host_policy" / "p.parquet")
    extra = _config(10.0, str(root))
    extra["config"]["politeness"].update(min_crawl_delay_s=0.1, max_crawl_delay_s=45.0)
    today, nxt = _two_days(86400 - 30, 0)
    target = _publish_local(tmp_path, today, DATE, extra)
    _publish_local(tmp_path, nxt, NEXT, extra)
    # The planner used min(1e9, 45) = 45 s; a 30 s gap breaks it, a 1e9 s check would be absurd.
    with pytest.raises(VerificationError, match=r"less than its crawl delay 45.0s"):
        verify(target, NEXT)
