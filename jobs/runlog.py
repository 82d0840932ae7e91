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
#: Every command run by date whose attempts are kept (``recrawl status`` lists them).
ATTEMPTED = (*STAGES, "plan_day", "publish", "verify")


def write_stage_record(cfg: Config, run_date: str, stage: str, record: dict) -> None:
    storage.write_json(run_record_path(cfg, run_date, stage), record)


def has_stage_record(cfg: Config, run_date: str, stage: str) -> bool:
    return storage.exists(run_record_path(cfg, run_date, stage))


def attempts_path(cfg: Config, run_date: str, stage: str) -> str:
    """A stage's attempts of date D: ``_runs/dt=D/_attempts/{stage}.json`` (beside, not in,
    the run record: the record stays a pure function of the inputs)."""
    return f"{cfg.paths.table('_runs', run_date)}/_attempts/{stage}.json"


def read_attempts(cfg: Config, run_date: str, stage: str) -> list[dict]:
    """The attempts of ``stage`` for ``run_date``, oldest first (none: an empty list)."""
    return (storage.read_json(attempts_path(cfg, run_date, stage)) or {}).get("attempts", [])


def record_attempt(cfg: Config, run_date: str, stage: str, started_at: str, seconds: float,
                   outcome: str) -> None:
    """Append one attempt (start, wall seconds, outcome: ok or failed: Class) of a stage."""
    attempts = read_attempts(cfg, run_date, stage)
    attempts.append({"attempt": len(attempts) + 1, "started_at": started_at,
                     "seconds": round(seconds, 3), "outcome": outcome})
    storage.write_json(attempts_path(cfg, run_date, stage), {"attempts": attempts})


def read_stage_record(cfg: Config, run_date: str, stage: str) -> dict:
    from jobs.partitions import MissingPartitionError

    record = storage.read_json(run_record_path(cfg, run_date, stage))
    if record is None:
        raise MissingPartitionError(f"_runs/{stage}", run_record_path(cfg, run_date, stage),
                                    f"{stage} has not completed for {run_date}")
    return record
