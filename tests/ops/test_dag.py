"""The DAG parses, and one real DAG run publishes a sound schedule to S3 over HTTP.

The DAG run (``dag.test()``: three spark-submits and S3 over HTTP) is the end-to-end tier
(``pytest -m e2e``); it runs once. Its rerun check replays the same tasks in this process
(the session's Spark, the same config file, the same task callables), so the whole chain
update_state -> allocate -> build_schedule -> publish -> verify on an already published day is
still checked to leave every object as it was, without a second DAG run.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO, run_dag_day_in_process

RUN_DATE = "2026-11-05"
BUDGET = 300


def _dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=os.path.join(REPO, "dags"))


def test_dagbag_has_no_import_errors(airflow_db):
    bag = _dagbag()
    assert bag.import_errors == {}
    dag = bag.dags["recrawl_daily"]
    assert [t.task_id for t in dag.topological_sort()] == [
        "wait_for_logs", "validate_logs", "update_state", "allocate", "build_schedule",
        "publish", "verify", "report"]
    assert dag.catchup is True and dag.schedule == "@daily"
    assert str(dag.timetable.timezone) in ("UTC", "Timezone('UTC')")
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    spark_tasks = [t for t in dag.tasks if isinstance(t, SparkSubmitOperator)]
    assert {t.task_id for t in spark_tasks} == {"update_state", "allocate", "build_schedule"}


@pytest.fixture(scope="module")
def published_day(s3_server, airflow_db, spark, tmp_path_factory):
    from jobs import rebuild_state
    from jobs.config import load_config
    from lab.tools.generate_sample import generate_sample
    from jobs.publish import ensure_bucket

    work = tmp_path_factory.mktemp("dagrun")
    root = work / "data"
    generate_sample(str(root), urls=800, hosts=16, days=4, end_date=RUN_DATE, seed=3)
    s3 = s3_server
    ensure_bucket(s3.endpoint_url, "sched")
    overrides = [f"paths.root={root}", "publish.target=s3://sched/daily",
                 f"publish.endpoint_url={s3.endpoint_url}", "spark.master=local[2]",
                 f"budget.daily_fetches={BUDGET}", "spark.state_buckets=2",
                 "schedule.n_shards=4", "spark.settings.spark.sql.shuffle.partitions=4"]
    cfg = load_config(None, overrides)
    rebuild_state.run(cfg, "2026-11-02", "2026-11-04", spark)
    toml = work / "recrawl.toml"
    from jobs.config import toml_text
    toml.write_text(toml_text(cfg))
    os.environ["RECRAWL_CONFIG"] = str(toml)
    os.environ["AIRFLOW_CONN_RECRAWL_SPARK"] = json.dumps({"conn_type": "spark",
                                                          "host": "local[2]"})
    dag = _dagbag().dags["recrawl_daily"]
    logical = datetime.fromisoformat(RUN_DATE).replace(tzinfo=timezone.utc)

    def listing():
        objects = s3.client().list_objects_v2(Bucket="sched", Prefix="daily/")["Contents"]
        return {o["Key"]: (o["ETag"], o["Size"]) for o in objects}

    dag_run = dag.test(logical_date=logical)
    assert str(dag_run.state) in ("success", "DagRunState.SUCCESS")
    first = listing()
    from jobs.verify import read_schedule
    schedule = read_schedule(cfg.publish.target, "2026-11-06", s3.endpoint_url)
    manifest = json.loads(s3.client().get_object(
        Bucket="sched", Key="daily/schedules/dt=2026-11-06/_manifest.json")["Body"].read())
    report_objects = {k: v for k, v in listing().items() if "/_reports/" in k}
    rerun = run_dag_day_in_process(str(toml), RUN_DATE, spark, report=False)
    second = listing()
    yield {"cfg": cfg, "root": root, "schedule": schedule, "first": first,
           "second": second, "manifest": manifest, "rerun": rerun,
           "report_objects": report_objects,
           "report_html": s3.client().get_object(
               Bucket="sched", Key=f"daily/schedules/_reports/dt={RUN_DATE}/report.html"
           )["Body"].read().decode()}


@pytest.mark.e2e
def test_rerun_leaves_identical_objects(published_day):
    assert published_day["first"] == published_day["second"]
    assert any(k.endswith("_manifest.json") for k in published_day["first"])
    # The rerun rebuilt the day from state on and found every data file already published.
    rerun = published_day["rerun"]
    assert rerun["uploaded"] == [] and rerun["deleted"] == [] and len(rerun["skipped"]) > 0


@pytest.mark.e2e
def test_schedule_respects_budget_and_crawl_delay(published_day):
    sched = published_day["schedule"]
    assert 0 < len(sched) <= BUDGET
    assert published_day["manifest"]["totals"]["rows"] == len(sched)
    policy = pd.read_parquet(published_day["root"] / "host_policy").set_index("host")
    for host, g in sched.groupby("host"):
        t = np.sort(g.not_before.to_numpy().astype("datetime64[us]").astype(np.int64)) / 1e6
        if len(t) > 1:
            assert np.diff(t).min() >= policy.loc[host, "crawl_delay_s"] - 1e-6, host
        cap = policy.loc[host, "max_fetches_per_day"]
        assert pd.isna(cap) or len(g) <= cap
    window0 = pd.Timestamp("2026-11-06", tz="UTC")
    assert sched.not_before.min() >= window0
    assert sched.not_before.max() < window0 + pd.Timedelta(days=1)


@pytest.mark.e2e
def test_headers_come_from_stored_validators(published_day):
    sched = published_day["schedule"]
    state = pd.read_parquet(published_day["root"] / "state" / f"dt={RUN_DATE}").set_index("url")
    cond = sched[sched.method == "conditional"]
    assert len(cond) > 0
    for row in cond.itertuples():
        stored = state.loc[row.url]
        assert row.if_none_match in (None, stored.etag) or pd.isna(row.if_none_match)
        assert row.if_modified_since in (None, stored.last_modified) or pd.isna(row.if_modified_since)
        assert not (pd.isna(row.if_none_match) and pd.isna(row.if_modified_since))
    with_etag = cond[cond.if_none_match.notna()]
    assert (with_etag.if_none_match.to_numpy()
            == state.loc[with_etag.url, "etag"].to_numpy()).all()


@pytest.mark.e2e
def test_report_task_writes_the_page_beside_metrics_and_schedules(published_day):
    """The DAG's report task, after verify: the page under paths.root beside metrics/dt=D and
    beside the published days (schedules/_reports/, in no manifest), the same page both."""
    local = published_day["root"] / "reports" / f"dt={RUN_DATE}" / "report.html"
    page = local.read_text()
    assert page.startswith("<!doctype html>") and f"run {RUN_DATE}" in page
    assert published_day["report_html"] == page
    assert list(published_day["report_objects"]) == [
        f"daily/schedules/_reports/dt={RUN_DATE}/report.html"]
    listed = {f["key"] for f in published_day["manifest"]["files"]}
    assert not any("report" in k for k in listed)
    # a rerun of the task rewrites the same page (no clock on it)
    from jobs import dag_tasks
    record = dag_tasks.run_report(published_day["cfg"], RUN_DATE)
    assert record["bytes"] == len(page.encode()) and local.read_text() == page
