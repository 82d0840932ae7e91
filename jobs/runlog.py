"""Small per-stage run records under ``{root}/_runs/dt=D/``, merged into metrics/dt=D.

Each stage overwrites only its own record (atomically), so rerunning a stage is idempotent.
A record is written after the stage's tables are committed, so it is also the stage's
"done" mark: reading a missing one is an error, never an empty record.
"""
from __future__ import annotations

from jobs import storage
from jobs.config import Config

STAGES = ("validate_logs", "update_state", "allocate", "build_schedule")


def _path(cfg: Config, run_date: str, stage: str) -> str:
    return f"{cfg.paths.table('_runs', run_date)}/{stage}.json"


def write_stage_record(cfg: Config, run_date: str, stage: str, record: dict) -> None:
    storage.write_json(_path(cfg, run_date, stage), record)


def has_stage_record(cfg: Config, run_date: str, stage: str) -> bool:
    return storage.exists(_path(cfg, run_date, stage))


def read_stage_record(cfg: Config, run_date: str, stage: str) -> dict:
    from jobs.partitions import MissingPartitionError

    record = storage.read_json(_path(cfg, run_date, stage))
    if record is None:
        raise MissingPartitionError(f"_runs/{stage}", _path(cfg, run_date, stage),
                                    f"{stage} has not completed for {run_date}")
    return record
