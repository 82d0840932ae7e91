"""End-to-end tier (``pytest -m e2e``): the real DAG on a real Spark standalone cluster.

``test_e2e_*`` start a master and two workers (``bash infra/cluster.sh start``: real JVMs on
127.0.0.1 from the venv's pyspark), point the ``recrawl_spark`` connection at
``spark://127.0.0.1:PORT``, build the versioned artefact (``python -m jobs.artefact``) and run
the real DAG for two consecutive dates through ``SparkSubmitOperator``, publishing to moto over
HTTP, with ``airflow.spark_session = run`` (one spark-submit, ``plan-day``, per date); the same
two dates run on ``local[2]`` from the checkout in another data root, the DAG's tasks one by one
in this process (the test session's Spark, so no JVM starts for the reference). The
published objects (shards, manifest but its ``extra`` = the run's config) and the staged shards
must be identical byte for byte; every Spark-written table partition identical in its page bytes
and rows, its footer up to parquet-mr's JVM-dependent encoding-set order (``_parquet_digest``).
A probe application submitted the same way shows where the executors' code came from.

The other tests here render the spark-submit commands the operator builds for a YARN and a
standalone connection (no worker paths, the artefact as ``--py-files``) without running them.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import REPO, run_dag_day_in_process
from tests.s3server import patched_env

D0, D1, D2 = "2026-11-18", "2026-11-19", "2026-11-20"
URLS, HOSTS, BUDGET = 300, 8, 120
SHUFFLE = "4"  # the cluster's spark-defaults.conf value; the local run sets the same
VENV = os.path.dirname(os.path.dirname(sys.executable))
CLUSTER_PYTHON = "/opt/recrawl/venv/bin/python"  # a path on the cluster's nodes (render tests)
# airflow.retries=0: a failed task fails the run now instead of waiting retry_delay_s.
# The default config otherwise, audit lane included.
BASE = ["spark.state_buckets=2", "schedule.n_shards=4", f"budget.daily_fetches={BUDGET}",
        "airflow.retries=0"]


def _dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=os.path.join(REPO, "dags"))


def _write_config(path: Path, overrides: list[str]):
    from jobs.config import load_config
    from jobs.config import toml_text

    cfg = load_config(None, overrides)
    path.write_text(toml_text(cfg))
    return cfg


@pytest.fixture(scope="module")
def artefact(tmp_path_factory):
    from jobs import artefact as build

    out = tmp_path_factory.mktemp("artefact")
    info = build.build(str(out))
    assert Path(info["zip"]).name == f"recrawl_jobs-{build.version()}.zip"
    return info


# --- rendered spark-submit commands -------------------------------------------------------

def _render(airflow_db, tmp_path, monkeypatch, conn: dict, overrides: list[str]):
    config = tmp_path / "recrawl.toml"
    _write_config(config, overrides)
    monkeypatch.setenv("RECRAWL_CONFIG", str(config))
    monkeypatch.setenv("AIRFLOW_CONN_RECRAWL_SPARK", json.dumps(conn))
    task = _dagbag().dags["recrawl_daily"].get_task("update_state")
    hook = task._get_hook()
    cmd = hook._build_spark_submit_command(task.application)
    print("\n" + " ".join(cmd))
    return task, hook, cmd


def _assert_no_worker_paths(cmd: list[str], hook) -> None:
    text = " ".join(cmd)
    venv = os.path.dirname(os.path.dirname(sys.executable))
    for path in (REPO, venv, sys.executable, os.environ.get("PYSPARK_PYTHON") or sys.executable):
        assert path not in text, (path, text)
    assert "PYTHONPATH" not in text and "appMasterEnv" not in text and "driverEnv" not in text
    # embedded defaults never reach a cluster: its spark-defaults.conf decides
    for key in ("spark.sql.shuffle.partitions", "spark.ui.enabled", "spark.ui.showConsoleProgress"):
        assert key not in text, key
    assert hook._env is None  # spark-submit gets no environment of ours either


@pytest.mark.parametrize("conn, master", [
    ({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster", "queue": "recrawl"}},
     "yarn"),
    ({"conn_type": "spark", "host": "spark://127.0.0.1:7077"}, "spark://127.0.0.1:7077"),
], ids=["yarn", "standalone"])
def test_rendered_cluster_command_ships_only_the_artefact(airflow_db, tmp_path, monkeypatch,
                                                          artefact, conn, master):
    task, hook, cmd = _render(airflow_db, tmp_path, monkeypatch, conn, BASE + [
        f"airflow.py_files={artefact['zip']}", f"spark.python={CLUSTER_PYTHON}",
        "spark.cluster_settings.spark.sql.adaptive.enabled=true"])
    _assert_no_worker_paths(cmd, hook)
    assert cmd[cmd.index("--master") + 1] == master
    assert cmd[cmd.index("--py-files") + 1] == artefact["zip"]
    app = cmd.index(artefact["entry"])  # the artefact's entry is the application
    assert cmd[app + 1:app + 3] == ["update-state", "--date"]
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert sorted(confs) == sorted([f"spark.pyspark.python={CLUSTER_PYTHON}",
                                    "spark.sql.adaptive.enabled=true"])


def test_one_session_per_run_submits_plan_day_from_the_artefact(airflow_db, tmp_path,
                                                                monkeypatch, artefact):
    config = tmp_path / "recrawl.toml"
    _write_config(config, BASE + [f"airflow.py_files={artefact['zip']}",
                                  "airflow.spark_session=run", "airflow.plan_day_timeout_s=99"])
    monkeypatch.setenv("RECRAWL_CONFIG", str(config))
    monkeypatch.setenv("AIRFLOW_CONN_RECRAWL_SPARK", json.dumps({"conn_type": "spark",
                                                                 "host": "yarn"}))
    dag = _dagbag().dags["recrawl_daily"]
    assert [t.task_id for t in dag.topological_sort()] == [
        "wait_for_logs", "validate_logs", "plan_day", "publish", "verify", "report"]
    task = dag.get_task("plan_day")
    assert task.execution_timeout.total_seconds() == 99 and "plan_day" in task.doc_md
    cmd = task._get_hook()._build_spark_submit_command(task.application)
    app = cmd.index(artefact["entry"])
    assert cmd[app + 1:app + 3] == ["plan-day", "--date"]


def test_rendered_cluster_command_without_explicit_keys_sends_no_conf(airflow_db, tmp_path,
                                                                       monkeypatch, artefact):
    _, hook, cmd = _render(airflow_db, tmp_path, monkeypatch, {"conn_type": "spark", "host": "yarn"},
                           BASE + [f"airflow.py_files={artefact['zip']}"])
    _assert_no_worker_paths(cmd, hook)
    assert "--conf" not in cmd  # spark-defaults.conf of the cluster decides everything


def test_cluster_master_without_artefact_is_refused(airflow_db, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="airflow.py_files"):
        _render(airflow_db, tmp_path, monkeypatch, {"conn_type": "spark", "host": "yarn"}, BASE)


def test_embedded_master_keeps_its_defaults_and_the_checkout(airflow_db, tmp_path, monkeypatch):
    from jobs.config import SparkConfig

    _, hook, cmd = _render(airflow_db, tmp_path, monkeypatch,
                           {"conn_type": "spark", "host": "local[2]"}, BASE)
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert sorted(confs) == sorted(f"{k}={v}" for k, v in SparkConfig().settings.items())
    assert os.path.join(REPO, "jobs", "update_state.py") in cmd and "--py-files" not in cmd
    assert hook._env["PYTHONPATH"] == REPO  # local[2] runs this checkout, on this worker


def test_docs_offer_no_kubernetes_connection():
    """k8s:// needs apache-airflow-providers-cncf-kubernetes, which is not a dependency."""
    docs = [Path(REPO, "README.md"), *Path(REPO, "infra", "production").glob("*.md"),
            Path(REPO, "infra", "production", "airflow.env.example")]
    for doc in docs:  # no k8s connection is offered (only said to be unsupported)
        text = doc.read_text()
        assert "k8s://https" not in text and '"host": "k8s' not in text, doc
    assert "## Kubernetes: not supported" in Path(REPO, "infra", "production", "README.md").read_text()


# --- the DAG on a real standalone cluster --------------------------------------------------

PROBE = r'''
"""Submitted like a stage: reports where the driver's and the executors' code came from."""
import json, os, subprocess, sys

args = sys.argv[1:]
config = args[args.index("--config") + 1]
import jobs
from jobs.config import load_config
from jobs.spark_session import get_spark

spark = get_spark(load_config(config), "probe")


def where(_):
    import jobs as j
    fresh = subprocess.run([sys.executable, "-c", "import jobs; print(jobs.__file__)"],
                           capture_output=True, text=True)
    yield {"jobs": j.__file__, "sys_path": sys.path, "python": sys.executable,
           "cwd": os.getcwd(), "PYTHONPATH": os.environ.get("PYTHONPATH"),
           "fresh_rc": fresh.returncode, "fresh_out": (fresh.stdout + fresh.stderr)[-300:]}


executors = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()
conf = {k: spark.conf.get(k, None) for k in ("spark.sql.shuffle.partitions", "spark.ui.enabled",
                                              "spark.sql.session.timeZone", "spark.master")}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.json"), "w") as fh:
    json.dump({"driver": {"jobs": jobs.__file__, "python": sys.executable},
               "executors": executors, "conf": conf}, fh)
spark.stop()
'''


def _parquet_digest(path: Path) -> dict:
    """A Spark-written Parquet file, byte for byte except one thing: parquet-mr writes each
    column chunk's set of encodings in a JVM's hash-set order (e.g. PLAIN,RLE vs RLE,PLAIN), which
    differs between JVMs, even between two local runs. So: the exact bytes before the footer (every
    page), the footer with those sets sorted, and the rows. Metrics rows carry the run's config
    (data root, endpoint, artefact, Spark keys differ by construction): compared without those."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    if "config_json" in table.column_names:  # metrics: the run's own config, as in the manifest
        configs = [json.loads(c) for c in table.column("config_json").to_pylist()]
        for c in configs:  # what differs between the runs by construction
            c["paths"].pop("root"), c["publish"].pop("endpoint_url"), c["airflow"].pop("py_files")
            c.pop("spark")
        rest = table.drop_columns(["config_json"]).to_pandas().to_json()
        return {"rows_sha256": hashlib.sha256(rest.encode()).hexdigest(), "configs": configs}
    data = path.read_bytes()
    assert data[-4:] == b"PAR1"
    footer_len = int.from_bytes(data[-8:-4], "little")
    meta = pq.ParquetFile(path).metadata.to_dict()
    for group in meta["row_groups"]:
        for column in group["columns"]:
            column["encodings"] = sorted(column["encodings"])
    return {"pages_sha256": hashlib.sha256(data[:len(data) - 8 - footer_len]).hexdigest(),
            "footer": meta, "kv": pq.ParquetFile(path).metadata.metadata,
            "rows_sha256": hashlib.sha256(table.to_pandas().to_json().encode()).hexdigest()}


def _files_digest(root: Path) -> dict:
    """Every committed table partition: marker rows and each file's digest in commit order
    (names carry a Spark job uuid); the staged schedule shards and their index byte for byte
    (pyarrow, content-addressed names)."""
    out = {}
    for marker in sorted(root.rglob("_COMMITTED.json")):
        part = marker.parent
        data = json.loads(marker.read_text())
        out[str(part.relative_to(root))] = {
            "rows": data["rows"], "extra": data.get("extra", {}),
            "files": [(f["rows"], _parquet_digest(part / f["name"])) for f in data["files"]]}
    for shard in sorted((root / "schedules").rglob("*")):
        if shard.is_file():
            out[str(shard.relative_to(root))] = hashlib.sha256(shard.read_bytes()).hexdigest()
    return out


def _published(s3, bucket: str) -> dict:
    client = s3.client()
    out = {}
    for obj in client.list_objects_v2(Bucket=bucket, Prefix="daily/")["Contents"]:
        key = obj["Key"]
        if "/_locks/" in key:
            continue
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if "/_reports/" in key:  # the day's report page: it shows each run's own wall times
            out[key] = "report" if body.lstrip().lower().startswith(b"<!doctype html") else "bad"
            continue
        if key.endswith("_manifest.json"):
            manifest = json.loads(body)
            manifest.pop("extra")  # the run's config: data root, endpoint, artefact differ
            out[key] = manifest
        else:
            out[key] = hashlib.sha256(body).hexdigest()
    return out


def _run_dates(config: Path, conn: dict, env: dict) -> float:
    with patched_env({"RECRAWL_CONFIG": str(config),
                      "AIRFLOW_CONN_RECRAWL_SPARK": json.dumps(conn), **env}):
        dag = _dagbag().dags["recrawl_daily"]
        t0 = time.monotonic()
        for day in (D1, D2):
            logical = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
            run = dag.test(logical_date=logical)
            assert str(run.state) in ("success", "DagRunState.SUCCESS"), (day, conn)
        return time.monotonic() - t0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`bash infra/cluster.sh start`: a master and two 1-core/1 GiB workers on 127.0.0.1."""
    root = tmp_path_factory.mktemp("cluster")
    t0 = time.monotonic()
    out = subprocess.run(["bash", os.path.join(REPO, "infra", "cluster.sh"), "start",
                          "--dir", str(root), "--workers", "2",
                          "--conf", f"spark.sql.shuffle.partitions={SHUFFLE}"],
                         capture_output=True, text=True, timeout=300)
    state = json.loads(out.stdout) if out.returncode == 0 else None
    try:
        assert state, out.stderr[-3000:]
        state["start_s"] = time.monotonic() - t0
        yield state
    finally:
        subprocess.run(["bash", os.path.join(REPO, "infra", "cluster.sh"), "stop",
                        "--dir", str(root)], capture_output=True, text=True, timeout=120)
        pids = (state or {}).get("pids", {}).values()
        left = [p for p in pids if _group_alive(p)]
        assert not left, f"cluster processes left running: {left}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture(scope="module")
def two_runs(s3_server, airflow_db, spark, tmp_path_factory, cluster, artefact):
    from jobs import rebuild_state
    from jobs.config import load_config
    from lab.tools.generate_sample import generate_sample
    from jobs.publish import ensure_bucket

    work = tmp_path_factory.mktemp("e2e")
    base = work / "base"
    generate_sample(str(base), urls=URLS, hosts=HOSTS, days=3, end_date=D2, seed=5)
    rebuild_state.run(load_config(None, [f"paths.root={base}", "spark.master=local[2]", *BASE]),
                      D0, D0, spark)
    roots = {name: work / name for name in ("local", "cluster")}
    for root in roots.values():
        shutil.copytree(base, root)
    timings = {"cluster_start_s": cluster["start_s"]}
    # The same target in both runs (the schedules Asset is named by the target's URI): the
    # local run's objects are read, then the shared server is emptied for the cluster run.
    s3 = s3_server
    published = {}
    ensure_bucket(s3.endpoint_url, "sched")
    common = [*BASE, "publish.target=s3://sched/daily"]
    # local[2]: the checkout, the DAG's tasks in this process on the session's Spark (its
    # shuffle partitions are the cluster's); tests/ops/test_dag.py shows the same tasks in
    # process leave a spark-submitted DAG run's objects as they were.
    local_cfg = work / "local.toml"
    _write_config(local_cfg, [*common, f"paths.root={roots['local']}", "spark.master=local[2]",
                              f"publish.endpoint_url={s3.endpoint_url}",
                              f"spark.settings.spark.sql.shuffle.partitions={SHUFFLE}"])
    assert spark.conf.get("spark.sql.shuffle.partitions") == SHUFFLE
    t0 = time.monotonic()
    for day in (D1, D2):
        run_dag_day_in_process(str(local_cfg), day, spark)
    timings["local_2_dates_s"] = time.monotonic() - t0
    published["local"] = _published(s3, "sched")
    s3.reset()
    ensure_bucket(s3.endpoint_url, "sched")
    # the cluster: the artefact only, default spark.settings (8 partitions: must not reach
    # it), the cluster's spark-defaults.conf via SPARK_CONF_DIR, no PYTHONPATH anywhere
    cluster_cfg = work / "cluster.toml"
    _write_config(cluster_cfg, [*common, f"paths.root={roots['cluster']}",
                                f"publish.endpoint_url={s3.endpoint_url}",
                                f"airflow.py_files={artefact['zip']}",
                                "airflow.spark_session=run"])
    env = {"SPARK_CONF_DIR": cluster["conf_dir"], "PYTHONPATH": None, "PYSPARK_PYTHON": None,
           "PYSPARK_DRIVER_PYTHON": None}
    conn = {"conn_type": "spark", "host": cluster["master"]}
    timings["cluster_2_dates_s"] = _run_dates(cluster_cfg, conn, env)
    # A probe submitted exactly like the day's Spark task (same operator, hook and command).
    probe = Path(artefact["zip"]).parent / "probe.py"
    probe.write_text(PROBE)
    with patched_env({"RECRAWL_CONFIG": str(cluster_cfg),
                      "AIRFLOW_CONN_RECRAWL_SPARK": json.dumps(conn), **env}):
        task = _dagbag().dags["recrawl_daily"].get_task("plan_day")
        hook = task._get_hook()
        command = hook._build_spark_submit_command(str(probe))
        hook.submit(str(probe))
    report = json.loads((probe.parent / "probe.json").read_text())
    published["cluster"] = _published(s3, "sched")
    print(f"\ne2e timings: {json.dumps(timings)}\nstandalone command: {' '.join(command)}")
    return {"roots": roots, "published": published, "probe": report, "timings": timings,
            "command": command, "cluster": cluster}


@pytest.mark.e2e
def test_e2e_cluster_run_equals_local_run_byte_for_byte(two_runs):
    local, clustered = (two_runs["published"][n] for n in ("local", "cluster"))
    days = {k.split("/")[2] for k in local}
    assert {f"dt={d}" for d in ("2026-11-20", "2026-11-21")} <= days, sorted(local)
    assert sum(k.endswith("_manifest.json") for k in local) == 2
    assert local == clustered
    reports = [k for k in local if "/_reports/" in k]
    assert len(reports) == 2 and all(local[k] == "report" for k in reports)  # one page a day
    roots = two_runs["roots"]
    tables_local, tables_cluster = _files_digest(roots["local"]), _files_digest(roots["cluster"])
    assert any(k.startswith("state/dt=" + D2) for k in tables_local)
    assert tables_local.keys() == tables_cluster.keys()
    shards = [k for k in tables_local if k.startswith("schedules/")]
    assert shards and all(tables_local[k] == tables_cluster[k] for k in shards)  # byte for byte
    # The default config's audit lane ran: audit visits (full fetches, no validators) and
    # conditional visits turned into audits are in the published schedules.
    import pandas as pd

    rows = pd.concat([pd.read_parquet(roots["local"] / k) for k in shards if k.endswith(".parquet")],
                     ignore_index=True)
    audit = rows[rows.lane == "audit"]
    assert len(audit) > 0 and (audit.method == "full").all()
    for part in (k for k in tables_local if k not in shards):
        _assert_same_rows(roots["local"] / part, roots["cluster"] / part, part)


def _assert_same_rows(a: Path, b: Path, part: str) -> None:
    """A committed Spark-written partition: the same rows, whatever their order in the file.

    Row order inside a Spark output file follows the shuffle's arrival order, which differs
    between local[2] and a cluster; state and hosts must still be equal to the bit. The run's
    figures committed beside allocate's candidates (sums over hosts, in the marker) and the
    metrics' expected freshness made from them are added in arrival order too, so they may
    differ in the last bits (rtol 1e-12); every schedule shard is byte-identical.
    """
    import pandas as pd

    def frame(p: Path):
        marker = json.loads((p / "_COMMITTED.json").read_text())
        parts = [pd.read_parquet(p / f["name"]) for f in marker["files"]]
        df = pd.concat(parts, ignore_index=True).drop(columns=["config_json"], errors="ignore")
        key = [c for c in ("host", "url", "lane", "due_s", "dt") if c in df.columns]
        return marker["rows"], marker.get("extra"), df.sort_values(
            key, na_position="first", kind="stable").reset_index(drop=True)

    (rows_a, extra_a, df_a), (rows_b, extra_b, df_b) = frame(a), frame(b)
    figures_a, figures_b = (e.pop("figures", None) if e else None for e in (extra_a, extra_b))
    assert rows_a == rows_b and extra_a == extra_b, part
    assert figures_a == (pytest.approx(figures_b, rel=1e-12) if figures_b else figures_b), part
    exact = part.startswith(("state/", "hosts/"))
    pd.testing.assert_frame_equal(df_a, df_b, check_exact=exact, rtol=1e-12, obj=part)


@pytest.mark.e2e
def test_e2e_executors_import_the_jobs_only_from_the_artefact(two_runs, artefact):
    probe = two_runs["probe"]
    zip_name = Path(artefact["zip"]).name
    assert f"/{zip_name}/jobs/" in probe["driver"]["jobs"]
    assert probe["driver"]["python"] == two_runs["cluster"]["python"]
    assert len(probe["executors"]) == 4
    for ex in probe["executors"]:
        assert f"/{zip_name}/jobs/" in ex["jobs"], ex
        assert ex["python"] == two_runs["cluster"]["python"]  # the cluster's, not the worker's
        assert ex["cwd"].startswith(two_runs["cluster"]["dir"])  # a worker's work dir
        # nothing of the checkout: only Spark's own pyspark/py4j zips (they live in the venv)
        entries = (ex["PYTHONPATH"] or "").split(os.pathsep) + ex["sys_path"]
        assert not [e for e in entries if e == REPO or (e.startswith(REPO + os.sep)
                                                          and not e.startswith(VENV + os.sep))], ex
        # the same interpreter, environment and directory without the artefact: no jobs at all
        assert ex["fresh_rc"] != 0 and "No module named 'jobs'" in ex["fresh_out"], ex


@pytest.mark.e2e
def test_e2e_cluster_defaults_win_over_the_embedded_ones(two_runs):
    conf = two_runs["probe"]["conf"]
    assert conf["spark.master"] == two_runs["cluster"]["master"]
    assert conf["spark.sql.shuffle.partitions"] == SHUFFLE  # the cluster's; ours say 8
    assert conf["spark.ui.enabled"] != "false"              # ours would turn the UI off
    assert conf["spark.sql.session.timeZone"] == "UTC"
    command = two_runs["command"]
    assert "--conf" not in command and "--py-files" in command
