"""The callables the DAG's Python tasks run: thin wrappers over the jobs.

Each takes the logical date and the config path, so a task is a pure function of its
date partition (no wall clock), and reruns are idempotent.

Imported by the DAG file at parse time, so only the standard library, jobs.config and
jobs.paths at the top: every job module (pyarrow, pandas, boto3, ...) is imported inside the
callable that needs it, on the worker, when the task runs.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from jobs.config import Config, load_config
from jobs.paths import join_key, planning_window, schedule_date, schedule_manifest_key

SCHEDULES_ASSET_NAME = "recrawl_schedules"
#: The day's Spark stages, in order: one DAG task each, or one ``plan_day`` task for all
#: (``airflow.spark_session``; :mod:`jobs.plan_day`).
SPARK_STAGES = ("update_state", "allocate", "build_schedule")


def target_uri(cfg: Config) -> str:
    """``publish.target`` as a URI: a local target becomes a ``file://`` URI."""
    target = cfg.publish.target.rstrip("/")
    return target if "://" in target else "file://" + os.path.abspath(target)


def schedules_uri(cfg: Config) -> str:
    """URI of the published schedules (the Airflow Asset publish updates): the target's
    ``schedules/`` prefix."""
    return join_key(target_uri(cfg), "schedules") + "/"


def logs_present(date: str, config_path: str | None = None) -> bool:
    from jobs import validate_logs

    return validate_logs.logs_present(load_config(config_path or None), date)


def validate(date: str, config_path: str | None = None) -> dict:
    from jobs import validate_logs

    return validate_logs.run(load_config(config_path or None), date)


def run_publish(cfg: Config, date: str) -> dict:
    """Publish the staged schedule of run date ``date`` (schedules/dt=D+1) to the target.

    Raises jobs.publish.PublishConflict when a concurrent publish of the day won."""
    from jobs import publish as publisher

    day = schedule_date(date)
    start, end = planning_window(date)
    p = cfg.publish
    result = publisher.publish(
        cfg.paths.table("schedules", day), p.target, day,
        {"run_date": date, "window": {"start_epoch_s": start, "end_epoch_s": end},
         "config": cfg.to_dict()},
        endpoint_url=p.endpoint_url or None, max_workers=p.max_workers, retries=p.retries,
        sse_kms_key_id=p.sse_kms_key_id or None, lock_lease_s=p.lock_lease_s,
        allow_insecure_endpoint=p.allow_insecure_endpoint)
    return result.as_dict() if hasattr(result, "as_dict") else vars(result)


def publish(date: str, config_path: str | None = None, outlet_events: Optional[Any] = None) -> dict:
    """The publish task; on success the schedules Asset gets an event whose ``extra`` names
    the day, its manifest and its totals (fleet-side DAGs read it from
    ``triggering_asset_events``)."""
    cfg = load_config(config_path or None)
    record = run_publish(cfg, date)
    if outlet_events is not None:
        from airflow.sdk import Asset

        day = schedule_date(date)
        outlet_events[Asset(name=SCHEDULES_ASSET_NAME, uri=schedules_uri(cfg))].extra = {
            "run_date": date, "schedule_date": day,
            "manifest": schedule_manifest_key(target_uri(cfg), day),
            "manifest_sha256": record.get("manifest_sha256"), "rows": record.get("rows"),
            "files": record.get("files")}
    return record


def run_verify(cfg: Config, date: str) -> dict:
    """Read back schedules/dt=D+1 and check it; raises jobs.verify.VerificationError."""
    from jobs import verify as verifier

    result = verifier.verify(cfg.publish.target, schedule_date(date),
                             endpoint_url=cfg.publish.endpoint_url or None)
    return result.as_dict() if hasattr(result, "as_dict") else vars(result)


def verify(date: str, config_path: str | None = None) -> dict:
    return run_verify(load_config(config_path or None), date)
