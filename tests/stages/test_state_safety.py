"""A missing or half-written day never looks like an empty one.

The kill tests SIGKILL a real ``python -m jobs.update_state`` (its whole process group:
the Python driver and its JVM) at a known moment of its state or hosts commit, then rerun and
compare with an undisturbed run, row for row, and check the commit marker's attempt id: the
old commit survived, or the new one is complete. The moments: as Spark starts writing
(``_temporary/`` appears), between the new data files and the marker, and between the marker
and the deletion of the old commit's files (``jobs.partitions``' test-only pause points, which
report where the writer stopped). They are the end-to-end tier (``pytest -m e2e``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from jobs import allocate, build_schedule, partitions, update_state
from tests.conftest import REPO, make_config

D0, D1, D2 = "2024-01-02", "2024-01-03", "2024-01-04"
SPARK_SETS = ["spark.master=local[2]", "spark.state_buckets=2", "schedule.n_shards=4",
              "spark.settings.spark.sql.shuffle.partitions=4"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from lab.tools.generate_sample import generate_sample

    root = tmp_path_factory.mktemp("inputs") / "data"
    generate_sample(str(root), urls=240, hosts=8, days=3, end_date=D2, seed=3, signal_days=2)
    return root


def _copy_inputs(inputs, dest):
    shutil.copytree(inputs, dest)
    return str(dest)


def _committed(root, table, day):
    key = "url" if table == "state" else "host"
    files = partitions.committed_files(os.path.join(root, table, f"dt={day}"), table)
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return frame.sort_values(key).reset_index(drop=True)


@pytest.fixture(scope="module")
def after_d0(spark, inputs, tmp_path_factory):
    """The data root after the undisturbed run's first day (bootstrap); never written again.
    The fast tier's tests need only this day, the kill tests (e2e) the two after it too."""
    root = _copy_inputs(inputs, tmp_path_factory.mktemp("calm_d0") / f"after_{D0}")
    update_state.run(make_config(root), D0, spark, bootstrap=True)
    return root


@pytest.fixture(scope="module")
def undisturbed(spark, after_d0, tmp_path_factory):
    """An undisturbed run of three days, with a copy of the data root after each day."""
    work = tmp_path_factory.mktemp("calm")
    root = _copy_inputs(after_d0, work / "data")
    cfg = make_config(root)
    snapshots = {D0: after_d0}
    for day in (D1, D2):
        update_state.run(cfg, day, spark)
        snapshots[day] = shutil.copytree(root, work / f"after_{day}")
    tables = {(t, d): _committed(root, t, d) for t in ("state", "hosts") for d in (D1, D2)}
    return {"tables": tables, "after": snapshots}


def _root_after(undisturbed, day, tmp_path):
    """A data root as the undisturbed run left it after ``day`` (paths.root moves with it)."""
    return _copy_inputs(undisturbed["after"][day], tmp_path / "data")


def _signal_during_write(root, day, table, sig, output=None, timeout_s=240):
    """Start update_state for ``day`` and send ``sig`` to its process group while Spark writes
    ``table`` (its job's _temporary directory exists), its output to the file ``output``.
    Returns whether it was signalled, and its exit status."""
    cmd = [sys.executable, "-m", "jobs.update_state", "--date", day,
           "--set", f"paths.root={root}"] + [a for s in SPARK_SETS for a in ("--set", s)]
    with open(output or os.devnull, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, env=dict(os.environ),
                                stdout=out, stderr=subprocess.STDOUT)
        writing = os.path.join(root, table, f"dt={day}", "_temporary")
        deadline = time.monotonic() + timeout_s
        signalled = False
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if os.path.exists(writing):
                    os.killpg(proc.pid, sig)
                    signalled = True
                    proc.wait(timeout=120)
                    break
                time.sleep(0.005)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return signalled, proc.returncode


def _kill_during_write(root, day, table, timeout_s=240):
    """SIGKILL update_state's process group while Spark writes ``table``; True if it was."""
    return _signal_during_write(root, day, table, signal.SIGKILL, timeout_s=timeout_s)[0]


def _kill_at(root, day, table, point, tmp_path, timeout_s=240):
    """Start update_state for ``day``, let it stop at ``point`` of its ``table`` commit
    (``jobs.partitions.PAUSE_POINTS``), SIGKILL its process group there; returns the note the
    writer left at the pause (point, table, path, pid, the new data files)."""
    note = tmp_path / f"paused-{table}-{point}.json"
    env = {**os.environ, partitions.PAUSE_ENV: f"{table}:{point}",
           partitions.PAUSE_NOTE_ENV: str(note)}
    cmd = [sys.executable, "-m", "jobs.update_state", "--date", day,
           "--set", f"paths.root={root}"] + [a for s in SPARK_SETS for a in ("--set", s)]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline and not note.exists():
            time.sleep(0.02)
        assert note.exists(), f"update_state never reached {table}:{point} (rc {proc.poll()})"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return json.loads(note.read_text())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _data_files(part):
    return sorted(f for f in os.listdir(part) if f.endswith(".parquet"))


def _assert_equal_to(undisturbed, root, days):
    for table in ("state", "hosts"):
        for day in days:
            got, want = _committed(root, table, day), undisturbed["tables"][(table, day)]
            assert len(got) == len(want), (table, day)
            pd.testing.assert_frame_equal(got, want[got.columns], check_exact=True)


@pytest.mark.e2e
@pytest.mark.parametrize("table", ["state", "hosts"])
def test_killed_first_attempt_refuses_downstream_then_recovers(spark, undisturbed, tmp_path,
                                                               table):
    root = _root_after(undisturbed, D0, tmp_path)
    cfg = make_config(root)
    assert _kill_during_write(root, D1, table), f"update_state finished before its {table} write"
    assert not partitions.is_committed(os.path.join(root, table, f"dt={D1}"))
    # Nothing downstream may read the half-written day as an empty or trusting one.
    with pytest.raises(partitions.MissingPartitionError, match=table):
        update_state.run(cfg, D2, spark)
    with pytest.raises(partitions.MissingPartitionError):
        allocate.run(cfg, D1, spark)
    for day in (D1, D2):
        update_state.run(cfg, day, spark)
    _assert_equal_to(undisturbed, root, (D1, D2))


@pytest.mark.e2e
def test_killed_rerun_leaves_the_previous_commit_readable(spark, undisturbed, tmp_path):
    root = _root_after(undisturbed, D1, tmp_path)
    cfg = make_config(root)
    part = os.path.join(root, "state", f"dt={D1}")
    old = partitions.read_marker(part)
    assert _kill_during_write(root, D1, "state")
    assert partitions.read_marker(part)["attempt"] == old["attempt"]  # the old commit survived
    _assert_equal_to(undisturbed, root, (D1,))  # the earlier commit of D1, whole
    update_state.run(cfg, D2, spark)
    _assert_equal_to(undisturbed, root, (D1, D2))


@pytest.mark.e2e
def test_ctrl_c_while_spark_writes_is_one_line_exit_130_and_keeps_the_previous_commit(
        spark, undisturbed, tmp_path):
    root = _root_after(undisturbed, D1, tmp_path)
    part = os.path.join(root, "state", f"dt={D1}")
    old = partitions.read_marker(part)
    said = tmp_path / "update_state.out"
    signalled, rc = _signal_during_write(root, D1, "state", signal.SIGINT, said)
    text = said.read_text()
    assert signalled and rc == 130, text[-3000:]
    # No Python traceback: not ours, not py4j's logs of the JVM calls the interrupt broke, not
    # the accumulator server's (Spark's own log lines about its failed tasks may precede).
    assert "Traceback" not in text, text[-3000:]
    assert text.strip().splitlines()[-1] == ("update_state.py: interrupted: what was committed "
                                             "stays committed; rerun to finish")
    assert partitions.read_marker(part)["attempt"] == old["attempt"]
    _assert_equal_to(undisturbed, root, (D1,))


@pytest.mark.e2e
@pytest.mark.parametrize("table", ["state", "hosts"])
def test_rerun_killed_between_its_files_and_its_marker_keeps_the_old_commit(spark, undisturbed,
                                                                            tmp_path, table):
    root = _root_after(undisturbed, D1, tmp_path)
    part = os.path.join(root, table, f"dt={D1}")
    old = partitions.read_marker(part)
    old_files = {e["name"] for e in old["files"]}
    note = _kill_at(root, D1, table, "files_written", tmp_path)
    # Where the kill landed: the new attempt's files are in dt=D1/ beside the old commit's,
    # and the marker is still the old one.
    assert note["point"] == "files_written" and note["table"] == table
    new_files = set(note["files"])
    assert new_files and not new_files & old_files
    assert new_files | old_files <= set(_data_files(part))
    assert partitions.read_marker(part)["attempt"] == old["attempt"]
    assert partitions.read_marker(part)["files"] == old["files"]
    _assert_equal_to(undisturbed, root, (D1,))  # readers see the old commit, whole
    update_state.run(make_config(root), D2, spark)
    _assert_equal_to(undisturbed, root, (D1, D2))


@pytest.mark.e2e
def test_first_attempt_killed_between_its_files_and_its_marker_is_refused(spark, undisturbed,
                                                                          tmp_path):
    root = _root_after(undisturbed, D0, tmp_path)
    cfg = make_config(root)
    part = os.path.join(root, "state", f"dt={D1}")
    note = _kill_at(root, D1, "state", "files_written", tmp_path)
    assert note["point"] == "files_written" and set(note["files"]) <= set(_data_files(part))
    assert partitions.read_marker(part) is None  # data files, no marker: not a partition
    with pytest.raises(partitions.MissingPartitionError, match="never committed"):
        update_state.run(cfg, D2, spark)
    for day in (D1, D2):
        update_state.run(cfg, day, spark)
    _assert_equal_to(undisturbed, root, (D1, D2))
    assert set(_data_files(part)) == {e["name"] for e in partitions.read_marker(part)["files"]}


@pytest.mark.e2e
def test_rerun_killed_after_its_marker_leaves_the_new_commit_complete(spark, undisturbed,
                                                                      tmp_path):
    root = _root_after(undisturbed, D1, tmp_path)
    part = os.path.join(root, "state", f"dt={D1}")
    old = partitions.read_marker(part)
    old_files = {e["name"] for e in old["files"]}
    note = _kill_at(root, D1, "state", "marker_written", tmp_path)
    marker = partitions.read_marker(part)
    # Where the kill landed: a new marker naming exactly the new files; the old commit's files
    # are still on disk (their deletion never ran), and readers ignore them.
    assert note["point"] == "marker_written"
    assert marker["attempt"] != old["attempt"]
    assert sorted(e["name"] for e in marker["files"]) == note["files"]
    assert old_files <= set(_data_files(part))
    _assert_equal_to(undisturbed, root, (D1,))  # the new commit, whole
    # The next commit of the partition removes the leftovers.
    update_state.run(make_config(root), D1, spark)
    assert set(_data_files(part)) == {e["name"] for e in partitions.read_marker(part)["files"]}
    update_state.run(make_config(root), D2, spark)
    _assert_equal_to(undisturbed, root, (D1, D2))


def test_cli_refuses_a_missing_previous_day_with_a_named_error(inputs, tmp_path):
    root = _copy_inputs(inputs, tmp_path / "data")
    out = subprocess.run([sys.executable, "-m", "jobs.update_state", "--date", D1,
                          "--set", f"paths.root={root}"], cwd=REPO, capture_output=True,
                         text=True, env=dict(os.environ))
    assert out.returncode == 2
    assert "MissingPartitionError" in out.stderr and f"state/dt={D0}" in out.stderr
    assert not os.path.exists(os.path.join(root, "state", f"dt={D1}"))


def test_bootstrap_refuses_to_discard_committed_history(spark, after_d0, tmp_path):
    cfg = make_config(_copy_inputs(after_d0, tmp_path / "data"))
    with pytest.raises(ValueError, match="rebuild-state"):
        update_state.run(cfg, D1, spark, bootstrap=True)


def test_allocate_refuses_missing_hosts_instead_of_trusting_every_validator(spark, after_d0,
                                                                            tmp_path):
    root = _copy_inputs(after_d0, tmp_path / "data")
    cfg = make_config(root)
    shutil.rmtree(os.path.join(root, "hosts", f"dt={D0}"))
    with pytest.raises(partitions.MissingPartitionError, match=r"\[hosts\]"):
        allocate.run(cfg, D0, spark)


def test_build_schedule_refuses_uncommitted_candidates_and_keeps_the_old_schedule(spark,
                                                                                 tmp_path):
    cfg = make_config(str(tmp_path))
    sched = tmp_path / "schedules" / "dt=2024-01-03"
    sched.mkdir(parents=True)
    (sched / "_shards.json").write_text("{}")
    cand = tmp_path / "_work" / f"dt={D0}" / "candidates"
    cand.mkdir(parents=True)
    (cand / "part-00000-x.parquet").write_bytes(b"half")  # allocate died before its commit
    with pytest.raises(partitions.MissingPartitionError, match="never committed"):
        build_schedule.run(cfg, D0, spark)
    assert (sched / "_shards.json").exists()


def test_dag_never_runs_a_day_on_top_of_a_failed_one(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=os.path.join(REPO, "dags")).dags["recrawl_daily"]
    assert dag.max_active_runs == 1  # a catch-up replays the days in date order
    assert all(t.depends_on_past for t in dag.tasks)


@pytest.mark.e2e
def test_spark_fold_keeps_an_unfetched_urls_timestamps_to_the_microsecond(undisturbed):
    # Through Spark, Arrow and pandas and back: a URL with no fetch on D2 keeps every
    # timestamp it had on D1, bit for bit.
    root = undisturbed["after"][D2]
    logs = pd.concat([pd.read_parquet(os.path.join(root, "fetch_logs", f"dt={D2}"))])
    before = undisturbed["tables"][("state", D1)].set_index("url")
    after = undisturbed["tables"][("state", D2)].set_index("url")
    idle = before.index.difference(pd.Index(logs["url"].unique()))
    assert len(idle) > 20
    cols = ["first_seen", "last_fetch_at", "last_success_at", "last_change_at", "last_known_at",
            "etag", "last_modified", "content_hash", "interval_s", "n_fetches", "n_observations",
            "n_changes", "exposure_days", "n_errors", "importance"]
    pd.testing.assert_frame_equal(after.loc[idle, cols], before.loc[idle, cols], check_exact=True)
    assert before.loc[idle, "last_fetch_at"].notna().any()
