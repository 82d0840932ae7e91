"""Small per-stage run records under ``{root}/_runs/dt=D/``, merged into metrics/dt=D.

Each stage overwrites only its own record (atomically), so rerunning a stage is idempotent.
A record is written after the stage's tables are committed, so it is also the stage's
"done" mark: reading a missing one is an error, never an empty record.
"""
from __future__ import annotations

from jobs import storage
from jobs.config import Config
from jobs.paths import run_record_path

STAGES = ("validate_logs", "update_state", "allocate", "build_schedule")


def write_stage_record(cfg: Config, run_date: str, stage: str, record: dict) -> None:
    storage.write_json(run_record_path(cfg, run_date, stage), record)


def has_stage_record(cfg: Config, run_date: str, stage: str) -> bool:
    return storage.exists(run_record_path(cfg, run_date, stage))


def read_stage_record(cfg: Config, run_date: str, stage: str) -> dict:
    from jobs.partitions import MissingPartitionError

    record = storage.read_json(run_record_path(cfg, run_date, stage))
    if record is None:
        raise MissingPartitionError(f"_runs/{stage}", run_record_path(cfg, run_date, stage),
                                    f"{stage} has not completed for {run_date}")
    return record
