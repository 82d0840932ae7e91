"""recrawl preflight: check a deployment before its first run, changing nothing users see.

    recrawl preflight --config /opt/recrawl/config/recrawl.toml [--roles R,R] [--master URL]

Prints one line per check, ``PASS|FAIL|SKIP <check>: <reason>``, and exits 4 if any check
FAILed (2: the config itself is refused; 0: no FAIL). SKIP is a check that does not apply where
it runs (no Airflow installed, no KMS key configured, a local data root) and never fails.

Checks, in order:

- ``config``: the file loads and validates (jobs/config.py).
- ``s3a connector``: ``spark.cluster_settings`` names ``hadoop-aws`` of the Hadoop version the
  installed pyspark bundles (jobs/s3a.py); SKIP when it names none (the image or EMR has it).
- ``clock``: the S3 endpoint's ``Date`` header is within ``--max-clock-skew-s`` of this host's
  clock (publish leases and deadlines compare times across machines); the same answer names a
  bucket that does not exist (``bucket``), once instead of per prefix.
- ``read``/``write``/``lock`` per bucket and prefix, for each role of infra/production/iam/
  (``ACCESS``): a read lists the prefix and reads one byte of an object (decrypting it), or, on
  an empty prefix, gets a 404 for an absent key (S3 answers 403 without s3:GetObject or
  s3:ListBucket); a write PUTs a uniquely named probe ``<prefix>/_preflight/<host>-<uuid>``,
  reads it back and deletes it; the lock takes a probe lock under ``schedules/_locks/`` with
  ``If-None-Match: *``, checks that a second take is refused, and deletes it. Probe keys start
  with ``_``: no reader of a table, partition or published day lists them, and they are gone
  when the check ends. The ``intake`` role (read ``documents``, ``host_policy``, ``signals``;
  write ``signals``, ``host_policy``, ``document_refs``, ``quarantine``, ``_runs``) is checked
  only with ``intake.enabled`` (else one SKIP line), with ``host_policy layout``: intake writes
  ``host_policy/dt=D``, so a flat (undated) ``host_policy/`` FAILs (jobs/snapshots.py).
- ``kms``: each configured key (``publish.sse_kms_key_id``; the S3A key
  ``spark.hadoop.fs.s3a.encryption.key`` of ``spark.cluster_settings``) exists and is enabled
  (kms:DescribeKey), and a probe PUT asking for SSE-KMS with it is stored under that key and
  reads back (kms:GenerateDataKey + kms:Decrypt through S3, as the jobs use it).
- ``artefact``: ``airflow.py_files`` exists, its ``recrawl_artefact.json`` version equals its
  file name's and the installed package's, and its driver entry ``.py`` is beside it.
- ``airflow connection``: ``airflow.spark_conn_id`` is defined (FAIL if not) and
  ``airflow.alert_conn_id`` (PASS either way: undefined means alerts go to the task log);
  SKIP where Airflow is not installed.
- ``spark master`` / ``spark executors``: the master (``--master``, else the Airflow
  connection's host, else ``spark.master``) answers a tiny job in client mode, and every
  executor's Python and pyspark versions equal the driver's (this host's) and its clock agrees.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from dataclasses import dataclass
from typing import Callable, Iterator, Optional
from urllib.parse import urlparse

from jobs import s3a
from jobs.config import Config, ConfigError, add_config_args, config_from_args, embedded_master

# A check failed: the code of a failed verification; the config itself refused: a refusal.
from jobs.errors import EXIT_REFUSED, EXIT_VERIFY_FAILED as EXIT_FAILED  # noqa: E402

PROBE_DIR = "_preflight"
LOCKS = "schedules/_locks"

# role (infra/production/iam/<role>.json) -> the stages it runs and what they do, per store:
# "data" is paths.root, "publish" is publish.target. tests/ops/test_production.py checks this
# against the IAM policies' table of needs.
ACCESS: dict[str, dict] = {
    "airflow_worker": {"stages": "wait_for_logs, validate_logs",
                       "read": {"data": ("fetch_logs", "importance", "host_policy", "signals",
                                         "frontier")},
                       "write": {"data": ("_runs",)}},
    "update_state": {"stages": "update_state",
                     "read": {"data": ("fetch_logs", "signals", "frontier", "importance",
                                       "host_policy")},
                     "write": {"data": ("state", "quarantine", "metrics", "hosts", "_runs")}},
    "allocate_build_schedule": {"stages": "allocate, build_schedule",
                                "read": {"data": ("state", "hosts", "frontier", "importance",
                                                  "host_policy", "overrides")},
                                "write": {"data": ("_work", "plan", "schedules", "metrics",
                                                   "_runs", "quarantine")}},
    "publish": {"stages": "publish",
                "read": {"data": ("schedules",)},
                "write": {"publish": ("schedules",)}, "lock": ("publish",)},
    "verify": {"stages": "verify",
               "read": {"publish": ("schedules",), "data": ("host_policy",)}},
    # checked only with intake.enabled (INTAKE); reads the day before's host_policy snapshot
    # and upstream's signals of D, writes its own beside them
    "intake": {"stages": "intake",
               "read": {"data": ("documents", "host_policy", "signals")},
               "write": {"data": ("signals", "host_policy", "document_refs", "quarantine",
                                  "_runs")}},
}
INTAKE = "intake"  # the role ACCESS lists that runs only with intake.enabled
S3A_KEY = "spark.hadoop.fs.s3a.encryption.key"


@dataclass(frozen=True)
class Result:
    status: str  # PASS, FAIL or SKIP
    check: str
    reason: str

    def line(self) -> str:
        return f"{self.status} {self.check}: {self.reason}"


class CheckFailed(RuntimeError):
    """A check's named failure (its message is the reason)."""


def _short(exc: BaseException) -> str:
    """One line naming an error: S3/KMS error code and message, else the exception."""
    if isinstance(exc, CheckFailed):
        return str(exc)
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("Error"):
        err = response["Error"]
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return f"{err.get('Code') or status} {err.get('Message', '')}".strip()
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# --- stores ---------------------------------------------------------------------------------

@dataclass
class Store:
    """One configured location: its objstore, the key prefix inside it, its raw client."""

    name: str      # "data" or "publish"
    uri: str
    store: object  # jobs.objstore.S3Store | LocalStore
    base: str      # key prefix of the location ("" for a bucket root)

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.base, *parts) if p)


def open_stores(cfg: Config) -> dict[str, Store]:
    """The data root as its pyarrow writers reach it (no SSE header: the bucket's default key)
    and the publish target as publish does (its endpoint, SSE-KMS with its key on every PUT)."""
    from jobs.objstore import open_store

    stores = {}
    for name, uri, endpoint, sse in (
            ("data", cfg.paths.root, None, None),
            ("publish", cfg.publish.target, cfg.publish.endpoint_url or None,
             cfg.publish.sse_kms_key_id or None)):
        store, location = open_store(uri, endpoint_url=endpoint, sse_kms_key_id=sse)
        stores[name] = Store(name, uri, store, location.prefix)
    return stores


def _where(store: Store, prefix: str = "") -> str:
    """``s3://bucket/base/prefix/`` (a directory path for a local store); no prefix: the root."""
    bucket = getattr(store.store, "bucket", None)
    head = f"s3://{bucket}" if bucket else str(getattr(store.store, "root", store.uri))
    key = store.key(prefix)
    return f"{head}/{key}/" if key else head


def _probe_name() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:12]}"


def check_read(store: Store, prefix: str) -> str:
    """Read access to ``prefix``: one byte of its first object, or a 404 for an absent key."""
    from jobs.objstore import ObjectAccessDenied

    listed = []
    for item in store.store.list(store.key(prefix) + "/"):
        listed.append(item)
        if item.size > 0 or len(listed) >= 1000:  # markers (_SUCCESS, dir/) are empty
            break
    if listed:
        item = listed[-1]
        name = item.key.rsplit("/", 1)[-1] or item.key
        if item.size == 0:
            if store.store.head(item.key) is None:
                raise CheckFailed(f"{item.key} was listed but is gone")
            return f"listed; {name} (empty) answered HEAD"
        if hasattr(store.store, "client"):  # one byte: s3:GetObject and kms:Decrypt
            store.store.client.get_object(Bucket=store.store.bucket, Key=item.key,
                                          Range="bytes=0-0")["Body"].read()
        else:
            store.store.get_bytes(item.key)
        return f"listed; read {name} (byte 0)"
    try:
        absent = store.store.head(store.key(prefix, PROBE_DIR, _probe_name() + ".absent"))
    except ObjectAccessDenied as exc:
        raise CheckFailed("AccessDenied: listed empty, but an absent key answered 403, not 404 "
                          "(s3:GetObject or s3:ListBucket missing)") from exc
    if absent is not None:
        raise CheckFailed("an absent probe key exists")
    return "listed (empty); an absent key answered 404"


def check_write(store: Store, prefix: str) -> str:
    """PUT a unique probe object under ``prefix/_preflight/``, read it back, delete it."""
    key = store.key(prefix, PROBE_DIR, _probe_name() + ".json")
    body = json.dumps({"recrawl": "preflight", "at": time.time()}).encode()
    store.store.put_bytes(key, body, content_type="application/json")
    try:
        if store.store.get_bytes(key) != body:
            raise CheckFailed(f"{key} read back different bytes")
    finally:
        store.store.delete([key])
    if store.store.head(key) is not None:
        raise CheckFailed(f"probe {key} still there after delete")
    return f"probe {prefix}/{PROBE_DIR}/... written, read back, deleted"


def check_lock(store: Store) -> str:
    """The day lock's conditional create: If-None-Match wins once, a second take is refused."""
    from jobs.objstore import PreconditionFailed

    key = store.key(LOCKS, f"{PROBE_DIR}-{_probe_name()}.json")
    store.store.put_bytes(key, b"{}", content_type="application/json", if_none_match=True)
    try:
        try:
            store.store.put_bytes(key, b"{}", content_type="application/json",
                                  if_none_match=True)
        except PreconditionFailed:
            pass
        else:
            raise CheckFailed("a second If-None-Match: * create of the probe lock succeeded: "
                               "this store has no conditional writes (publish needs them)")
    finally:
        store.store.delete([key])
    return f"probe lock {LOCKS}/{PROBE_DIR}-... created with If-None-Match, retake refused, deleted"


def check_kms(store: Store, prefix: str, key_id: str, kms_client) -> str:
    """The key is enabled, and S3 stores a probe under it (in ``prefix/_preflight/``, where
    its users write) and decrypts it back."""
    meta = kms_client.describe_key(KeyId=key_id)["KeyMetadata"]
    if meta.get("KeyState") != "Enabled" or not meta.get("Enabled", True):
        raise CheckFailed(f"key state {meta.get('KeyState')}")
    s3 = store.store
    key = store.key(prefix, PROBE_DIR, _probe_name() + ".kms")
    body = b"recrawl preflight"
    s3.client.put_object(Bucket=s3.bucket, Key=key, Body=body, ServerSideEncryption="aws:kms",
                         SSEKMSKeyId=key_id)
    try:
        got = s3.client.get_object(Bucket=s3.bucket, Key=key)
        used = got.get("SSEKMSKeyId", "")
        data = got["Body"].read()
    finally:
        s3.delete([key])
    if data != body:
        raise CheckFailed("probe read back different bytes")
    if got.get("ServerSideEncryption") != "aws:kms" or not _same_key(used, meta):
        raise CheckFailed(f"probe stored with {got.get('ServerSideEncryption')} key {used!r}, "
                           f"not {meta['Arn']}")
    return f"Enabled; probe {prefix}/{PROBE_DIR}/... PUT with SSE-KMS under it, read back, deleted"


def _same_key(used: str, meta: dict) -> bool:
    return used in (meta.get("Arn"), meta.get("KeyId")) or used.endswith("/" + meta["KeyId"])


def s3_clock_skew(store: Store) -> tuple[float, str]:
    """(seconds the S3 endpoint's clock, its Date header, is ahead of this host's; the error
    code of the HEAD of the bucket, "" if it answered 200)."""
    from jobs.objstore import _http_date

    import botocore.exceptions

    s3 = store.store
    before = time.time()
    code = ""
    try:  # any answer carries the Date header, a 403 or 404 too
        response = s3.client.head_bucket(Bucket=s3.bucket)
    except botocore.exceptions.ClientError as exc:
        response = exc.response
        code = str(response.get("Error", {}).get("Code", ""))
    after = time.time()
    server = _http_date(response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date"))
    if server is None:
        raise CheckFailed("the endpoint sent no Date header")
    # The header has 1 s resolution and was stamped between before and after.
    local = (before + after) / 2
    return server.timestamp() + 0.5 - local, code


# --- artefact, Airflow, Spark ------------------------------------------------------------------

def installed_version() -> str:
    """The installed recrawl package's version (pyproject.toml in a checkout without one)."""
    from importlib import metadata

    try:
        return metadata.version("recrawl")
    except metadata.PackageNotFoundError:
        from jobs import artefact

        return artefact.version()


def check_artefact(uri: str, endpoint_url: Optional[str] = None) -> str:
    from jobs import artefact
    from jobs.objstore import ObjectAccessDenied, ObjectNotFound, open_store

    name = uri.rstrip("/").rsplit("/", 1)[-1]
    store, location = open_store(uri.rsplit("/", 1)[0] + "/", endpoint_url=endpoint_url)
    key = "/".join(p for p in (location.prefix, name) if p)
    entry = key[:-len(".zip")] + ".py"
    try:
        data = store.get_bytes(key)
        if store.head(entry) is None:
            raise CheckFailed(f"driver entry {entry.rsplit('/', 1)[-1]} is not beside the zip")
    except ObjectNotFound as exc:
        raise CheckFailed(f"{exc} is missing") from exc
    except ObjectAccessDenied as exc:
        raise CheckFailed(str(exc)) from exc
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            meta = json.loads(zf.read(artefact.MANIFEST))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise CheckFailed(f"not a recrawl artefact ({_short(exc)})") from exc
    version, installed = meta.get("version"), installed_version()
    if name != artefact.artefact_names(str(version))[0]:
        raise CheckFailed(f"file name {name} does not carry its version {version}")
    if version != installed:
        raise CheckFailed(f"artefact version {version} != installed package {installed}: the "
                           "cluster would run other code than the workers (build and upload "
                           f"{artefact.artefact_names(installed)[0]}, or install {version})")
    commit = (meta.get("git_commit") or "")[:12]
    return f"version {version}{f' (git {commit})' if commit else ''} = installed; entry beside it"


def airflow_connection(conn_id: str):
    """The Airflow connection ``conn_id`` (None if undefined); ImportError without Airflow."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def master_reachable(master: str, timeout_s: float = 5.0) -> None:
    """For spark://host:port masters (comma lists too): a TCP connect to one of them."""
    if not master.startswith("spark://"):
        return
    errors = []
    for hostport in master[len("spark://"):].split(","):
        parsed = urlparse(f"spark://{hostport}")
        try:
            with socket.create_connection((parsed.hostname, parsed.port or 7077), timeout_s):
                return
        except OSError as exc:
            errors.append(f"{hostport}: {exc.strerror or exc}")
    raise ConnectionError("; ".join(errors))


# Submitted with spark-submit exactly as a stage is (master, --conf, the cluster's
# spark-defaults.conf): needs pyspark only, no recrawl code on the cluster.
PROBE_SCRIPT = r'''
import json, platform, socket, sys, time
import pyspark
from pyspark.sql import SparkSession

def facts(_):
    import json, platform, socket, sys, time
    import pyspark
    yield {"python": platform.python_version(), "pyspark": pyspark.__version__,
           "executable": sys.executable, "host": socket.gethostname(), "time": time.time()}

spark = SparkSession.builder.appName("recrawl-preflight").getOrCreate()
sc = spark.sparkContext
sc.setLogLevel("ERROR")
n = max(2, sc.defaultParallelism)
before = time.time()
rows = sc.parallelize(range(n), n).mapPartitions(facts).collect()
after = time.time()
print("RECRAWL-PREFLIGHT " + json.dumps({
    "driver": {"python": platform.python_version(), "pyspark": pyspark.__version__,
               "executable": sys.executable},
    "executors": rows, "before": before, "after": after}), flush=True)
spark.stop()
'''


def spark_probe(master: str, conf: dict[str, str], timeout_s: float) -> dict:
    """spark-submit the probe to ``master`` (client mode); the driver's and executors' facts."""
    import shutil
    import tempfile

    binary = shutil.which("spark-submit") or os.path.join(os.path.dirname(sys.executable),
                                                          "spark-submit")
    with tempfile.TemporaryDirectory(prefix="recrawl-preflight-") as tmp:
        script = os.path.join(tmp, "recrawl_preflight_probe.py")
        with open(script, "w") as fh:
            fh.write(PROBE_SCRIPT)
        cmd = [binary, "--master", master, "--name", "recrawl-preflight"]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        try:
            out = subprocess.run(cmd + [script], capture_output=True, text=True,
                                 timeout=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired as exc:
            raise CheckFailed(f"the probe job did not finish within {timeout_s:g} s "
                              "(--spark-timeout-s): no executors granted?") from exc
    found = [line for line in out.stdout.splitlines() if line.startswith("RECRAWL-PREFLIGHT ")]
    if out.returncode != 0 or not found:
        tail = [line for line in out.stderr.splitlines() if line.strip()][-2:]
        raise CheckFailed(f"the probe job failed (spark-submit exit {out.returncode}): "
                           + " | ".join(t.strip()[:300] for t in tail))
    return json.loads(found[-1].split(" ", 1)[1])


def compare_executors(report: dict, max_skew_s: float) -> tuple[bool, str]:
    """(ok, reason): every executor's Python and pyspark equal the driver's, clocks agree."""
    driver = report["driver"]
    seen = {(r["python"], r["pyspark"], r["executable"]) for r in report["executors"]}
    bad = sorted(s for s in seen if s[:2] != (driver["python"], driver["pyspark"]))
    if bad:
        return False, (f"driver Python {driver['python']}, pyspark {driver['pyspark']}; executors "
                       + ", ".join(f"Python {p}, pyspark {v} ({exe})" for p, v, exe in bad))
    skews = [max(r["time"] - report["after"], report["before"] - r["time"], 0.0)
             for r in report["executors"]]
    worst = max(skews, default=0.0)
    if worst > max_skew_s:
        return False, f"an executor's clock is {worst:.1f} s off the driver's (bound {max_skew_s} s)"
    return True, (f"{len(report['executors'])} tasks: "
                  f"Python {driver['python']}, pyspark {driver['pyspark']} = driver's; "
                  f"clocks within {max(worst, 1.0):.0f} s")


# --- the run ------------------------------------------------------------------------------

def _attempt(check: str, action: Callable[[], str]) -> Result:
    try:
        return Result("PASS", check, action())
    except Exception as exc:  # noqa: BLE001 - every failure is reported as one line
        return Result("FAIL", check, _short(exc))


def _kms_keys(cfg: Config) -> list[tuple[str, str, tuple[str, ...]]]:
    """(store name, key id, roles writing with it) of every configured SSE-KMS key."""
    keys = []
    s3a_key = cfg.spark.cluster_settings.get(S3A_KEY, "")
    if s3a_key:
        keys.append(("data", s3a_key, ("update_state", "allocate_build_schedule", INTAKE)))
    if cfg.publish.sse_kms_key_id:
        keys.append(("publish", cfg.publish.sse_kms_key_id, ("publish",)))
    return keys


def check_connector(cfg: Config) -> Result:
    name = "s3a connector"
    if not cfg.paths.root.startswith("s3a://"):
        return Result("SKIP", name, f"data root {cfg.paths.root} is not s3a://")
    asked = s3a.hadoop_aws_versions(cfg.spark.cluster_settings)
    hadoop = s3a.bundled_versions().get("hadoop", "?")
    if not asked:
        return Result("SKIP", name, "spark.cluster_settings names no hadoop-aws: the cluster's "
                                    f"image must hold hadoop-aws {hadoop} (EMR has it)")
    wrong = sorted(set(v for v in asked if v != hadoop))
    if wrong:
        return Result("FAIL", name, f"spark.cluster_settings asks for hadoop-aws {', '.join(wrong)}; "
                                    f"pyspark bundles Hadoop {hadoop} ({s3a.HADOOP_AWS})")
    return Result("PASS", name, f"hadoop-aws {hadoop} = the Hadoop pyspark bundles")


def check_intake_layout(cfg: Config) -> str:
    """intake writes ``host_policy/dt=D``: the table must be dated or absent, not flat."""
    from jobs import snapshots

    snapshots.require_dated(cfg, "host_policy", "intake")
    return "dated snapshots (dt=...) or none: intake's host_policy/dt=D fits beside them"


def run_checks(cfg: Config, roles: list[str], *, master: Optional[str] = None,
               max_clock_skew_s: float = 30.0, spark_timeout_s: float = 300.0,
               spark: bool = True) -> Iterator[Result]:
    yield check_connector(cfg)
    if INTAKE in roles and not cfg.intake.enabled:
        roles = [r for r in roles if r != INTAKE]
        yield Result("SKIP", INTAKE, "intake.enabled is false: its tables are not checked")
    try:
        stores = open_stores(cfg)
    except (ValueError, ConfigError) as exc:
        yield Result("FAIL", "stores", _short(exc))
        return
    # clock: one S3 endpoint answer per bucket; a bucket that does not exist is said once
    missing = set()
    for store in list(stores.values()):
        if not hasattr(store.store, "client"):
            yield Result("SKIP", f"clock {store.name}", f"{store.uri} is not on S3")
            continue
        try:
            skew, code = s3_clock_skew(store)
        except Exception as exc:  # noqa: BLE001 - unreachable endpoint, no Date header
            yield Result("FAIL", f"clock {_where(store)}", _short(exc))
            continue
        if code in ("404", "NoSuchBucket", "NotFound"):
            missing.add(store.name)
            yield Result("FAIL", f"bucket {_where(store)}",
                         "does not exist (NoSuchBucket): nothing under it was checked")
        if abs(skew) > max_clock_skew_s:
            yield Result("FAIL", f"clock {_where(store)}",
                         f"S3 Date header is {skew:+.1f} s off this host's clock "
                         f"(bound {max_clock_skew_s} s): fix NTP")
        else:
            yield Result("PASS", f"clock {_where(store)}", f"S3 Date header {skew:+.1f} s from "
                                                            f"this host's clock (bound {max_clock_skew_s} s)")
    # stage access, each (mode, store, prefix) once, naming the roles that need it
    needs: dict[tuple[str, str, str], list[str]] = {}
    for role in roles:
        access = ACCESS[role]
        for mode in ("read", "write"):
            for store_name, prefixes in access.get(mode, {}).items():
                for prefix in prefixes:
                    needs.setdefault((mode, store_name, prefix), []).append(role)
        for store_name in access.get("lock", ()):
            needs.setdefault(("lock", store_name, LOCKS), []).append(role)
    probes = {"read": check_read, "write": check_write}
    for (mode, store_name, prefix), who in needs.items():
        if store_name in missing:
            continue
        store = stores[store_name]
        label = f"{mode} {_where(store, prefix)} ({', '.join(who)})"
        if mode == "lock":
            yield _attempt(label, lambda store=store: check_lock(store))
        else:
            yield _attempt(label, lambda store=store, prefix=prefix, f=probes[mode]: f(store, prefix))
    if INTAKE in roles and "data" not in missing:
        yield _attempt(f"host_policy layout ({INTAKE})", lambda: check_intake_layout(cfg))
    # KMS keys
    keys = _kms_keys(cfg)
    if not keys:
        yield Result("SKIP", "kms", "no SSE-KMS key configured (publish.sse_kms_key_id, "
                                    f"spark.cluster_settings {S3A_KEY})")
    for store_name, key_id, users in keys:
        if store_name in missing:
            continue
        store = stores[store_name]
        who = [r for r in roles if r in users]
        label = f"kms {key_id} ({', '.join(who or users)})"
        if not hasattr(store.store, "client"):
            yield Result("SKIP", label, f"{store.uri} is not on S3")
        elif not who:
            yield Result("SKIP", label, "none of --roles writes with it")
        else:
            prefix = ACCESS[who[0]]["write"][store_name][0]
            yield _attempt(label, lambda store=store, prefix=prefix, key_id=key_id: check_kms(
                store, prefix, key_id, _kms_client(store)))
    # artefact
    if cfg.airflow.py_files:
        yield _attempt(f"artefact {cfg.airflow.py_files}",
                       lambda: check_artefact(cfg.airflow.py_files))
    else:
        yield Result("SKIP", "artefact", "airflow.py_files is empty (embedded master only)")
    # Airflow connections
    conn_master = None
    try:
        spark_conn = airflow_connection(cfg.airflow.spark_conn_id)
    except ImportError:
        yield Result("SKIP", "airflow connections", "Airflow is not installed here")
    else:
        name = f"airflow connection {cfg.airflow.spark_conn_id}"
        if spark_conn is None:
            yield Result("FAIL", name, "not defined (airflow.spark_conn_id; "
                                       "infra/production/airflow_connections.md)")
        else:
            conn_master = spark_conn.host or ""
            yield Result("PASS", name, f"{spark_conn.conn_type}, master {conn_master}")
        if cfg.airflow.alert_conn_id:
            alerts = airflow_connection(cfg.airflow.alert_conn_id)
            yield Result("PASS", f"airflow connection {cfg.airflow.alert_conn_id}",
                         f"{alerts.conn_type}, alerts go to {alerts.host}" if alerts else
                         "not defined: alerts go to the task logs (jobs/notify.py)")
    # Spark
    if spark:
        yield from spark_checks(cfg, master or conn_master or cfg.spark.master,
                                max_clock_skew_s, spark_timeout_s)


def _kms_client(store: Store):
    import boto3

    endpoint = store.store.client.meta.endpoint_url
    # the KMS endpoint of a non-AWS S3 (moto) is the same server; AWS: the region's KMS
    custom = None if endpoint.endswith(".amazonaws.com") else endpoint
    return boto3.session.Session().client("kms", endpoint_url=custom,
                                          region_name=store.store.client.meta.region_name)


def spark_checks(cfg: Config, master: str, max_skew_s: float,
                 timeout_s: float) -> Iterator[Result]:
    name = f"spark master {master}"
    try:
        master_reachable(master)
    except ConnectionError as exc:
        yield Result("FAIL", name, f"does not answer: {exc}")
        return
    # What the DAG sends on this master, minus the connector's jars (checked above; their
    # resolution at submit time needs Maven Central, which the probe does not).
    conf = {k: v for k, v in cfg.spark.cluster_settings.items()
            if k not in ("spark.jars.packages", "spark.jars")}
    if embedded_master(master):
        conf = {}
    elif cfg.spark.python:
        conf["spark.pyspark.python"] = cfg.spark.python
    try:
        report = spark_probe(master, conf, timeout_s)
    except (CheckFailed, ValueError) as exc:
        yield Result("FAIL", name, _short(exc))
        return
    yield Result("PASS", name, f"ran a probe job ({len(report['executors'])} tasks)")
    ok, reason = compare_executors(report, max_skew_s)
    yield Result("PASS" if ok else "FAIL", "spark executors", reason)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    doc = __doc__.strip()
    parser = argparse.ArgumentParser(
        description=doc.split("\n")[0], epilog=doc.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--roles", default=",".join(ACCESS),
                        help="comma list of the roles whose access to check, as the identity this "
                             "runs under (default: all): " + ", ".join(ACCESS))
    parser.add_argument("--master", default=None,
                        help="Spark master to check (default: the Airflow connection's host, "
                             "else spark.master)")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark checks")
    parser.add_argument("--max-clock-skew-s", type=float, default=30.0,
                        help="largest clock difference accepted (default 30 s)")
    parser.add_argument("--spark-timeout-s", type=float, default=300.0,
                        help="time the Spark probe job may take (default 300 s)")
    args = parser.parse_args(argv)
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    unknown = sorted(set(roles) - set(ACCESS))
    try:
        if unknown:
            raise ConfigError(f"--roles: unknown {unknown}; known: {', '.join(ACCESS)}")
        cfg = config_from_args(args)
    except ConfigError as exc:
        print(Result("FAIL", "config", str(exc)).line(), flush=True)
        return EXIT_REFUSED
    print(Result("PASS", "config", f"{args.config or '(defaults)'}: data root {cfg.paths.root}, "
                                   f"publish target {cfg.publish.target}").line(), flush=True)
    failed = 0
    for result in run_checks(cfg, roles, master=args.master, max_clock_skew_s=args.max_clock_skew_s,
                             spark_timeout_s=args.spark_timeout_s, spark=not args.no_spark):
        print(result.line(), flush=True)
        failed += result.status == "FAIL"
    print(f"{'FAILED' if failed else 'OK'}: {failed} check(s) failed", flush=True)
    return EXIT_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main())
