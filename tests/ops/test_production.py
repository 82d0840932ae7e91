"""Production day one on loopback: the S3A connector's versions, the DAG delivered from the
installed package, and ``recrawl preflight`` against a moto "account" set up as
infra/production/README.md says (buckets, KMS keys, encryption, policies, the artefact), with a
broken deployment beside it whose every check FAILs with its reason.

The fast tier runs preflight without Spark (``--no-spark`` or a dead master, which needs no
JVM); the end-to-end tier adds the Spark standalone cluster (``infra/cluster.sh``), the rendered
spark-submit commands and the DagBag.
"""
from __future__ import annotations

import http.client
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobs import s3a
from tests.conftest import REPO
from tests.s3server import MotoS3Server, dummy_aws_env

PROD = Path(REPO, "infra", "production")
BUCKETS = ("recrawl-data", "recrawl-schedules", "recrawl-artifacts")
PLACEHOLDER_KEY = "arn:aws:kms:us-east-1:111122223333:key/REPLACE-WITH-{}-KEY-ID"


# --- S3A: one home for the connector's versions ---------------------------------------------

def test_s3a_versions_match_the_installed_pyspark_jars():
    import pyspark

    bundled = s3a.bundled_versions()
    assert bundled == {"hadoop": s3a.HADOOP_VERSION, "spark": s3a.SPARK_VERSION,
                       "scala": s3a.SCALA_BINARY_VERSION}, bundled
    assert pyspark.__version__ == s3a.SPARK_VERSION
    assert f"pyspark=={s3a.SPARK_VERSION}\n" in Path(REPO, "requirements.txt").read_text()
    assert s3a.HADOOP_AWS.endswith(":" + bundled["hadoop"])
    assert s3a.SPARK_HADOOP_CLOUD.endswith(f"_{bundled['scala']}:{bundled['spark']}")


def test_production_config_sends_the_connector_and_its_settings():
    from jobs.config import load_config

    sent = load_config(str(PROD / "recrawl.production.toml")).spark.cluster_settings
    assert sent["spark.jars.packages"] == s3a.PACKAGES
    assert s3a.hadoop_aws_versions(sent) == [s3a.HADOOP_VERSION]
    assert sent["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("CredentialsProvider")
    assert sent["spark.hadoop.fs.s3a.encryption.algorithm"] == "SSE-KMS"
    assert sent["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert sent["spark.hadoop.fs.s3a.committer.name"] == "magic"
    assert sent["spark.sql.sources.commitProtocolClass"].endswith("PathOutputCommitProtocol")
    defaults = (PROD / "spark-defaults.conf").read_text()
    assert "spark.jars.packages" not in defaults and "credentials.provider" not in defaults


def test_preflight_access_table_is_the_iam_needs_table():
    """What preflight probes per role is what the role's policy grants (tests/ops/test_iam_policies)."""
    from jobs.preflight import ACCESS
    from tests.ops.test_iam_policies import DATA, NEEDS, SCHED, listing, objs

    buckets = {"data": DATA, "publish": SCHED}
    for role, access in ACCESS.items():
        for mode, action in (("read", "s3:GetObject"), ("write", "s3:PutObject")):
            for store, prefixes in access.get(mode, {}).items():
                assert objs(buckets[store], *prefixes) <= NEEDS[role][action], (role, mode, store)
                assert listing(buckets[store], *prefixes) <= NEEDS[role]["s3:ListBucket"] or \
                    mode == "write", (role, store)
        for store, prefixes in access.get("write", {}).items():
            assert objs(buckets[store], *prefixes) <= NEEDS[role].get("s3:DeleteObject", set()) or \
                role == "airflow_worker", role  # its probe's delete: _runs/_preflight only


def test_executors_with_another_python_or_pyspark_fail_the_check():
    from jobs.preflight import compare_executors

    driver = {"python": "3.11.7", "pyspark": s3a.SPARK_VERSION, "executable": "/opt/py"}
    same = dict(driver, host="n1", time=100.0)
    report = {"driver": driver, "before": 99.0, "after": 101.0,
              "executors": [same, dict(same, python="3.12.1", executable="/usr/bin/python3")]}
    ok, reason = compare_executors(report, max_skew_s=30)
    assert not ok and "executors Python 3.12.1" in reason and "/usr/bin/python3" in reason
    report["executors"] = [same, dict(same, time=160.0)]
    ok, reason = compare_executors(report, max_skew_s=30)
    assert not ok and "59.0 s off the driver's" in reason
    report["executors"] = [same, dict(same, time=100.5)]
    assert compare_executors(report, max_skew_s=30)[0]


# --- a moto account set up as the README's "Day one" says -----------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Account:
    """Buckets, keys, encryption, policies, the uploaded artefact, and a filled-in config."""

    def __init__(self, s3: MotoS3Server, work: Path):
        import boto3

        from jobs import artefact

        self.s3, self.work = s3, work
        self.endpoint = s3.endpoint_url
        client = s3.client()
        kms = boto3.client("kms", endpoint_url=self.endpoint, region_name="us-east-1")
        self.keys = {name: kms.create_key(Description=f"recrawl {name}")["KeyMetadata"]["Arn"]
                     for name in ("DATA", "SCHEDULES")}
        # step 1: buckets and their default encryption (placeholders -> this account). Not the
        # bucket policies: their first statement denies plain http, which loopback is, and moto
        # takes a conditional Deny as matching; tests/ops/test_iam_policies.py checks them.
        for bucket in BUCKETS:
            client.create_bucket(Bucket=bucket)
            client.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=json.loads(
                self.fill((PROD / "bucket_encryption" / f"{bucket}.json").read_text())))
        client.put_object(Bucket="recrawl-data", Key="fetch_logs/dt=2026-12-31/part-0.parquet",
                          Body=b"PAR1 upstream log file PAR1")
        client.put_object(Bucket="recrawl-data", Key="host_policy/dt=2026-12-31/_SUCCESS", Body=b"")
        # step 5: build the artefact and upload it with its entry
        self.artefact = artefact.build(str(work / "dist"))
        for path in (self.artefact["zip"], self.artefact["entry"]):
            client.upload_file(path, "recrawl-artifacts", "recrawl/" + os.path.basename(path))
        # step 3: the config, from the example with this account's keys and endpoint
        text = self.fill((PROD / "recrawl.production.toml").read_text())
        text = text.replace('endpoint_url = ""', f'endpoint_url = "{self.endpoint}"')
        assert f'py_files = "s3a://recrawl-artifacts/recrawl/{Path(self.artefact["zip"]).name}"' in text
        self.config = work / "recrawl.toml"
        self.config.write_text(text)

    def fill(self, text: str) -> str:
        for name, arn in self.keys.items():
            text = text.replace(PLACEHOLDER_KEY.format(name), arn)
        assert "REPLACE-WITH-DATA" not in text and "REPLACE-WITH-SCHEDULES" not in text
        return text

    def env(self, **extra) -> dict:
        env = dict(os.environ)
        env.update({"AWS_ENDPOINT_URL": self.endpoint,  # the data root's S3 (pyarrow, boto3)
                    "AIRFLOW_CONN_RECRAWL_SPARK": json.dumps({"conn_type": "spark",
                                                              "host": "local[1]"})})
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def preflight(self, *args: str, env: dict | None = None) -> tuple[int, dict[str, str], str]:
        """Run `recrawl preflight`; (exit code, check -> 'STATUS reason', stdout)."""
        out = subprocess.run([sys.executable, "-m", "jobs.console", "preflight", "--config",
                              str(self.config), *args], capture_output=True, text=True,
                             env=env or self.env(), timeout=600, cwd=REPO)
        lines = {}
        for line in out.stdout.splitlines():
            status, _, rest = line.partition(" ")
            if status in ("PASS", "FAIL", "SKIP"):
                check, _, reason = rest.partition(": ")
                lines[check] = f"{status} {reason}"
        print(f"\n$ recrawl preflight {' '.join(args)}\n{out.stdout}{out.stderr[-2000:]}")
        return out.returncode, lines, out.stdout


@pytest.fixture(scope="module")
def account(tmp_path_factory):
    with dummy_aws_env(), MotoS3Server() as s3:
        yield Account(s3, tmp_path_factory.mktemp("account"))


def _statuses(lines: dict[str, str]) -> dict[str, str]:
    return {check: value.split(" ", 1)[0] for check, value in lines.items()}


def test_preflight_passes_on_a_deployment_set_up_as_documented(account):
    rc, lines, _ = account.preflight("--no-spark")
    statuses = _statuses(lines)
    assert statuses.pop("intake") == "SKIP"  # intake.enabled is off in the production example
    assert rc == 0 and set(statuses.values()) == {"PASS"}, lines
    assert any(c.startswith("write s3://recrawl-data/state/") for c in lines)
    assert any(c.startswith("lock s3://recrawl-schedules/schedules/_locks/") for c in lines)
    assert sum(c.startswith("kms arn:aws:kms:") for c in lines) == 2
    assert "airflow connection recrawl_spark" in lines
    # nothing users see changed: only the objects the account was set up with
    client = account.s3.client()
    keys = {b: sorted(o["Key"] for o in client.list_objects_v2(Bucket=b).get("Contents", []))
            for b in BUCKETS}
    assert "(empty) answered HEAD" in lines["read s3://recrawl-data/host_policy/ (airflow_worker, "
                                            "update_state, allocate_build_schedule, verify)"]
    assert keys == {"recrawl-data": ["fetch_logs/dt=2026-12-31/part-0.parquet",
                                     "host_policy/dt=2026-12-31/_SUCCESS"],
                    "recrawl-schedules": [],
                    "recrawl-artifacts": sorted("recrawl/" + os.path.basename(account.artefact[k])
                                                for k in ("zip", "entry"))}


INTAKE_NEEDS = [("read", "documents"), ("read", "host_policy"), ("read", "signals"),
                ("write", "signals"), ("write", "host_policy"), ("write", "document_refs"),
                ("write", "quarantine"), ("write", "_runs")]


def _intake_lines(lines: dict[str, str]) -> dict[tuple[str, str], str]:
    """(mode, prefix) -> 'STATUS reason' of the access checks naming the intake role."""
    found = {}
    for check, value in lines.items():
        m = re.fullmatch(r"(read|write) s3://recrawl-data/([a-z_]+)/ \((.*)\)", check)
        if m and "intake" in m.group(3).split(", "):
            found[(m.group(1), m.group(2))] = value
    return found


def test_preflight_checks_intakes_tables_when_intake_is_enabled(account):
    rc, lines, _ = account.preflight("--no-spark", "--set", "intake.enabled=true")
    assert rc == 0 and set(_statuses(lines).values()) == {"PASS"}, lines
    assert "intake" not in lines  # no SKIP: the role is checked
    assert sorted(_intake_lines(lines)) == sorted(INTAKE_NEEDS)
    assert lines["write s3://recrawl-data/document_refs/ (intake)"].startswith(
        "PASS probe document_refs/_preflight/... written, read back, deleted")
    assert lines["host_policy layout (intake)"].startswith("PASS dated snapshots")
    client = account.s3.client()
    assert sorted(o["Key"] for o in client.list_objects_v2(Bucket="recrawl-data")["Contents"]) == \
        ["fetch_logs/dt=2026-12-31/part-0.parquet", "host_policy/dt=2026-12-31/_SUCCESS"]


def test_preflight_fails_a_flat_host_policy_when_intake_is_enabled(account):
    client = account.s3.client()
    client.put_object(Bucket="recrawl-data", Key="host_policy/policy.parquet", Body=b"PAR1 x PAR1")
    try:
        rc, lines, _ = account.preflight("--no-spark", "--roles", "intake",
                                         "--set", "intake.enabled=true")
        off_rc, off, _ = account.preflight("--no-spark", "--roles", "intake")
    finally:
        client.delete_object(Bucket="recrawl-data", Key="host_policy/policy.parquet")
    assert rc == 4
    layout = lines["host_policy layout (intake)"]
    assert layout.startswith("FAIL SchemaError: host_policy: ") and "policy.parquet" in layout
    assert off_rc == 0 and off["intake"].startswith("SKIP intake.enabled is false")
    assert "host_policy layout (intake)" not in off


def test_preflight_fails_each_check_of_a_broken_deployment(account):
    """Missing data bucket, a KMS key that does not exist, an artefact of another version, no
    Spark connection and a dead master: each its own FAIL line with the cause; exit 1."""
    client = account.s3.client()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("jobs/__init__.py", "")
        zf.writestr("recrawl_artefact.json", json.dumps({"name": "recrawl_jobs", "version": "9.9.9"}))
    client.put_object(Bucket="recrawl-artifacts", Key="recrawl/recrawl_jobs-9.9.9.zip",
                      Body=buf.getvalue())
    client.put_object(Bucket="recrawl-artifacts", Key="recrawl/recrawl_jobs-9.9.9.py", Body=b"")
    wrong_key = account.keys["SCHEDULES"].rsplit("/", 1)[0] + "/00000000-0000-0000-0000-000000000000"
    dead = f"spark://127.0.0.1:{_free_port()}"
    rc, lines, _ = account.preflight(
        "--set", "paths.root=s3a://recrawl-data-missing",
        "--set", f"publish.sse_kms_key_id={wrong_key}",
        "--set", "airflow.py_files=s3a://recrawl-artifacts/recrawl/recrawl_jobs-9.9.9.zip",
        "--master", dead,
        env=account.env(AIRFLOW_CONN_RECRAWL_SPARK=None))
    assert rc == 4, lines
    failed = {c: v for c, v in lines.items() if v.startswith("FAIL")}
    assert "NoSuchBucket" in failed["bucket s3://recrawl-data-missing"]
    assert not [c for c in lines if "s3://recrawl-data-missing/" in c]  # said once, not per prefix
    assert "NotFound" in failed[f"kms {wrong_key} (publish)"]
    assert "artefact version 9.9.9 != installed package" in \
        failed["artefact s3a://recrawl-artifacts/recrawl/recrawl_jobs-9.9.9.zip"]
    assert "not defined" in failed["airflow connection recrawl_spark"]
    assert "does not answer" in failed[f"spark master {dead}"]
    # what still works is still said to
    assert lines["write s3://recrawl-schedules/schedules/ (publish)"].startswith("PASS")


def test_preflight_fails_where_the_identity_lacks_a_permission(account):
    """The verify role's real policy (iam/verify.json), enforced by moto's IAM: its reads pass,
    the publish writes and lock it is not granted FAIL as AccessDenied."""
    import boto3

    iam = boto3.client("iam", endpoint_url=account.endpoint, region_name="us-east-1")
    iam.create_user(UserName="verify-only")
    iam.put_user_policy(UserName="verify-only", PolicyName="verify",
                        PolicyDocument=account.fill((PROD / "iam" / "verify.json").read_text()))
    key = iam.create_access_key(UserName="verify-only")["AccessKey"]
    host, port = account.endpoint.removeprefix("http://").split(":")

    def auth_after(count: str) -> None:  # moto enforces IAM after `count` more requests
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/moto-api/reset-auth", body=count)
        assert conn.getresponse().status == 200
        conn.close()

    auth_after("0")
    try:
        rc, lines, _ = account.preflight(
            "--no-spark", "--roles", "verify,publish", "--set", "publish.sse_kms_key_id=",
            env=account.env(AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                            AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"], AWS_SESSION_TOKEN=None))
    finally:
        auth_after("inf")
    assert rc == 4
    assert lines["read s3://recrawl-schedules/schedules/ (verify)"].startswith("PASS")
    assert lines["read s3://recrawl-data/host_policy/ (verify)"].startswith("PASS")
    for check in ("write s3://recrawl-schedules/schedules/ (publish)",
                  "lock s3://recrawl-schedules/schedules/_locks/ (publish)",
                  "read s3://recrawl-data/schedules/ (publish)"):
        assert lines[check].startswith("FAIL AccessDenied"), lines[check]
    assert "403" in lines["artefact s3a://recrawl-artifacts/recrawl/recrawl_jobs-0.1.0.zip"]


# What each role's driver reads before Spark starts, at a table's root: snapshots of
# importance and host_policy, the operator's overrides, the dates of state.
ROOT_READS = """
import sys
from jobs import overrides, snapshots, status, storage
from jobs.config import load_config
cfg = load_config(sys.argv[1])
for table in sys.argv[3:]:
    if table.startswith("record:"):  # a run record, as the Airflow worker's tasks write it
        record = cfg.paths.table(table[7:], sys.argv[2]) + "/probe-record/record.json"
        storage.write_json(record, {"ok": True})
        assert storage.read_json(record) == {"ok": True}
    elif table.startswith("write:"):  # a run record and a Parquet file, as the stages write them
        import pyarrow as pa
        prefix = cfg.paths.table(table[6:], sys.argv[2])
        storage.write_json(f"{prefix}/probe-record/record.json", {"ok": True})
        storage.write_parquet(f"{prefix}/probe/part-0.parquet", pa.table({"x": [1]}))
        assert storage.read_json(f"{prefix}/probe-record/record.json") == {"ok": True}
        listed = storage.list_parquet_files(f"{prefix}/probe")
        assert [f.rsplit("/", 1)[1] for f in listed] == ["part-0.parquet"], listed
        # one DeleteObject each: moto's IAM refuses the multi-object delete that delete_dir
        # sends, which S3 authorises per key (s3:DeleteObject, granted on these prefixes)
        for f in (*listed, f"{prefix}/probe-record/record.json"):
            storage.delete_file(f)
        assert not storage.list_parquet_files(f"{prefix}/probe")
    elif table == "overrides":
        overrides.load(cfg, sys.argv[2])
    elif table == "state":
        status.state_dates(cfg)
    else:
        snapshots.find(cfg, table, sys.argv[2])
    print("read", table)
"""


@pytest.mark.parametrize("role, tables", [
    ("allocate_build_schedule", ("importance", "host_policy", "overrides", "state",
                                 "write:_runs", "write:plan")),
    ("update_state", ("importance", "host_policy", "state", "write:_runs", "write:quarantine")),
    ("intake", ("host_policy", "write:_runs", "write:signals")),
    ("airflow_worker", ("importance", "host_policy", "record:_runs")),
    ("verify", ("host_policy",)),
])
def test_each_roles_driver_reads_its_tables_roots_under_its_real_policy(account, role, tables):
    """A restricted role may list a table's prefix and get its objects, never the bare key of
    the table's root (S3 answers 403 to that HeadObject): the driver's reads of table roots,
    and its small writes (run records, Parquet parts, their deletes) under a partition
    of D, pass under the role's own policy (iam/<role>.json), enforced by moto's IAM."""
    import boto3

    iam = boto3.client("iam", endpoint_url=account.endpoint, region_name="us-east-1")
    user = f"{role.replace('_', '-')}-roots"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName=role,
                        PolicyDocument=account.fill((PROD / "iam" / f"{role}.json").read_text()))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    host, port = account.endpoint.removeprefix("http://").split(":")

    def auth_after(count: str) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/moto-api/reset-auth", body=count)
        assert conn.getresponse().status == 200
        conn.close()

    import pyarrow.parquet as pq

    from jobs import schemas
    body = io.BytesIO()
    pq.write_table(schemas.OVERRIDES.arrow_schema().empty_table(), body)
    account.s3.client().put_object(Bucket="recrawl-data", Key="overrides/ops.parquet",
                                   Body=body.getvalue())
    auth_after("0")
    try:
        out = subprocess.run(
            [sys.executable, "-c", ROOT_READS, str(account.config), "2026-12-31", *tables],
            capture_output=True, text=True, timeout=300, cwd=REPO,
            env=account.env(AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                            AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"], AWS_SESSION_TOKEN=None))
    finally:
        auth_after("inf")
        account.s3.client().delete_object(Bucket="recrawl-data", Key="overrides/ops.parquet")
        account.s3.client().delete_object(Bucket="recrawl-data",
                                          Key="_runs/dt=2026-12-31/probe-record/record.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[:-1] == [f"read {t}" for t in tables]


class SkewedClockProxy:
    """A loopback proxy to ``upstream`` whose answers carry a Date ``skew_s`` seconds off."""

    def __init__(self, upstream: str, skew_s: float):
        target = upstream.removeprefix("http://")

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def date_time_string(self, timestamp=None):
                return formatdate(time.time() + skew_s, usegmt=True)

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                conn = http.client.HTTPConnection(target, timeout=30)
                conn.request(self.command, self.path, body=body or None,
                             headers={k: v for k, v in self.headers.items()
                                      if k.lower() != "connection"})
                response = conn.getresponse()
                data = response.read()
                self.send_response(response.status)  # sends the skewed Date
                for key, value in response.getheaders():
                    if key.lower() not in ("date", "server", "content-length", "connection",
                                           "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_preflight_fails_when_the_clocks_disagree(account):
    with SkewedClockProxy(account.endpoint, skew_s=-600) as proxy:
        rc, lines, _ = account.preflight("--no-spark", "--roles", "verify",
                                         "--set", f"publish.endpoint_url={proxy.endpoint_url}")
    assert rc == 4
    clock = lines["clock s3://recrawl-schedules"]
    skew = float(re.search(r"is ([-+][0-9.]+) s off", clock).group(1))
    assert clock.startswith("FAIL") and -605 < skew < -595 and "fix NTP" in clock, clock
    assert lines["clock s3://recrawl-data"].startswith("PASS")


def test_preflight_refuses_a_bad_config_with_exit_2(account, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[publish]\nendpoint_url = \"http://s3.example.com\"\n")
    out = subprocess.run([sys.executable, "-m", "jobs.console", "preflight", "--config", str(bad)],
                         capture_output=True, text=True, env=account.env(), timeout=120)
    assert out.returncode == 2
    assert out.stdout.startswith("FAIL config: ") and "plain http" in out.stdout
    assert "Traceback" not in out.stderr


# --- the DAG delivered from the installed package --------------------------------------------

def test_dag_file_prints_the_installed_dag_module():
    out = subprocess.run([sys.executable, "-m", "jobs.console", "dag-file"], capture_output=True,
                         text=True, timeout=60, cwd="/")
    assert out.returncode == 0
    assert Path(out.stdout.strip()) == Path(REPO, "jobs", "airflow_dag.py")


def test_stub_and_link_load_in_a_real_dagbag_with_each_parse_reading_the_config(
        airflow_db, tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from jobs import dag_file

    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(Path(REPO, "dags", "recrawl_daily.py"), folder / "recrawl_daily.py")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "recrawl_daily.py").symlink_to(dag_file.path())
    for n, dags in enumerate((folder, linked, folder)):
        config = tmp_path / f"c{n}.toml"
        config.write_text(f"[airflow]\nretries = {n + 3}\n")
        monkeypatch.setenv("RECRAWL_CONFIG", str(config))
        bag = DagBag(dag_folder=str(dags))
        assert bag.import_errors == {}, bag.import_errors
        dag = bag.dags["recrawl_daily"]
        assert dag.get_task("publish").retries == n + 3  # this parse's config, not a cached one
        assert {t.task_id for t in dag.tasks} == {"wait_for_logs", "validate_logs", "update_state",
                                                  "allocate", "build_schedule", "publish",
                                                  "verify", "report"}


# --- on the cluster: rendered commands, and preflight against the standalone cluster ----------

def test_rendered_spark_submit_carries_the_connector_and_s3a_settings(account, airflow_db,
                                                                       monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from jobs.config import load_config

    monkeypatch.setenv("RECRAWL_CONFIG", str(account.config))
    monkeypatch.setenv("AIRFLOW_CONN_RECRAWL_SPARK", json.dumps(
        {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    task = DagBag(dag_folder=os.path.join(REPO, "dags")).dags["recrawl_daily"].get_task("update_state")
    cmd = task._get_hook()._build_spark_submit_command(task.application)
    print("\n" + " ".join(cmd))
    confs = dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--conf")
    assert confs == {k: str(v) for k, v in
                     load_config(str(account.config)).spark.cluster_settings.items()}
    assert confs["spark.jars.packages"] == s3a.PACKAGES
    assert confs["spark.hadoop.fs.s3a.encryption.key"] == account.keys["DATA"]
    assert cmd[cmd.index("--py-files") + 1].startswith("s3a://recrawl-artifacts/recrawl/")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    script = os.path.join(REPO, "infra", "cluster.sh")
    out = subprocess.run(["bash", script, "start", "--dir", str(root), "--workers", "2"],
                         capture_output=True, text=True, timeout=300)
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        yield json.loads(out.stdout)
    finally:
        subprocess.run(["bash", script, "stop", "--dir", str(root)], capture_output=True,
                       text=True, timeout=120)


@pytest.mark.e2e
def test_e2e_day_one_walkthrough_preflight_passes_against_the_standalone_cluster(account, cluster):
    """README "Day one" on loopback as far as it goes here: the account of steps 1-2 (moto), the
    config of step 3, the Spark connection of step 4 naming the standalone cluster (client mode,
    SPARK_CONF_DIR = its client configuration), the artefact of step 5; preflight: all PASS.
    The connector's jars are not resolved (no Maven Central here): the probe job leaves them out."""
    env = account.env(SPARK_CONF_DIR=cluster["conf_dir"], PYSPARK_PYTHON=None,
                      PYSPARK_DRIVER_PYTHON=None,
                      AIRFLOW_CONN_RECRAWL_SPARK=json.dumps({"conn_type": "spark",
                                                             "host": cluster["master"]}))
    rc, lines, _ = account.preflight(env=env)
    statuses = _statuses(lines)
    assert statuses.pop("intake") == "SKIP"  # intake.enabled is off in the production example
    assert rc == 0 and set(statuses.values()) == {"PASS"}, lines
    executors = lines["spark executors"]
    assert f"Python {sys.version.split()[0]}, pyspark {s3a.SPARK_VERSION} = driver's" in executors
    assert lines[f"spark master {cluster['master']}"].startswith("PASS")
