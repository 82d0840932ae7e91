"""Dates, date partitions and paths: the one home of the run-date rules and of every
partition directory and object key the pipeline builds.

Pure standard library (no pyspark, pandas or boto3): the DAG file imports it at parse time
through ``jobs.dag_tasks``; stages, shared modules, the backtest, the tools and the studies
may import it. It imports nothing from ``jobs``.

The date rule (docs/contract.md): the run for logical date D reads fetch logs through
``dt=D`` and plans the 24 hours [D+1 00:00, D+2 00:00) UTC, staged and published as
``schedules/dt=D+1``. Every table partition is ``{root}/{table}/dt=YYYY-MM-DD``.
"""
from __future__ import annotations

from datetime import date as _date, datetime, timedelta, timezone
from typing import Optional

DAY_S = 86400.0
MANIFEST_NAME = "_manifest.json"  # a published day's manifest, written last
LOCK_DIR = "_locks"               # the publish locks, beside the days (no day listing sees them)
REPORT_DIR = "_reports"           # the daily reports, beside the days (in no manifest)


# --- dates -------------------------------------------------------------------------------

def check_date(date: str) -> str:
    """Return ``date`` if it is a real YYYY-MM-DD date, else raise ValueError."""
    try:
        if isinstance(date, str) and len(date) == 10 and _date.fromisoformat(date):
            return date
    except ValueError:
        pass
    raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")


def shift_day(day: str, days: int) -> str:
    """The date ``days`` days after ``day`` (before it when negative), YYYY-MM-DD."""
    return (_date.fromisoformat(day) + timedelta(days=days)).isoformat()


def previous_day(run_date: str) -> str:
    """D-1: the day whose state and hosts the run for D starts from."""
    return shift_day(run_date, -1)


def schedule_date(run_date: str) -> str:
    """D+1: the day the run for D plans, stages and publishes (``schedules/dt=D+1``)."""
    return shift_day(run_date, 1)


def day_bounds(run_date: str) -> tuple[datetime, datetime]:
    """[D 00:00, D+1 00:00) UTC as aware datetimes: the day whose logs the run reads."""
    d = _date.fromisoformat(run_date)
    start = datetime(d.year, d.month, d.day, tzinfo=timezone.utc)
    return start, start + timedelta(days=1)


def planning_window(run_date: str) -> tuple[float, float]:
    """The run for D plans [D+1 00:00, D+2 00:00) UTC, in epoch seconds."""
    _, day_end = day_bounds(run_date)
    start = day_end.timestamp()
    return start, start + DAY_S


def date_range(first: str, last: str) -> list[str]:
    """Every date from ``first`` to ``last`` inclusive; ValueError when last < first."""
    d0, d1 = _date.fromisoformat(first), _date.fromisoformat(last)
    if d1 < d0:
        raise ValueError("--to is before --from")
    return [(d0 + timedelta(days=k)).isoformat() for k in range((d1 - d0).days + 1)]


# --- table partitions under the data root (paths.root) -----------------------------------

def partition(root: str, table: str, dt: Optional[str] = None) -> str:
    """``{root}/{table}``, or its date partition ``{root}/{table}/dt=D``."""
    base = f"{root.rstrip('/')}/{table}"
    return f"{base}/dt={dt}" if dt else base


def work_path(cfg, run_date: str, name: str) -> str:
    """A stage-to-stage working table of run date D: ``_work/dt=D/{name}``."""
    return f"{cfg.paths.table('_work', run_date)}/{name}"


def run_record_path(cfg, run_date: str, stage: str) -> str:
    """A stage's run record: ``_runs/dt=D/{stage}.json``."""
    return f"{cfg.paths.table('_runs', run_date)}/{stage}.json"


def quarantine_path(cfg, run_date: str, source: str) -> str:
    """One source table's quarantined rows: ``quarantine/dt=D/source={source}``."""
    return f"{cfg.paths.table('quarantine', run_date)}/source={source}"


# --- object keys of a publish target ----------------------------------------------------

def join_key(*parts: str) -> str:
    """Join key parts with ``/``, dropping empty parts and stray slashes."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def schedule_day_prefix(location_prefix: str, date: str) -> str:
    """Key prefix (no trailing slash) holding one published day's schedule objects."""
    return join_key(location_prefix, "schedules", f"dt={check_date(date)}")


def schedule_manifest_key(location_prefix: str, date: str) -> str:
    """Key of a published day's manifest."""
    return join_key(schedule_day_prefix(location_prefix, date), MANIFEST_NAME)


def schedule_report_key(location_prefix: str, run_date: str) -> str:
    """Key of run date D's report page: beside the days (like the locks), so no day's
    listing or manifest holds it and a republish of a day never deletes it."""
    return join_key(location_prefix, "schedules", REPORT_DIR, f"dt={check_date(run_date)}",
                    "report.html")


def schedule_lock_key(location_prefix: str, date: str) -> str:
    """Key of the day's publish lock: beside the day's prefix, so no day listing sees it."""
    return join_key(location_prefix, "schedules", LOCK_DIR, f"dt={check_date(date)}.json")
