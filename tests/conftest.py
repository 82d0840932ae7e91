"""Shared fixtures: one real local Spark session for the whole run, sample data roots.

Two tiers (pyproject.toml registers the marker; the default run deselects ``e2e``): a test
that needs a real Spark session or the Airflow metadata database is end-to-end by that fact
(:data:`E2E_FIXTURES`), and so is each test marked ``e2e`` by hand (subprocess fault
injection, the backtest, the cluster). Everything else is the fast tier.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# spark-submit (used by the DAG's SparkSubmitOperator) lives next to the interpreter.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
# Airflow reads its settings once, at first import: point it at a throwaway home now.
_AIRFLOW_HOME = tempfile.mkdtemp(prefix="recrawl-airflow-")
os.environ.update({
    "AIRFLOW_HOME": _AIRFLOW_HOME,
    "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(REPO, "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_AIRFLOW_HOME}/airflow.db",
})
# Executors must import the project too.
os.environ["PYTHONPATH"] = REPO + (os.pathsep + os.environ["PYTHONPATH"]
                                   if os.environ.get("PYTHONPATH") else "")


E2E_FIXTURES = frozenset({"spark", "airflow_db", "demo_run"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if E2E_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.e2e)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(scope_of(item.nodeid), len(rank)))  # stable


# Parallel runs (infra/test.sh, pytest-xdist): a file's tests go to one worker together, so
# its module fixtures are built once; files that share a costly session fixture go together.
# The longest units of work start first (by module, the e2e tier in one process on 2 cores:
# 100-406 s each, lab/notes/benchmarks-log.md), so no long file is left to run alone at the end.
SHARED_SCOPE = {"tests/ops/test_report.py": "tests/ops/test_demo.py"}  # demo_run
LONGEST_FIRST = ("tests/stages/test_state_safety.py", "tests/lab/test_backtest.py",
                 "tests/ops/test_operator.py", "tests/ops/test_demo.py",
                 "tests/ops/test_cluster.py", "tests/ops/test_dag.py",
                 "tests/ops/test_publish_concurrency.py", "tests/stages/test_allocate_spark.py",
                 "tests/stages/test_stage_safety.py", "tests/stages/test_update_state_spark.py")


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the file it shares a fixture with."""
    path = nodeid.split("::", 1)[0]
    return SHARED_SCOPE.get(path, path)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return scope_of(nodeid)

    config.option.loadscopereorder = False  # keep the collection's order: LONGEST_FIRST
    return FileScheduling(config, log)


@pytest.fixture(scope="session")
def spark():
    from jobs.config import load_config
    from jobs.spark_session import get_spark

    # One session serves the whole e2e tier (~100 tests): its driver ran out of heap to
    # broadcast a tiny table in the tier's last module at Spark's default 1g (CI of e701b23),
    # so a larger heap and a short history of retained SQL executions.
    session = get_spark(load_config(None, ["spark.master=local[2]",
                                           "spark.settings.spark.sql.shuffle.partitions=4",
                                           "spark.settings.spark.driver.memory=2g",
                                           "spark.settings.spark.sql.ui.retainedExecutions=50"]),
                        "tests")
    yield session
    session.stop()
    # py4j logs from finalizers at interpreter exit, after pytest has closed the streams.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


def make_config(root, *overrides):
    from jobs.config import load_config

    return load_config(None, [f"paths.root={root}", "spark.master=local[2]",
                              "spark.state_buckets=2", "schedule.n_shards=4", *overrides])


def run_dag_day_in_process(config_path: str, date: str, spark, report: bool = True) -> dict:
    """The daily DAG's tasks for ``date`` in its order, as its workers run them: the Python
    tasks through their callables, the Spark stages through ``jobs.plan_day.run`` with the
    config file their spark-submit gets, on this test session's Spark instead of a new JVM.
    Gives the publish task's record."""
    from jobs import dag_tasks, plan_day
    from jobs.config import load_config

    assert dag_tasks.logs_present(date, config_path)
    dag_tasks.validate(date, config_path)
    plan_day.run(load_config(config_path), date, spark)
    published = dag_tasks.publish(date, config_path)
    dag_tasks.verify(date, config_path)
    if report:
        dag_tasks.report(date, config_path)
    return published


@pytest.fixture(scope="session")
def airflow_db():
    """A migrated SQLite metadata database for real DAG runs."""
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                   capture_output=True, env=dict(os.environ))
    return os.environ["AIRFLOW_HOME"]


@pytest.fixture(scope="session")
def moto_server():
    """The test session's one loopback S3 server (moto, writes serialised); modules take it
    through :func:`s3_server`."""
    from tests.s3server import MotoS3Server

    with MotoS3Server() as server:
        yield server


@pytest.fixture(scope="module")
def s3_server(moto_server):
    """The shared S3 server, emptied for this module, with loopback-only dummy credentials
    set while the module runs."""
    from tests.s3server import dummy_aws_env

    moto_server.reset()
    with dummy_aws_env():
        yield moto_server


DEMO_RUN_DATE = "2026-11-29"
DEMO_ARGS = ("--urls", "1500", "--hosts", "24", "--days", "7", "--plan-days", "3",
             "--date", DEMO_RUN_DATE,
             "--set", "budget.daily_fetches=600", "--set", "audit.sample_rate=0.2",
             "--set", "spark.state_buckets=2", "--set", "schedule.n_shards=4",
             "--set", "spark.settings.spark.sql.shuffle.partitions=4",
             # an alert the days will raise: the report task's threshold alerts reach the log
             "--set", "alerts.freshness_floor=0.99")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """One run of the README's demo (`python -m lab.tools.demo`, small web, 3 days executed
    by the simulated fleet) in its own work directory and loopback S3 port; the S3 server is
    stopped after the session. Gives the summary's text and lines, the work directory and
    the printed next commands."""
    import socket

    work = tmp_path_factory.mktemp("demo")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHON": sys.executable}
    cmd = [sys.executable, "-m", "lab.tools.demo", "--workdir", str(work / "demo"),
           "--port", str(port), *DEMO_ARGS]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=3600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        lines = proc.stdout.splitlines()
        start = lines.index("Next commands (run them as printed; the first once per shell):")
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("Stop the local"))
        yield {"stdout": proc.stdout, "lines": lines, "workdir": work / "demo",
               "commands": [x.strip() for x in lines[start + 1:end]], "port": port,
               "run_date": DEMO_RUN_DATE}
    finally:
        subprocess.run(["bash", os.path.join(REPO, "infra", "local_s3.sh"), "stop", str(port)],
                       env=env, capture_output=True)


@pytest.fixture(scope="module")
def s3(s3_server):
    """The shared S3 server under the short name the publish, verify and fleet tests use."""
    return s3_server
