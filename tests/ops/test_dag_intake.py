"""The intake task in the DAG: with `intake.enabled` it runs after validate_logs and before the
first Spark stage that reads signals and host policy (update_state, or plan_day)."""
from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest

from tests.conftest import REPO


def _dag(tmp_path, monkeypatch, **airflow):
    from airflow.dag_processing.dagbag import DagBag

    toml = tmp_path / "intake.toml"
    lines = ["[intake]", "enabled = true", "[airflow]", "intake_timeout_s = 123.0"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in airflow.items()]
    toml.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("RECRAWL_CONFIG", str(toml))
    bag = DagBag(dag_folder=os.path.join(REPO, "dags"))
    assert bag.import_errors == {}
    return bag.dags["recrawl_daily"]


@pytest.mark.parametrize("session, stages", [
    ("stage", ["update_state", "allocate", "build_schedule"]),
    ("run", ["plan_day"]),
])
def test_intake_runs_before_the_state_update(airflow_db, tmp_path, monkeypatch, session, stages):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = _dag(tmp_path, monkeypatch, spark_session=session)
    assert [t.task_id for t in dag.topological_sort()] == [
        "wait_for_logs", "validate_logs", "intake", *stages, "publish", "verify", "report"]
    task = dag.get_task("intake")
    assert isinstance(task, SparkSubmitOperator)
    assert task.upstream_task_ids == {"validate_logs"}
    assert task.downstream_task_ids == {stages[0]}
    assert task.execution_timeout == timedelta(seconds=123.0)
    assert task.depends_on_past is True and "documents/dt=" in task.doc_md
    assert task.application.endswith(os.path.join("jobs", "intake.py"))
    assert task.application_args[:2] == ["--date", "{{ ds }}"]


def test_intake_is_off_by_default(airflow_db, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("RECRAWL_CONFIG", raising=False)
    dag = DagBag(dag_folder=os.path.join(REPO, "dags")).dags["recrawl_daily"]
    assert "intake" not in dag.task_ids


def test_the_command_documents_itself_and_refuses_a_missing_day_in_one_line(tmp_path):
    import subprocess
    import sys

    help_ = subprocess.run([sys.executable, "-m", "jobs.console", "intake", "--help"],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
    assert help_.returncode == 0 and help_.stdout.startswith("usage: recrawl intake ")
    for option in ("--date", "--config", "--set"):
        assert option in help_.stdout
    out = subprocess.run([sys.executable, "-m", "jobs.console", "intake", "--date",
                          "2026-11-29", "--set", f"paths.root={tmp_path}"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()[-1:]
    assert line.startswith("recrawl intake: error: SchemaError:") and "documents" in line
    assert "Traceback" not in out.stderr
