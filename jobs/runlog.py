"""Small per-stage run records under ``{root}/_runs/dt=D/``, merged into metrics/dt=D.

Each stage overwrites only its own record, so rerunning a stage is idempotent.
"""
from __future__ import annotations

from jobs import storage
from jobs.config import Config

STAGES = ("validate_logs", "update_state", "allocate", "build_schedule")


def _path(cfg: Config, run_date: str, stage: str) -> str:
    return f"{cfg.paths.table('_runs', run_date)}/{stage}.json"


def write_stage_record(cfg: Config, run_date: str, stage: str, record: dict) -> None:
    storage.write_json(_path(cfg, run_date, stage), record)


def read_stage_record(cfg: Config, run_date: str, stage: str) -> dict:
    return storage.read_json(_path(cfg, run_date, stage)) or {}
