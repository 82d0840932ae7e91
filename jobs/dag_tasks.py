"""The callables the DAG's Python tasks run: thin wrappers over the jobs.

Each takes the logical date and the config path, so a task is a pure function of its
date partition (no wall clock), and reruns are idempotent.
"""
from __future__ import annotations

from jobs import validate_logs
from jobs.build_schedule import schedule_date
from jobs.config import load_config


def logs_present(date: str, config_path: str | None = None) -> bool:
    return validate_logs.logs_present(load_config(config_path or None), date)


def validate(date: str, config_path: str | None = None) -> dict:
    return validate_logs.run(load_config(config_path or None), date)


def publish(date: str, config_path: str | None = None) -> dict:
    from jobs import publish as publisher
    from jobs.allocate import planning_window

    cfg = load_config(config_path or None)
    day = schedule_date(date)
    start, end = planning_window(date)
    result = publisher.publish(
        cfg.paths.table("schedules", day), cfg.publish.target, day,
        {"run_date": date, "window": {"start_epoch_s": start, "end_epoch_s": end},
         "config": cfg.to_dict()},
        endpoint_url=cfg.publish.endpoint_url or None, max_workers=cfg.publish.max_workers,
        retries=cfg.publish.retries)
    return result.as_dict() if hasattr(result, "as_dict") else vars(result)


def verify(date: str, config_path: str | None = None) -> dict:
    from jobs import verify as verifier

    cfg = load_config(config_path or None)
    result = verifier.verify(cfg.publish.target, schedule_date(date),
                             endpoint_url=cfg.publish.endpoint_url or None)
    return result.as_dict() if hasattr(result, "as_dict") else vars(result)
