"""importance/ and host_policy/ read as of the run date (jobs.snapshots, jobs.ingest).

Three dated snapshots of each table: a page promoted then demoted, a host's crawl delay
raised then lowered. The fast tests pick the snapshot (listing only); the Spark tests read it
through ingest and update_state.
"""
from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from jobs import partitions, snapshots
from jobs.errors import MissingPartitionError, SchemaError
from tests.conftest import make_config
from tests.tiny_web import write

S1, S2, S3 = "2026-11-01", "2026-11-05", "2026-11-09"
PAGE, OTHER = "https://a.example/page", "https://b.example/other"
# importance of PAGE per snapshot: promoted on S2, demoted on S3
WEIGHT = {S1: 1.0, S2: 8.0, S3: 0.25}
# crawl delay of a.example per snapshot: raised on S2, lowered on S3
DELAY = {S1: 10.0, S2: 60.0, S3: 5.0}


def _dated(root, commit=("marker", "marker", "marker")):
    """Three dated snapshots of both tables; ``commit`` per snapshot: ``marker``
    (_COMMITTED.json), ``success`` (Spark's _SUCCESS) or ``none`` (being written)."""
    for d, how in zip((S1, S2, S3), commit):
        for table, rows in (("importance", [{"url": PAGE, "importance": WEIGHT[d]},
                                            {"url": OTHER, "importance": 2.0}]),
                            ("host_policy", [{"host": "a.example", "crawl_delay_s": DELAY[d],
                                              "max_fetches_per_day": None}])):
            path = os.path.dirname(write(root, table, rows, dt=d))
            if how == "marker":
                partitions.commit_files(path, table, [os.path.join(path, "part-0.parquet")])
            elif how == "success":
                open(os.path.join(path, "_SUCCESS"), "w").close()
    return make_config(root)


@pytest.mark.parametrize("run_date,want", [(S1, S1), ("2026-11-04", S1), (S2, S2),
                                           ("2026-11-08", S2), (S3, S3), ("2026-12-31", S3)])
def test_the_latest_committed_snapshot_dated_on_or_before_d(tmp_path, run_date, want):
    cfg = _dated(str(tmp_path))
    for table in snapshots.TABLES:
        snap = snapshots.find(cfg, table, run_date)
        assert snap.dt == want and snap.path.endswith(f"{table}/dt={want}")
        assert [os.path.basename(f) for f in snap.files] == ["part-0.parquet"]
        assert snap.age_days == (pd.Timestamp(run_date) - pd.Timestamp(want)).days


def test_a_date_before_the_first_snapshot_is_refused_by_name(tmp_path):
    cfg = _dated(str(tmp_path))
    with pytest.raises(MissingPartitionError, match="no committed snapshot dated on or before "
                                                    "2026-10-31.*first is dt=2026-11-01"):
        snapshots.find(cfg, "importance", "2026-10-31")


def test_an_uncommitted_newest_snapshot_is_skipped_and_named(tmp_path):
    cfg = _dated(str(tmp_path), commit=("marker", "success", "none"))
    snap = snapshots.find(cfg, "host_policy", "2026-11-10")
    assert snap.dt == S2 and snap.skipped == (S3,)  # _SUCCESS commits S2; S3 is being written
    rec = snapshots.record(cfg, "2026-11-10")
    assert rec["snapshots"]["host_policy"]["skipped_uncommitted"] == [S3]
    assert any("dt=2026-11-09 is not committed" in w and "dt=2026-11-05 read instead" in w
               for w in rec["warnings"])
    json.dumps(rec)  # the run record is JSON


def test_only_uncommitted_snapshots_on_or_before_d_is_an_error(tmp_path):
    cfg = _dated(str(tmp_path), commit=("none", "none", "marker"))
    with pytest.raises(MissingPartitionError, match="none of dt=2026-11-01, dt=2026-11-05"):
        snapshots.find(cfg, "importance", "2026-11-06")


def test_a_committed_file_gone_is_an_error_not_a_fallback(tmp_path):
    cfg = _dated(str(tmp_path))
    os.remove(os.path.join(tmp_path, "importance", f"dt={S3}", "part-0.parquet"))
    with pytest.raises(MissingPartitionError, match="is missing"):
        snapshots.find(cfg, "importance", S3)


def test_an_old_snapshot_is_a_warning_past_the_configured_age(tmp_path):
    root = str(tmp_path)
    _dated(root)
    cfg = make_config(root, "ingest.snapshot_max_age_days=3")
    assert snapshots.record(cfg, "2026-11-12")["warnings"] == []  # 3 days old: not more
    warnings = snapshots.record(cfg, "2026-11-13")["warnings"]
    assert len(warnings) == 2 and all("4 days before 2026-11-13" in w for w in warnings)
    assert {w.split(":")[0] for w in warnings} == set(snapshots.TABLES)
    rec = snapshots.record(cfg, "2026-11-13")["snapshots"]["importance"]
    assert rec["dt"] == S3 and rec["age_days"] == 4 and rec["files"] == 1
    assert rec["partition"] == f"importance/dt={S3}"  # relative: the same record from any root


def test_the_flat_layout_is_one_snapshot_for_every_date_without_age(tmp_path):
    root = str(tmp_path)
    write(root, "importance", [{"url": PAGE, "importance": 3.0}])
    cfg = make_config(root, "ingest.snapshot_max_age_days=0")
    for d in ("1999-01-01", S2, "2100-01-01"):
        snap = snapshots.find(cfg, "importance", d)
        assert snap.dt is None and snap.age_days is None and len(snap.files) == 1
    assert snapshots.find(cfg, "host_policy", S2) is None  # absent: optional, as before
    rec = snapshots.record(cfg, S2)
    assert rec["warnings"] == [] and rec["snapshots"]["host_policy"] is None


def test_both_layouts_under_one_prefix_are_refused(tmp_path):
    root = str(tmp_path)
    cfg = _dated(root)
    write(root, "importance", [{"url": PAGE, "importance": 3.0}], name="stray.parquet")
    with pytest.raises(SchemaError, match="both dated snapshots.*stray.parquet"):
        snapshots.find(cfg, "importance", S3)
    assert snapshots.find(cfg, "host_policy", S3).dt == S3  # the other table is fine


def test_a_dt_directory_that_is_not_a_date_is_refused(tmp_path):
    root = str(tmp_path)
    cfg = _dated(root)
    os.makedirs(os.path.join(root, "host_policy", "dt=latest"))
    with pytest.raises(SchemaError, match="dt=YYYY-MM-DD"):
        snapshots.find(cfg, "host_policy", S3)


@pytest.mark.parametrize("run_date,want", [(S2, S1), ("2026-11-06", S2), (S3, S2),
                                           ("2026-11-10", S3)])
def test_previous_is_the_snapshot_of_the_day_before(tmp_path, run_date, want):
    """What intake carries forward into host_policy/dt=D: never its own dt=D."""
    cfg = _dated(str(tmp_path), commit=("marker", "success", "marker"))
    assert snapshots.previous(cfg, "host_policy", run_date).dt == want


def test_previous_is_none_on_or_before_the_first_snapshot_and_for_no_table(tmp_path):
    cfg = _dated(str(tmp_path))
    assert snapshots.previous(cfg, "host_policy", S1) is None  # dt=S1 is D's own (a re-run)
    assert snapshots.previous(cfg, "host_policy", "2026-10-01") is None
    assert snapshots.previous(make_config(str(tmp_path / "empty")), "host_policy", S2) is None


def test_previous_skips_an_uncommitted_day_before_and_refuses_none_committed(tmp_path):
    cfg = _dated(str(tmp_path), commit=("marker", "none", "marker"))
    snap = snapshots.previous(cfg, "host_policy", "2026-11-06")
    assert snap.dt == S1 and snap.skipped == (S2,)
    cfg = _dated(str(tmp_path / "none"), commit=("none", "none", "marker"))
    with pytest.raises(MissingPartitionError, match="none of dt=2026-11-01, dt=2026-11-05"):
        snapshots.previous(cfg, "host_policy", S3)


def test_require_dated_refuses_the_flat_layout_by_name(tmp_path):
    root = str(tmp_path)
    cfg = _dated(root)
    snapshots.require_dated(cfg, "host_policy", "intake")  # dated: fine
    snapshots.require_dated(make_config(str(tmp_path / "empty")), "host_policy", "intake")
    flat = str(tmp_path / "flat")
    write(flat, "host_policy", [{"host": "a.example", "crawl_delay_s": 5.0}], name="hp.parquet")
    with pytest.raises(SchemaError, match=r"host_policy: .*flat/host_policy: file: undated "
                                          r"snapshot files \(e.g. hp.parquet\) while intake "
                                          r"writes host_policy/dt=D"):
        snapshots.require_dated(make_config(flat), "host_policy", "intake")


def test_validate_logs_checks_only_the_snapshot_of_the_day(tmp_path):
    from jobs import validate_logs
    from tests.tiny_web import fetch

    root = str(tmp_path)
    cfg = _dated(root)
    # A broken file in an older snapshot no longer fails today's run: it is not read.
    bad = os.path.join(root, "importance", f"dt={S1}", "part-0.parquet")
    with open(bad, "wb") as fh:
        fh.write(b"not parquet")
    write(root, "fetch_logs", [fetch(PAGE, "2026-11-09T01:00", h="x")], dt=S3)
    rec = validate_logs.run(cfg, S3)
    assert rec["importance_files"] == 1 and rec["host_policy_files"] == 1


# ---- through Spark ----------------------------------------------------------------------------

def test_importance_and_crawl_delay_are_those_of_the_snapshot_of_d(spark, tmp_path):
    """Promotion, demotion and a lowered crawl delay take effect on the first date of their
    snapshot; between snapshots the older one holds; an uncommitted newer one is not read."""
    from jobs import ingest

    cfg = _dated(str(tmp_path), commit=("marker", "success", "marker"))
    for run_date, snap in ((S1, S1), ("2026-11-04", S1), (S2, S2), ("2026-11-08", S2),
                           (S3, S3)):
        clean, bad = ingest.read_importance(spark, cfg, run_date)
        got = {r["url"]: r["importance"] for r in ingest.importance_by_url(clean).collect()}
        assert got == {PAGE: WEIGHT[snap], OTHER: 2.0}, run_date
        assert bad.count() == 0
        policy, _ = ingest.read_host_policy(spark, cfg, run_date)
        assert {r["host"]: r["crawl_delay_s"] for r in policy.collect()} == \
            {"a.example": DELAY[snap]}, run_date
    # S3's importance being rewritten (its marker gone): S2's promotion holds on S3.
    os.remove(os.path.join(tmp_path, "importance", f"dt={S3}", partitions.MARKER))
    clean, _ = ingest.read_importance(spark, cfg, S3)
    assert {r["url"]: r["importance"] for r in clean.collect()}[PAGE] == WEIGHT[S2]
    with pytest.raises(MissingPartitionError):
        ingest.read_host_policy(spark, cfg, "2026-10-01")


def test_update_state_takes_the_demotion_the_day_it_arrives(spark, tmp_path):
    from jobs import rebuild_state, update_state
    from tests.tiny_web import fetch

    root = str(tmp_path)
    cfg = _dated(root)
    d0, d1 = "2026-11-08", S3
    for d in (d0, d1):
        write(root, "fetch_logs", [fetch(PAGE, f"{d}T01:00", h="x"),
                                   fetch(OTHER, f"{d}T02:00", h="y")], dt=d)
    rec0 = update_state.run(cfg, d0, spark, bootstrap=True)
    rec1 = update_state.run(cfg, d1, spark)
    read = lambda d: pd.read_parquet(os.path.join(root, "state", f"dt={d}")).set_index("url")  # noqa: E731
    assert read(d0).loc[PAGE, "importance"] == WEIGHT[S2]  # promoted on S2, still so on d0
    assert read(d1).loc[PAGE, "importance"] == WEIGHT[S3]  # demoted the day S3 arrives
    assert rec0["snapshots"]["importance"]["dt"] == S2
    assert rec0["snapshots"]["host_policy"]["age_days"] == 3
    assert rec1["snapshots"]["importance"]["dt"] == S3 and rec1["warnings"] == []
    # The host's served-rate limit is judged against each day's own crawl delay (60 s on
    # d0, 5 s on d1): rebuild_state replays each day with its own snapshot, as the daily runs.
    hosts = {d: pd.read_parquet(os.path.join(root, "hosts", f"dt={d}")).set_index("host")
             for d in (d0, d1)}
    assert hosts[d0].loc["a.example", "nominal_cap"] != hosts[d1].loc["a.example", "nominal_cap"]
    assert rebuild_state.run(cfg, d0, d1, spark) == [rec0, rec1]
    for d in (d0, d1):
        again = pd.read_parquet(os.path.join(root, "hosts", f"dt={d}")).set_index("host")
        pd.testing.assert_frame_equal(again.sort_index()[hosts[d].columns], hosts[d].sort_index(),
                                      check_exact=False, rtol=1e-9)
    assert read(d1).loc[PAGE, "importance"] == WEIGHT[S3]
