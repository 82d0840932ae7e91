"""``metrics/dt=D``: one row of run figures per date, built from the stages' run records.

Two stages own its columns. The **state** columns (URLs known and gone, log rows, the audit
score with its interval) come from the ``update_state`` run record of D, written by the daily
``update_state`` or by ``rebuild_state`` for every day it replays. The **plan** columns
(budget, planned rows by lane, expected freshness, the multiplier, ...) come from allocate and
build_schedule of D; they are null on a day nothing was planned for.

Who writes the row (``written_by``):

* ``update_state`` of D, and ``rebuild_state`` for every day it replays: the new state
  figures, and the plan columns of the row already committed for that day (recomputing state
  does not change the schedule that was published), or nulls. So every date with state has a
  row, a day that was only rebuilt included;
* ``build_schedule`` of D then writes the whole row (the state figures of D's update_state
  record with the day's plan).

One row, written with pyarrow (no Spark job) as a committed partition (:mod:`jobs.partitions`).
"""
from __future__ import annotations

import json
import uuid
from datetime import date
from typing import Optional

import pandas as pd
import pyarrow as pa

from jobs import partitions, schemas, storage
from jobs.config import Config
from jobs.core import budget_curve, observations
from jobs.fleet.schedule import filesystem_for
from jobs.partitions import MissingPartitionError
from jobs.runlog import has_stage_record, read_stage_record

# Columns update_state's record owns (copied as they are); quarantined_rows is summed below.
STATE_COLUMNS = ("urls_known", "urls_gone", "log_rows", "audit_freshness", "audit_freshness_lo",
                 "audit_freshness_hi", "audit_n", "hosts_limited", "hosts_blocked",
                 "host_fetches", "host_errors", "host_throttled",
                 *observations.FETCH_FIGURES)
# Columns the planner owns, null on a day without a plan.
PLAN_COLUMNS = tuple(c for c in schemas.METRICS.names
                     if c not in STATE_COLUMNS + ("dt", "quarantined_rows", "written_by",
                                                  "config_json"))
_ALLOCATE_KEYS = {  # metrics column -> allocate record key
    "signals_pending": "signals_pending", "fast_budget": "fast_budget",
    "discovery_budget": "discovery_budget", "refresh_budget": "refresh_budget",
    "refresh_marginal_value": "refresh_value", "discovery_marginal_value": "discovery_value",
    "policy_level": "policy_level", "floors_affordable": "floors_affordable",
    "expected_freshness": "expected_freshness",
    "expected_freshness_fast": "expected_freshness_fast",
    "expected_freshness_refresh": "expected_freshness_refresh", "spark_passes": "spark_passes",
    "crawl_delay_raised": "crawl_delay_raised", "crawl_delay_lowered": "crawl_delay_lowered",
    "capacity_withheld": "health_withheld", "expected_age_days": "expected_age_days",
    "days_per_pass": "days_per_pass", "budget_per_url": "budget_per_url",
    "signal_deferred": "signal_deferred", "signal_urls_discovered": "signal_urls_discovered",
    "signal_urls_not_discovered": "signal_urls_not_discovered",
    **{c: c for c in budget_curve.FRESHNESS_COLUMNS + budget_curve.AGE_COLUMNS}}


def plan_columns(cfg: Config, alloc: dict, built: dict, daily_fetches: int, split: str) -> dict:
    """The plan columns of D from allocate's and build_schedule's run records."""
    due = int(alloc.get("due_total", 0))
    return {
        "policy": cfg.policy.name, "budget": int(daily_fetches), "budget_split": split,
        "planned_total": built["planned_total"], "planned_refresh": built["planned_refresh"],
        "planned_fast": built["planned_fast"], "planned_discovery": built["planned_discovery"],
        "planned_audit": built.get("planned_audit"),
        "audit_conversions": built.get("audit_conversions"), "hosts": built["hosts"],
        # Backfill rows were not due today: they do not reduce what was carried over.
        "due_total": due,
        "carried_over": due - (built["planned_total"] - built.get("planned_backfill", 0)),
        "planned_backfill": built.get("planned_backfill"),
        **{col: alloc.get(key) for col, key in _ALLOCATE_KEYS.items()},
    }


def metrics_row(cfg: Config, run_date: str, upd: dict, alloc: Optional[dict],
                plan: Optional[dict], written_by: str) -> dict:
    """The row of D: state figures from ``upd`` (update_state's record), the plan columns
    ``plan`` (None: all null), quarantined rows of every input table (update_state's, and
    allocate's and intake's when they ran for D)."""
    unknown = set(plan or ()) - set(PLAN_COLUMNS)
    if unknown:
        raise ValueError(f"not plan columns of metrics: {sorted(unknown)}")
    row = dict.fromkeys(schemas.METRICS.names)
    row.update({c: upd.get(c) for c in STATE_COLUMNS})
    row.update(plan or {})
    row.update(
        dt=date.fromisoformat(run_date), written_by=written_by,
        quarantined_rows=sum(int(v or 0) for k, v in upd.items() if k.startswith("quarantined_"))
        + int((alloc or {}).get("quarantined_rows", 0)) + _intake_quarantined(cfg, run_date),
        config_json=json.dumps(cfg.to_dict(), sort_keys=True))
    return row


def _intake_quarantined(cfg: Config, run_date: str) -> int:
    """Rows intake quarantined from D's documents (0 when intake did not run for D)."""
    if not has_stage_record(cfg, run_date, "intake"):
        return 0
    return int(read_stage_record(cfg, run_date, "intake").get("quarantined_rows") or 0)


def write(cfg: Config, run_date: str, row: dict) -> dict:
    """Commit ``row`` as ``metrics/dt=run_date`` (replacing the previous commit); the marker."""
    path = cfg.paths.table("metrics", run_date)
    frame = pd.DataFrame([row])[schemas.METRICS.names].astype(object)
    frame = frame.where(pd.notna(frame), None)
    table = pa.Table.from_pandas(frame, schema=schemas.METRICS.arrow_schema(), preserve_index=False)
    # A new name per attempt (the Spark-style part-<task>-<uuid> the marker code knows), so a
    # killed attempt never overwrites the committed file.
    name = f"{path.rstrip('/')}/part-00000-{uuid.uuid4()}.parquet"
    storage.write_parquet(name, table)
    return partitions.commit_files(path, "metrics", [name])


def read(cfg: Config, run_date: str) -> dict:
    """The committed row of ``run_date`` as a dict with None for nulls (a partition written
    before a column existed reads that column as None); :class:`MissingPartitionError` if
    there is none."""
    import pyarrow.parquet as pq

    path = cfg.paths.table("metrics", run_date)
    files = partitions.committed_files(path, "metrics")
    rows = [r for f in files for r in _read_file(pq, f)]
    if not rows:
        raise MissingPartitionError("metrics", path, "no row")
    return {c: rows[0].get(c) for c in dict.fromkeys(schemas.METRICS.names + list(rows[0]))}


def _read_file(pq, uri: str) -> list[dict]:
    fs, path = filesystem_for(uri)
    with fs.open_input_file(path) as fh:
        return pq.read_table(fh).to_pylist()


def committed_plan(cfg: Config, run_date: str) -> Optional[dict]:
    """The plan columns of the row committed for ``run_date``, or None when there is no row
    or it holds no plan."""
    if not partitions.is_committed(cfg.paths.table("metrics", run_date)):
        return None
    old = read(cfg, run_date)
    if old.get("planned_total") is None:
        return None
    return {c: old.get(c) for c in PLAN_COLUMNS}


def write_state_rows(cfg: Config, days: list[str], records: list[dict], written_by: str) -> None:
    """The rows ``update_state`` and ``rebuild_state`` write: for each day, its update_state
    ``record`` beside the plan columns already committed for it (and allocate's quarantine
    count when allocate ran), so every date with state has a row."""
    for d, record in zip(days, records, strict=True):
        alloc = (read_stage_record(cfg, d, "allocate")
                 if has_stage_record(cfg, d, "allocate") else None)
        write(cfg, d, metrics_row(cfg, d, record, alloc, committed_plan(cfg, d), written_by))
