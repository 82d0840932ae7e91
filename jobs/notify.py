"""Alerts from the DAG: a failed run, or tomorrow's schedule not published in time.

Light on purpose (stdlib only at import): the DAG file imports this module for its callbacks,
and the DAG processor, the scheduler's callback runner and the triggerer (deadline alerts)
all import it.

Which notifier gets an alert (``[airflow]`` in the config):

1. ``airflow.notifier`` = ``package.module.callable``: that callable gets the alert dict
   (pluggable: PagerDuty, Slack SDK, ...);
2. otherwise, if the Airflow connection ``airflow.alert_conn_id`` (default ``recrawl_alerts``)
   exists, the alert is POSTed as JSON to its URL (the webhook);
3. otherwise it is logged (level ERROR, logger ``recrawl.alerts``).

The webhook connection: either its ``host`` is the whole URL
(``{"conn_type": "http", "host": "https://hooks.example.com/services/T/B/X"}``), or
``schema`` (http/https, default https), ``host``, ``port`` and ``extra.endpoint`` (the path)
make it up. ``extra.headers`` (a JSON object) is sent with the request, and a ``password``,
if set, as ``Authorization: Bearer <password>``.

An alert is a flat JSON object: ``kind`` (``dag_failed`` or ``schedule_deadline_missed``),
``dag_id``, ``run_id``, ``logical_date``, ``run_date``, ``schedule_date`` (the dt= the fleet
is waiting for), ``message``, plus kind-specific fields (``failed_tasks``, ``deadline``).
"""
from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from datetime import date, datetime
from typing import Any, Callable, Optional

from jobs.paths import schedule_date
from jobs.errors import WebhookError  # noqa: F401  (its home: jobs.errors)

log = logging.getLogger("recrawl.alerts")

WEBHOOK_TIMEOUT_S = 10.0
Notifier = Callable[[dict], None]


def log_notifier(alert: dict) -> None:
    """The default: one ERROR line with the alert as JSON."""
    log.error("recrawl alert %s: %s", alert.get("kind"), json.dumps(alert, sort_keys=True,
                                                                      default=str))


def webhook_url(conn: Any) -> str:
    """The URL a webhook connection points at (see the module doc)."""
    host = (conn.host or "").strip()
    if host.startswith(("http://", "https://")):
        return host
    if not host:
        raise WebhookError(f"connection {conn.conn_id!r} has no host")
    scheme = (conn.schema or "https").strip() or "https"
    port = f":{conn.port}" if conn.port else ""
    endpoint = str(_extra(conn).get("endpoint", "")).lstrip("/")
    return f"{scheme}://{host}{port}/{endpoint}"


def _extra(conn: Any) -> dict:
    extra = getattr(conn, "extra_dejson", None)
    if extra is None:
        raw = getattr(conn, "extra", None) or "{}"
        extra = json.loads(raw) if isinstance(raw, str) else dict(raw)
    return extra or {}


def post_json(url: str, alert: dict, headers: Optional[dict] = None,
              timeout_s: float = WEBHOOK_TIMEOUT_S) -> int:
    """POST ``alert`` as JSON; return the HTTP status, raise WebhookError on >= 400."""
    body = json.dumps(alert, sort_keys=True, default=str).encode("utf-8")
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "recrawl-alerts", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        raise WebhookError(f"webhook {url} answered {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise WebhookError(f"webhook {url} unreachable: {exc}") from exc


def webhook_notifier(conn: Any) -> Notifier:
    url = webhook_url(conn)
    headers = dict(_extra(conn).get("headers") or {})
    if conn.password:
        headers.setdefault("Authorization", f"Bearer {conn.password}")

    def send(alert: dict) -> None:
        post_json(url, alert, headers)
        log.info("recrawl alert %s sent to webhook connection %s", alert.get("kind"),
                 conn.conn_id)
    return send


def _get_connection(conn_id: str):
    """The Airflow connection, or None when it is not defined."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    except Exception as exc:  # noqa: BLE001 -- e.g. the task-sdk's "not found" error code
        if "CONNECTION_NOT_FOUND" in str(exc) or "not defined" in str(exc):
            return None
        raise


def _import(path: str) -> Notifier:
    module, _, name = path.rpartition(".")
    if not module:
        raise ValueError(f"airflow.notifier {path!r} is not package.module.callable")
    import importlib

    return getattr(importlib.import_module(module), name)


def notifier_for(cfg) -> Notifier:
    """The notifier the config selects (custom callable, webhook connection, or the log)."""
    if cfg.airflow.notifier:
        return _import(cfg.airflow.notifier)
    conn_id = cfg.airflow.alert_conn_id
    if conn_id:
        conn = _get_connection(conn_id)
        if conn is not None:
            return webhook_notifier(conn)
    return log_notifier


def send_alert(alert: dict, config_path: Optional[str] = None) -> None:
    """Deliver ``alert``; if the chosen notifier fails, log the alert and re-raise."""
    from jobs.config import load_config

    cfg = load_config(config_path or None)
    try:
        notifier_for(cfg)(alert)
    except Exception:
        log_notifier(alert)  # the alert is never lost from the logs
        raise


# --- the Airflow callbacks ------------------------------------------------------------------

def _iso(value: Any) -> Optional[str]:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _dates(logical: Any) -> tuple[Optional[str], Optional[str]]:
    """(run date D, schedule date D+1) from a logical date (datetime or ISO string)."""
    if logical is None:
        return None, None
    if isinstance(logical, str):
        logical = datetime.fromisoformat(logical.replace("Z", "+00:00"))
    day = logical.date() if isinstance(logical, datetime) else date.fromisoformat(str(logical)[:10])
    return day.isoformat(), schedule_date(day.isoformat())


def dag_failure_alert(context: dict) -> dict:
    """The alert for a failed DAG run, from Airflow's callback context."""
    dag_run = context.get("dag_run")
    dag_id = getattr(dag_run, "dag_id", None) or getattr(context.get("dag"), "dag_id", None)
    logical = getattr(dag_run, "logical_date", None)
    run_date, sched = _dates(logical)
    failed = []
    if dag_run is not None and hasattr(dag_run, "get_task_instances"):  # scheduler's DagRun
        try:
            failed = sorted(ti.task_id for ti in dag_run.get_task_instances(state=["failed"]))
        except Exception:  # noqa: BLE001 -- the alert matters more than the task list
            failed = []
    ti = context.get("ti") or context.get("task_instance")  # the task that failed the run
    if not failed and getattr(ti, "task_id", None):
        failed = [ti.task_id]
    reason = context.get("reason") or ""
    return {"kind": "dag_failed", "dag_id": dag_id, "run_id": getattr(dag_run, "run_id", None),
            "logical_date": _iso(logical), "run_date": run_date, "schedule_date": sched,
            "failed_tasks": failed, "reason": str(reason),
            "message": f"recrawl run for {run_date} FAILED ({', '.join(failed) or reason or '?'}); "
                       f"schedules/dt={sched} may not be published"}


def on_dag_failure(context: dict) -> None:
    """DAG ``on_failure_callback``: tell the notifier; never raise into Airflow."""
    alert = dag_failure_alert(context)
    try:
        send_alert(alert, os.environ.get("RECRAWL_CONFIG") or None)
    except Exception:  # noqa: BLE001 -- already logged by send_alert
        log.exception("recrawl: could not deliver the dag_failed alert")


def deadline_alert(context: dict, deadline_h: float) -> dict:
    """The alert for a missed publish deadline, from the deadline callback's context."""
    dag_run = context.get("dag_run") or {}
    deadline = context.get("deadline") or {}
    logical = dag_run.get("logical_date")
    run_date, sched = _dates(logical)
    return {"kind": "schedule_deadline_missed", "dag_id": dag_run.get("dag_id"),
            "run_id": dag_run.get("dag_run_id") or dag_run.get("run_id"),
            "logical_date": _iso(logical), "run_date": run_date, "schedule_date": sched,
            "deadline": _iso(deadline.get("deadline_time")), "deadline_h": deadline_h,
            "state": dag_run.get("state"),
            "message": f"schedules/dt={sched} is not published {deadline_h:g} h after {run_date} "
                       f"00:00 UTC (run state {dag_run.get('state')}); the fleet runs out of "
                       f"rows at {sched} 00:00 UTC"}


async def on_publish_deadline_missed(context: dict, deadline_h: float = 0.0,
                                     config_path: str = "") -> dict:
    """DeadlineAlert callback (runs in the triggerer): the run has not succeeded
    ``deadline_h`` hours after its logical date, i.e. publish has not happened yet."""
    import asyncio

    alert = deadline_alert(context, deadline_h)
    await asyncio.to_thread(send_alert, alert, config_path or None)
    return alert
