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
from jobs.paths import (join_key, planning_window, schedule_date, schedule_manifest_key,
                        schedule_report_key, shift_day)

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


REPORT_FILE = "report.html"


def report_path(cfg: Config, date: str) -> str:
    """Where the report task writes run date D's page under ``paths.root``:
    ``reports/dt=D/report.html``, beside ``metrics/dt=D``."""
    return f"{cfg.paths.table('reports', date)}/{REPORT_FILE}"


def run_report(cfg: Config, date: str) -> dict:
    """Write run date D's report page (``recrawl report``'s) beside the metrics and, with a
    ``publish.target``, beside the published schedules (:func:`jobs.paths.schedule_report_key`:
    in no day's manifest, so the fleet never sees it); compute the day's threshold alerts
    (:func:`jobs.core.alert_rules.threshold_alerts`). Idempotent: a rerun rewrites the page."""
    from jobs import metrics, report
    from jobs.core import alert_rules
    from jobs.fleet.schedule import filesystem_for
    from jobs.storage import make_dirs
    from jobs.objstore import open_store
    from jobs.partitions import MissingPartitionError
    from jobs.report_html import render

    doc = report.build(cfg, date, days=cfg.alerts.report_days)
    page = render(doc).encode("utf-8")
    local = report_path(cfg, date)
    fs, path = filesystem_for(local)
    make_dirs(fs, path.rsplit("/", 1)[0])
    with fs.open_output_stream(path) as fh:
        fh.write(page)
    published = None
    if cfg.publish.target:
        p = cfg.publish
        store, location = open_store(p.target, endpoint_url=p.endpoint_url or None,
                                     sse_kms_key_id=p.sse_kms_key_id or None)
        key = schedule_report_key(location.prefix, date)
        store.put_bytes(key, page, content_type="text/html; charset=utf-8")
        published = location.uri(key)
    earlier = []
    for k in range(1, cfg.alerts.median_days + 1):
        try:
            earlier.append(metrics.read(cfg, shift_day(date, -k)))
        except MissingPartitionError:
            continue
    lanes = doc["lanes"]
    total = lanes[lanes["lane"] == "total"]
    unused = float(total["unused"].iloc[0]) if len(total) else None
    alerts = alert_rules.threshold_alerts(date, doc["metrics"], earlier, unused, cfg.alerts)
    return {"report": local, "published": published, "alerts": alerts,
            "bytes": len(page)}


def report(date: str, config_path: str | None = None) -> dict:
    """The report task: the page, then each threshold alert through the notifier (a notifier
    that fails is logged with the alert; the published day stays published)."""
    from jobs import notify

    record = run_report(load_config(config_path or None), date)
    for alert in record["alerts"]:
        alert = {**alert, "schedule_date": schedule_date(date)}
        try:
            notify.send_alert(alert, config_path or None)
        except Exception:  # noqa: BLE001 -- send_alert logged the alert itself
            notify.log.exception("recrawl: could not deliver the %s alert", alert["check"])
    return record
