"""Concurrent and killed publishes of one day, with real ``python -m jobs.publish`` processes
against the moto server over HTTP (issue 9, section 3).

Whatever the interleaving, the live day must verify (every named object present with its
checksum), every publisher must exit 0 (its day went live, or a later one replaced it) or
3 saying it LOST, and a publish killed at any point must leave a readable day behind.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import botocore.exceptions
import pytest

from jobs.publish import EXIT_LOST, PublishConflict, ensure_bucket, publish
from jobs.shards import to_schedule_table
from jobs.verify import read_schedule, verify
from tests.s3server import DUMMY_AWS_ENV, FlakyProxy, sample_schedule, \
    stage_schedule

DATE = "2024-05-02"
EXTRA = {"run_date": "2024-05-01"}
# Real publish processes killed and raced against the S3 server: the end-to-end tier.
pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
PAIRS = 10  # concurrent pairs tried per run (each ~2-4 s on 2 cores)


@pytest.fixture(scope="module")
def slow(s3):
    """Proxy adding 0.3 s to every shard PUT: with one upload at a time a publish takes over
    a second, longer than the two processes' start-up jitter, so the pair overlaps."""
    def delay(method, path):
        if method == "PUT" and "shard-" in path:
            time.sleep(0.3)

    with FlakyProxy(s3.endpoint_url, hook=delay) as proxy:
        yield proxy


def rows(df):
    return to_schedule_table(df)


def publish_cmd(staging, target, endpoint, *extra_args) -> list[str]:
    return [sys.executable, "-m", "jobs.publish", "--staging", str(staging), "--target", target,
            "--date", DATE, "--endpoint-url", endpoint, "--extra-json", json.dumps(EXTRA),
            "--retries", "3", *extra_args]


def spawn(cmd) -> subprocess.Popen:
    env = {**DUMMY_AWS_ENV, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PYTHONPATH": str(REPO)}
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def run(cmd) -> subprocess.CompletedProcess:
    """Run a publish process to completion, capturing its output."""
    proc = spawn(cmd)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def live_rows(target, endpoint):
    """The live day (verified first: every named object there with its checksum)."""
    verify(target, DATE, endpoint_url=endpoint)
    return rows(read_schedule(target, DATE, endpoint_url=endpoint))


def test_test_server_makes_conditional_writes_atomic(s3):
    """S3 lets exactly one of racing If-None-Match PUTs win; the test server must too."""
    ensure_bucket(s3.endpoint_url, "cas-check")
    wins, barrier = [], threading.Barrier(8)

    def racer(i):
        client = s3.client()
        barrier.wait()
        try:
            client.put_object(Bucket="cas-check", Key="k", Body=str(i).encode(), IfNoneMatch="*")
            wins.append(i)
        except botocore.exceptions.ClientError as exc:
            assert exc.response["Error"]["Code"] == "PreconditionFailed"

    for trial in range(3):
        s3.client().delete_object(Bucket="cas-check", Key="k")
        wins.clear()
        threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1, f"trial {trial}: {len(wins)} conditional PUTs won"


def test_concurrent_publishes_of_one_day_leave_a_valid_day(s3, slow, tmp_path):
    """PAIRS pairs of real publish processes, each pair with different staging."""
    outcomes, problems = [], []
    for trial in range(PAIRS):
        codes, problem = _race_one_pair(s3, slow, tmp_path, trial)
        outcomes.append(codes)
        if problem:
            problems.append(f"trial {trial}: {problem}")
    lost = sum(EXIT_LOST in o for o in outcomes)
    print(f"{PAIRS} pairs: {lost} with a loser (exit 3), {PAIRS - lost} one after the other")
    assert not problems, f"{len(problems)} of {PAIRS} pairs went wrong: {problems}"
    assert lost >= PAIRS // 2, outcomes  # the slow proxy makes most pairs overlap


def _race_one_pair(s3, slow, tmp_path, trial) -> tuple[tuple[int, ...], str | None]:
    """Publish an old day, then race two publishes of new content; (exit codes, problem)."""
    bucket = f"race-{trial}"
    ensure_bucket(s3.endpoint_url, bucket)
    target = f"s3://{bucket}/p"
    frames = {name: sample_schedule(seed=100 * trial + i) for i, name in enumerate("oab")}
    for name, df in frames.items():
        stage_schedule(df, str(tmp_path / f"{trial}{name}"), n_shards=4 + (name == "b"))
    publish(str(tmp_path / f"{trial}o"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    procs = {name: spawn(publish_cmd(tmp_path / f"{trial}{name}", target, slow.endpoint_url,
                                     "--max-workers", "1")) for name in "ab"}
    done = {name: (p.wait(timeout=120), p.stderr.read()) for name, p in procs.items()}
    codes = {name: code for name, (code, _) in done.items()}
    summary = tuple(sorted(codes.values()))
    if not set(codes.values()) <= {0, EXIT_LOST} or 0 not in codes.values():
        return summary, f"exit codes {codes}: {done}"
    if any(code == EXIT_LOST and "PublishConflict" not in err for code, err in done.values()):
        return summary, f"a loser did not say so: {done}"
    try:
        live = live_rows(target, s3.endpoint_url)
    except Exception as exc:  # noqa: BLE001 - a broken day is the finding
        return summary, f"exit codes {codes} but the live day is broken: {exc}"
    winners = [n for n in "ab" if live.equals(rows(frames[n]))]
    if len(winners) != 1:
        return summary, "the live day is neither staging"
    if EXIT_LOST in codes.values() and codes[winners[0]] != 0:
        return summary, f"the live day is the loser's: {codes}"
    return summary, None


@pytest.mark.parametrize("kill_at", ["shard", "manifest"])
def test_publish_killed_half_way_leaves_a_readable_day_and_a_rerun_recovers(s3, tmp_path,
                                                                             kill_at):
    """SIGKILL a publish process at its first shard PUT (mid-upload) or at its manifest PUT."""
    bucket = f"kill-{kill_at}"
    ensure_bucket(s3.endpoint_url, bucket)
    target = f"s3://{bucket}"
    old_df, new_df = sample_schedule(seed=31), sample_schedule(seed=32)
    stage_schedule(old_df, str(tmp_path / "old"))
    stage_schedule(new_df, str(tmp_path / "new"), n_shards=3)
    publish(str(tmp_path / "old"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    victim: list[subprocess.Popen] = []
    killed = threading.Event()
    killed_at: list[float] = []

    def kill_on_arrival(method, path):
        wanted = "shard-" if kill_at == "shard" else "_manifest.json"
        if method == "PUT" and wanted in path and not killed.is_set():
            os.killpg(victim[0].pid, signal.SIGKILL)
            victim[0].wait()
            killed_at.append(time.monotonic())
            killed.set()  # the request itself still lands: the process died after sending it

    # Long enough for the rerun below to start (imports under CI load take seconds) while
    # the dead lease still holds; the wait for its expiry is counted from the kill.
    lease = "20"
    with FlakyProxy(s3.endpoint_url, hook=kill_on_arrival) as proxy:
        victim.append(spawn(publish_cmd(tmp_path / "new", target, proxy.endpoint_url,
                                        "--lock-lease-s", lease, "--max-workers", "1")))
        victim[0].wait(timeout=120)
    assert killed.is_set() and victim[0].returncode == -signal.SIGKILL
    expected_now = new_df if kill_at == "manifest" else old_df
    assert live_rows(target, s3.endpoint_url).equals(rows(expected_now))

    # The dead process's lease still holds: a rerun right away says so and changes nothing.
    blocked = run(publish_cmd(tmp_path / "new", target, s3.endpoint_url))
    assert blocked.returncode == EXIT_LOST and "holds" in blocked.stderr, blocked.stderr
    # The lease runs from the victim's last renewal, before the kill; Last-Modified has 1 s
    # resolution.
    time.sleep(max(0.0, killed_at[0] + float(lease) + 1.5 - time.monotonic()))
    rerun = run(publish_cmd(tmp_path / "new", target, s3.endpoint_url))
    assert rerun.returncode == 0, rerun.stderr
    assert live_rows(target, s3.endpoint_url).equals(rows(new_df))
    result = verify(target, DATE, endpoint_url=s3.endpoint_url)
    assert result.unlisted == ()  # the rerun deleted the old day's and the dead one's leftovers


def test_losing_the_manifest_swap_raises_conflict_and_deletes_nothing(s3, tmp_path):
    """A manifest swapped in by someone else while we upload (e.g. a publish whose lease
    expired) makes our If-Match swap fail: we report the loss and leave their day intact."""
    ensure_bucket(s3.endpoint_url, "swap-lost")
    target = "s3://swap-lost"
    frames = {n: sample_schedule(seed=40 + i) for i, n in enumerate(["old", "ours", "theirs"])}
    for name, df in frames.items():
        stage_schedule(df, str(tmp_path / name))
    publish(str(tmp_path / "old"), target, DATE, EXTRA, endpoint_url=s3.endpoint_url)
    sneaked = []

    def other_swaps_first(method, path):
        if method == "PUT" and path.endswith("_manifest.json") and not sneaked:
            sneaked.append(1)
            _publish_bypassing_the_lock(str(tmp_path / "theirs"), target, s3.endpoint_url)

    with FlakyProxy(s3.endpoint_url, hook=other_swaps_first) as proxy:
        with pytest.raises(PublishConflict, match="changed while this publish ran"):
            publish(str(tmp_path / "ours"), target, DATE, EXTRA, endpoint_url=proxy.endpoint_url)
    assert live_rows(target, s3.endpoint_url).equals(rows(frames["theirs"]))


def _publish_bypassing_the_lock(staging, target, endpoint):
    """Publish as a process whose lock was taken over would: straight to the manifest."""
    from jobs import publish as module
    from unittest import mock

    class NoLock(module.DayLock):
        def acquire(self):
            self.etag = "none"

        def check(self):
            pass

        def still_ours(self):
            return True

        def release(self):
            pass

    with mock.patch.object(module, "DayLock", NoLock):
        module.publish(staging, target, DATE, EXTRA, endpoint_url=endpoint)


def test_named_file_deleted_after_the_swap_is_repaired(s3, tmp_path):
    """A file the new manifest names, deleted by someone between upload and swap, is
    uploaded again before publish reports success."""
    ensure_bucket(s3.endpoint_url, "repair")
    df = sample_schedule(seed=50)
    infos = stage_schedule(df, str(tmp_path))
    victim = f"schedules/dt={DATE}/{infos[0]['file']}"

    def delete_a_named_file(method, path):
        if method == "PUT" and path.endswith("_manifest.json"):
            s3.client().delete_object(Bucket="repair", Key=victim)

    with FlakyProxy(s3.endpoint_url, hook=delete_a_named_file) as proxy:
        result = publish(str(tmp_path), "s3://repair", DATE, EXTRA, endpoint_url=proxy.endpoint_url)
    assert result.repaired == (victim,)
    assert live_rows("s3://repair", s3.endpoint_url).equals(rows(df))


def test_a_live_lock_is_renewed_so_a_long_publish_keeps_it(s3, tmp_path):
    """A publish lasting several leases keeps renewing; another one started meanwhile loses."""
    ensure_bucket(s3.endpoint_url, "renew")
    df = sample_schedule(seed=60)
    stage_schedule(df, str(tmp_path / "a"))
    stage_schedule(sample_schedule(seed=61), str(tmp_path / "b"))
    rival = []

    def slow_and_challenged(method, path):
        if method == "PUT" and "shard-" in path and not rival:
            time.sleep(5.0)  # > the 3 s lease: only renewals keep the lock fresh
            try:
                publish(str(tmp_path / "b"), "s3://renew", DATE, EXTRA,
                        endpoint_url=s3.endpoint_url, lock_lease_s=3)
                rival.append("won")
            except PublishConflict as exc:
                rival.append(str(exc))

    with FlakyProxy(s3.endpoint_url, hook=slow_and_challenged) as proxy:
        publish(str(tmp_path / "a"), "s3://renew", DATE, EXTRA, endpoint_url=proxy.endpoint_url,
                max_workers=1, lock_lease_s=3)
    assert rival and "holds" in rival[0], rival
    assert live_rows("s3://renew", s3.endpoint_url).equals(rows(df))
