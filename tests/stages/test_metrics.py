"""metrics/dt=D rows (jobs/metrics.py): one rule for the daily run and for rebuild_state."""
import json
import os

import pyarrow.parquet as pq
import pytest

from jobs import metrics, partitions, schemas
from jobs.config import load_config
from jobs.partitions import MissingPartitionError
from jobs.runlog import write_stage_record

DAY = "2026-11-03"
UPD = {"log_rows": 120, "quarantined_fetch_logs": 2, "quarantined_importance": 0,
       "quarantined_signals": 1, "urls_known": 900, "urls_gone": 4, "urls_pending_signal": 3,
       "audit_n": 40, "audit_fresh": 30, "audit_freshness": 0.75, "audit_freshness_lo": 0.6,
       "audit_freshness_hi": 0.86}
ALLOC = {"due_total": 500, "quarantined_rows": 5, "expected_freshness": 0.81,
         "refresh_value": 0.02, "signals_pending": 3, "spark_passes": 3}
BUILT = {"planned_total": 450, "planned_refresh": 400, "planned_fast": 20,
         "planned_discovery": 30, "planned_audit": 10, "audit_conversions": 10, "hosts": 12}


@pytest.fixture
def cfg(tmp_path):
    return load_config(None, [f"paths.root={tmp_path}"])


def _full_row(cfg, upd=UPD):
    plan = metrics.plan_columns(cfg, ALLOC, BUILT, 1000, "fixed")
    return metrics.metrics_row(cfg, DAY, upd, ALLOC, plan, "build_schedule")


def test_every_column_is_state_plan_or_bookkeeping():
    owned = set(metrics.STATE_COLUMNS) | set(metrics.PLAN_COLUMNS)
    rest = set(schemas.METRICS.names) - owned
    assert rest == {"dt", "quarantined_rows", "written_by", "config_json"}
    assert not set(metrics.STATE_COLUMNS) & set(metrics.PLAN_COLUMNS)
    # A day nothing was planned for has a row, so every plan column must allow null.
    cols = {c.name: c for c in schemas.METRICS.columns}
    assert all(cols[c].nullable for c in metrics.PLAN_COLUMNS)


def test_full_row_from_the_run_records(cfg):
    row = _full_row(cfg)
    assert row["quarantined_rows"] == 2 + 0 + 1 + 5  # every input table, allocate's included
    assert row["carried_over"] == 500 - 450 and row["due_total"] == 500
    assert row["refresh_marginal_value"] == 0.02 and row["expected_freshness"] == 0.81
    assert row["budget"] == 1000 and row["budget_split"] == "fixed"
    assert row["audit_freshness"] == 0.75 and row["urls_known"] == 900
    assert row["written_by"] == "build_schedule" and row["policy"] == cfg.policy.name
    assert json.loads(row["config_json"]) == cfg.to_dict()


def test_intake_quarantine_and_the_signal_counts_reach_the_row(cfg):
    write_stage_record(cfg, DAY, "intake", {"quarantined_rows": 7, "documents": 40})
    alloc = {**ALLOC, "signal_deferred": 15, "signal_urls_discovered": 2,
             "signal_urls_not_discovered": 1}
    plan = metrics.plan_columns(cfg, alloc, BUILT, 1000, "fixed")
    row = metrics.metrics_row(cfg, DAY, UPD, alloc, plan, "build_schedule")
    assert row["quarantined_rows"] == 2 + 0 + 1 + 5 + 7  # intake's documents included
    assert (row["signal_deferred"], row["signal_urls_discovered"],
            row["signal_urls_not_discovered"]) == (15, 2, 1)
    metrics.write(cfg, DAY, row)
    assert metrics.read(cfg, DAY)["signal_deferred"] == 15


def test_row_without_a_plan_has_null_plan_columns(cfg):
    row = metrics.metrics_row(cfg, DAY, UPD, None, None, "rebuild_state")
    assert all(row[c] is None for c in metrics.PLAN_COLUMNS)
    assert row["quarantined_rows"] == 3 and row["audit_n"] == 40 and row["log_rows"] == 120


def test_plan_must_be_plan_columns(cfg):
    with pytest.raises(ValueError, match="urls_known"):
        metrics.metrics_row(cfg, DAY, UPD, None, {"urls_known": 1}, "rebuild_state")


def test_write_read_round_trip_with_the_contract_types(cfg):
    metrics.write(cfg, DAY, _full_row(cfg))
    path = cfg.paths.table("metrics", DAY)
    files = partitions.committed_files(path, "metrics")
    assert len(files) == 1
    table = pq.read_table(files[0])
    assert table.schema.equals(schemas.METRICS.arrow_schema(), check_metadata=False)
    back = metrics.read(cfg, DAY)
    assert back["planned_total"] == 450 and back["written_by"] == "build_schedule"
    assert str(back["dt"]) == DAY


def test_rewrite_replaces_and_a_killed_attempt_leaves_the_commit(cfg):
    metrics.write(cfg, DAY, _full_row(cfg))
    path = cfg.paths.table("metrics", DAY)
    # A writer killed after its file but before its marker: readers still see the commit.
    with open(os.path.join(path, "part-00000-00000000-0000-0000-0000-000000000000.parquet"),
              "wb") as fh:
        fh.write(b"half a file")
    assert metrics.read(cfg, DAY)["urls_known"] == 900
    metrics.write(cfg, DAY, _full_row(cfg, {**UPD, "urls_known": 901}))
    assert metrics.read(cfg, DAY)["urls_known"] == 901
    assert len([f for f in os.listdir(path) if f.endswith(".parquet")]) == 1


def test_missing_or_uncommitted_row_is_an_error(cfg):
    with pytest.raises(MissingPartitionError):
        metrics.read(cfg, DAY)
    path = cfg.paths.table("metrics", DAY)
    os.makedirs(path)
    pq.write_table(schemas.METRICS.arrow_schema().empty_table(), os.path.join(path, "x.parquet"))
    with pytest.raises(MissingPartitionError):
        metrics.read(cfg, DAY)


def test_rebuilt_rows_keep_the_published_plan(cfg):
    days = ["2026-11-02", DAY]
    # D-1 was never planned; D was (allocate's record and build_schedule's row exist).
    write_stage_record(cfg, DAY, "allocate", ALLOC)
    metrics.write(cfg, DAY, _full_row(cfg))
    new = [{**UPD, "urls_known": 700, "quarantined_fetch_logs": 0},
           {**UPD, "urls_known": 800, "audit_freshness": 0.5}]
    metrics.write_state_rows(cfg, days, new, "rebuild_state")

    first, second = metrics.read(cfg, days[0]), metrics.read(cfg, DAY)
    assert first["written_by"] == second["written_by"] == "rebuild_state"
    assert first["urls_known"] == 700 and first["quarantined_rows"] == 1
    assert all(first[c] is None for c in metrics.PLAN_COLUMNS)
    assert second["urls_known"] == 800 and second["audit_freshness"] == 0.5
    assert {c: second[c] for c in metrics.PLAN_COLUMNS} == {
        c: _full_row(cfg)[c] for c in metrics.PLAN_COLUMNS}
    assert second["quarantined_rows"] == 2 + 1 + 5
    # A second rebuild keeps the same plan (it reads it back from the rebuilt row).
    metrics.write_state_rows(cfg, days, new, "rebuild_state")
    assert metrics.read(cfg, DAY)["planned_total"] == 450


def test_a_row_written_before_written_by_existed_reads_it_as_none(cfg):
    import pyarrow as pa

    row = _full_row(cfg)
    schema = pa.schema([f for f in schemas.METRICS.arrow_schema() if f.name != "written_by"])
    path = cfg.paths.table("metrics", DAY)
    os.makedirs(path)
    name = os.path.join(path, "part-00000-11111111-1111-1111-1111-111111111111.parquet")
    pq.write_table(pa.Table.from_pylist([{k: row[k] for k in schema.names}], schema), name)
    partitions.commit_files(path, "metrics", [name])
    old = metrics.read(cfg, DAY)
    assert old["written_by"] is None and old["planned_total"] == 450
    assert metrics.committed_plan(cfg, DAY)["planned_total"] == 450
