"""Airflow operations (issue 10 §3): timeouts, failure notifier, publish deadline alert, the
schedules Asset, doc_md, and a DAG file that parses without the heavy job modules."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import REPO

DAG_FILE = os.path.join(REPO, "dags", "recrawl_daily.py")
TASKS = ["wait_for_logs", "validate_logs", "update_state", "allocate", "build_schedule",
         "publish", "verify", "report"]
HEAVY = ("numpy", "pandas", "pyarrow", "pyspark", "scipy", "boto3", "botocore", "matplotlib")
LIGHT_JOBS = {"jobs", "jobs.airflow_dag", "jobs.config", "jobs.dag_tasks", "jobs.errors",
              "jobs.notify", "jobs.paths"}  # stdlib only


class Webhook:
    """A real HTTP server on 127.0.0.1 that records the JSON it is POSTed."""

    def __init__(self, status: int = 200):
        self.requests: list[dict] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hook.requests.append({"path": self.path, "headers": dict(self.headers),
                                      "json": json.loads(body)})
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def kinds(self):
        return [r["json"]["kind"] for r in self.requests]


def _write_toml(path, **sections):
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# --- parsing stays wiring -------------------------------------------------------------------

def test_dag_file_parses_without_heavy_or_stage_modules():
    """A fresh interpreter imports the DAG file: no numpy/pandas/pyarrow/pyspark, no job stage."""
    code = (
        "import json, sys, time, importlib.util\n"
        "t = time.perf_counter()\n"
        f"spec = importlib.util.spec_from_file_location('recrawl_daily', {DAG_FILE!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "dt = time.perf_counter() - t\n"
        "print(json.dumps({'seconds': dt, 'modules': sorted(sys.modules),"
        " 'tasks': sorted(mod.dag.task_ids)}))\n")
    env = dict(os.environ)
    env.pop("RECRAWL_CONFIG", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    modules = report["modules"]
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    ours = {m for m in modules if m == "jobs" or m.startswith("jobs.")}
    assert ours == LIGHT_JOBS, ours
    assert sorted(report["tasks"]) == sorted(TASKS)
    print(f"\nDAG parse: {report['seconds']:.2f} s, {len(modules)} modules, jobs: {sorted(ours)}")


def test_a_relative_recrawl_config_is_refused_at_parse_time(airflow_db, tmp_path, monkeypatch):
    """The DAG processor and the workers run in directories of their own: a relative
    $RECRAWL_CONFIG would be two different files, so the parse names it and fails."""
    from airflow.dag_processing.dagbag import DagBag

    _write_toml(tmp_path / "ops.toml", budget={"daily_fetches": 7})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECRAWL_CONFIG", "ops.toml")
    bag = DagBag(dag_folder=os.path.join(REPO, "dags"))
    (error,) = bag.import_errors.values()
    assert "RECRAWL_CONFIG 'ops.toml' is a relative path" in error
    assert "recrawl_daily" not in bag.dags
    monkeypatch.setenv("RECRAWL_CONFIG", str(tmp_path / "ops.toml"))
    bag = DagBag(dag_folder=os.path.join(REPO, "dags"))
    assert bag.import_errors == {} and "recrawl_daily" in bag.dags


# --- the wiring the DagBag sees ---------------------------------------------------------------

TIMEOUTS = {"poke_timeout_s": 61.0, "validate_logs_timeout_s": 62.0,
            "update_state_timeout_s": 63.0, "allocate_timeout_s": 64.0,
            "build_schedule_timeout_s": 65.0, "publish_timeout_s": 66.0, "verify_timeout_s": 67.0,
            "report_timeout_s": 68.0}


def test_every_task_has_its_timeout_doc_and_the_dag_its_alerts(airflow_db, tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import Asset
    from airflow.sdk.definitions.deadline import DagRunLogicalDateDeadline
    from airflow.serialization.serialized_objects import DagSerialization

    from jobs import notify

    toml = _write_toml(tmp_path / "ops.toml",
                       publish={"target": "s3://fleet-bucket/prod"},
                       airflow={**TIMEOUTS, "retries": 4, "publish_deadline_h": 20.5})
    monkeypatch.setenv("RECRAWL_CONFIG", toml)
    bag = DagBag(dag_folder=os.path.join(REPO, "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["recrawl_daily"]
    key = {"wait_for_logs": "poke_timeout_s"}
    for task in dag.tasks:
        want = TIMEOUTS[key.get(task.task_id, f"{task.task_id}_timeout_s")]
        assert task.execution_timeout == timedelta(seconds=want), task.task_id
        assert task.doc_md and len(task.doc_md) > 40, task.task_id
        assert task.retries == 4 and task.depends_on_past is True, task.task_id
    assert dag.max_active_runs == 1
    publish = dag.get_task("publish")
    assert publish.outlets == [Asset(name="recrawl_schedules", uri="s3://fleet-bucket/prod/schedules/")]
    assert all(not dag.get_task(t).outlets for t in TASKS if t != "publish")
    callbacks = dag.on_failure_callback
    assert notify.on_dag_failure in (callbacks if isinstance(callbacks, list) else [callbacks])
    alerts = dag.deadline if isinstance(dag.deadline, list) else [dag.deadline]
    assert len(alerts) == 1
    alert = alerts[0]
    assert isinstance(alert.reference, DagRunLogicalDateDeadline)
    assert alert.interval == timedelta(hours=20.5)
    assert alert.callback.path == "jobs.notify.on_publish_deadline_missed"
    assert alert.callback.kwargs == {"deadline_h": 20.5, "config_path": toml}
    # what the scheduler stores: the deadline and the asset survive serialization
    serialized = json.dumps(DagSerialization.to_dict(dag), default=str)
    assert "on_publish_deadline_missed" in serialized and "fleet-bucket" in serialized


# --- notifiers -----------------------------------------------------------------------------

ALERT = {"kind": "dag_failed", "dag_id": "recrawl_daily", "run_date": "2026-11-20",
         "schedule_date": "2026-11-21", "message": "test"}


def test_log_notifier_is_the_default(monkeypatch):
    from jobs import notify

    monkeypatch.delenv("AIRFLOW_CONN_RECRAWL_ALERTS", raising=False)
    # A handler on the logger itself: once Airflow has configured logging, records may not
    # propagate to the root logger where caplog listens.
    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.ERROR)
    handler.emit = records.append
    logger = logging.getLogger("recrawl.alerts")
    logger.addHandler(handler)
    try:
        notify.send_alert(ALERT)
    finally:
        logger.removeHandler(handler)
    assert any("dag_failed" in r.getMessage() and "2026-11-21" in r.getMessage()
               for r in records)


@pytest.mark.parametrize("form", ["url_in_host", "fields"])
def test_webhook_connection_gets_the_alert(monkeypatch, form):
    from jobs import notify

    with Webhook() as hook:
        port = hook.server.server_port
        conn = ({"conn_type": "http", "host": f"{hook.url}/hooks/recrawl", "password": "s3cret"}
                if form == "url_in_host" else
                {"conn_type": "http", "schema": "http", "host": "127.0.0.1", "port": port,
                 "password": "s3cret",
                 "extra": {"endpoint": "hooks/recrawl", "headers": {"X-Team": "crawl"}}})
        monkeypatch.setenv("AIRFLOW_CONN_RECRAWL_ALERTS", json.dumps(conn))
        notify.send_alert(ALERT)
    assert len(hook.requests) == 1
    req = hook.requests[0]
    assert req["path"] == "/hooks/recrawl" and req["json"] == ALERT
    assert req["headers"]["Authorization"] == "Bearer s3cret"
    assert req["headers"]["Content-Type"] == "application/json"
    if form == "fields":
        assert req["headers"]["X-Team"] == "crawl"


@pytest.fixture
def airflow_logging():
    """Airflow replaces the root logger's handlers when first imported; importing it in the
    setup phase leaves the call phase's capture handler (caplog) in place."""
    import airflow.sdk  # noqa: F401


def test_webhook_error_is_raised_and_the_alert_still_logged(monkeypatch, airflow_logging,
                                                            caplog):
    from jobs import notify

    with Webhook(status=500) as hook:
        monkeypatch.setenv("AIRFLOW_CONN_RECRAWL_ALERTS",
                           json.dumps({"conn_type": "http", "host": hook.url}))
        with caplog.at_level(logging.ERROR, logger="recrawl.alerts"):
            with pytest.raises(notify.WebhookError, match="500"):
                notify.send_alert(ALERT)
    assert hook.kinds() == ["dag_failed"]
    assert any("dag_failed" in r.getMessage() for r in caplog.records)


RECEIVED: list = []


def collecting_notifier(alert: dict) -> None:
    RECEIVED.append(alert)


def test_custom_notifier_by_dotted_path(tmp_path):
    from jobs import notify

    RECEIVED.clear()
    toml = _write_toml(tmp_path / "n.toml",
                       airflow={"notifier": "tests.ops.test_dag_ops.collecting_notifier"})
    notify.send_alert(ALERT, toml)
    assert RECEIVED == [ALERT]


# --- real DAG runs: a failure and a missed deadline; a publish and its Asset event ------------

# The publish target of every DAG run in this test session (tests/ops/test_dag.py's too): one asset
# name must keep one URI while no scheduler orphans the old ones.
TARGET = "s3://sched/daily"

def _dag_from_bag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.path.join(REPO, "dags"))
    assert bag.import_errors == {}
    return bag.dags["recrawl_daily"]


def test_failed_run_calls_the_webhook_and_the_missed_deadline_alerts(airflow_db, tmp_path,
                                                                     monkeypatch):
    """validate_logs fails on a fetch-log file with the wrong schema (no retries): the DAG's
    failure callback POSTs to the webhook; the run's Deadline row (D 00:00 + 1 h, long past)
    is then handled as the scheduler does and its callback run as the triggerer does."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from airflow.models.deadline import Deadline
    from airflow.triggers.callback import CallbackTrigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    run_date = "2026-11-20"
    root = tmp_path / "data"
    logs = root / "fetch_logs" / f"dt={run_date}"
    logs.mkdir(parents=True)
    pq.write_table(pa.table({"not_a_fetch_log": [1, 2, 3]}), logs / "part-0.parquet")
    toml = _write_toml(tmp_path / "fail.toml", paths={"root": str(root)},
                       publish={"target": TARGET},
                       airflow={"retries": 0, "publish_deadline_h": 1.0})
    with Webhook() as hook:
        monkeypatch.setenv("RECRAWL_CONFIG", toml)
        monkeypatch.setenv("AIRFLOW_CONN_RECRAWL_ALERTS",
                           json.dumps({"conn_type": "http", "host": f"{hook.url}/alerts"}))
        dag = _dag_from_bag()
        logical = datetime.fromisoformat(run_date).replace(tzinfo=timezone.utc)
        # Airflow's own DAG.test with the deadline alert kept (RecrawlDAG.test drops it to
        # dodge an Airflow 3.3.2 crash that only a *successful* test run hits).
        from airflow.sdk import DAG

        dag_run = DAG.test(dag, logical_date=logical)
        assert "failed" in str(dag_run.state).lower()
        assert hook.kinds() == ["dag_failed"], hook.requests
        failed = hook.requests[0]["json"]
        assert failed["run_date"] == run_date and failed["schedule_date"] == "2026-11-21"
        assert failed["failed_tasks"] == ["validate_logs"] and failed["dag_id"] == "recrawl_daily"

        with create_session() as session:
            deadlines = session.scalars(
                select(Deadline).where(Deadline.dagrun_id == dag_run.id)).all()
            assert len(deadlines) == 1
            deadline = deadlines[0]
            assert deadline.deadline_time == logical + timedelta(hours=1)
            assert deadline.deadline_time < datetime.now(timezone.utc)  # missed
            deadline.handle_miss(session)
            data = dict(deadline.callback.data)
        assert data["path"] == "jobs.notify.on_publish_deadline_missed"

        async def run_trigger():
            trigger = CallbackTrigger(callback_path=data["path"],
                                      callback_kwargs=dict(data["kwargs"]))
            return [event.payload async for event in trigger.run()]

        events = asyncio.run(run_trigger())
        assert str(events[-1]["state"]).lower().endswith("success"), events
    assert hook.kinds() == ["dag_failed", "schedule_deadline_missed"]
    missed = hook.requests[1]["json"]
    assert missed["schedule_date"] == "2026-11-21" and missed["deadline_h"] == 1.0
    assert missed["run_date"] == run_date and missed["dag_id"] == "recrawl_daily"
    assert missed["state"] == "failed"


def test_publish_updates_the_schedules_asset(s3_server, airflow_db, tmp_path, monkeypatch):
    """A real run whose publish task uploads a staged schedule to S3 (moto on loopback; the
    other tasks marked success): the Asset event carries the day and its manifest."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from jobs.publish import ensure_bucket
    from tests.s3server import sample_schedule, stage_schedule

    run_date, day = "2026-11-12", "2026-11-13"
    root = tmp_path / "data"
    stage_schedule(sample_schedule(day=day), str(root / "schedules" / f"dt={day}"))
    s3 = s3_server
    ensure_bucket(s3.endpoint_url, "sched")
    toml = _write_toml(tmp_path / "ok.toml", paths={"root": str(root)},
                       publish={"target": TARGET, "endpoint_url": s3.endpoint_url},
                       airflow={"retries": 0})
    monkeypatch.setenv("RECRAWL_CONFIG", toml)
    monkeypatch.delenv("AIRFLOW_CONN_RECRAWL_ALERTS", raising=False)
    dag = _dag_from_bag()
    logical = datetime.fromisoformat(run_date).replace(tzinfo=timezone.utc)
    dag_run = dag.test(logical_date=logical,
                       mark_success_pattern="wait_for_logs|validate_logs|update_state"
                                            "|allocate|build_schedule|verify|report")
    assert "success" in str(dag_run.state).lower()
    s3.client().head_object(Bucket="sched", Key=f"daily/schedules/dt={day}/_manifest.json")
    uri = f"{TARGET}/schedules"
    with create_session() as session:
        asset = session.scalars(select(AssetModel).where(AssetModel.uri == uri)).one()
        assert asset.name == "recrawl_schedules"
        events = session.scalars(select(AssetEvent).where(AssetEvent.asset_id == asset.id)
                                 .order_by(AssetEvent.id)).all()
        extra = events[-1].extra
    assert extra["run_date"] == run_date and extra["schedule_date"] == day
    assert extra["manifest"] == f"{uri}/dt={day}/_manifest.json"
    assert extra["rows"] == 600 and extra["files"] >= 1 and len(extra["manifest_sha256"]) == 64
