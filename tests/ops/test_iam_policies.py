"""Every policy under infra/production/ checked for least privilege, TLS and encryption
(issue 9, section 4).

``NEEDS`` is the documented table of what each role's stage does in S3 and KMS, read from
the code: a policy must grant exactly that (nothing missing, nothing more). Change a stage's
reads or writes and this table and its policy change together.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

PROD = Path(__file__).resolve().parents[2] / "infra" / "production"
JOBS = Path(__file__).resolve().parents[2] / "jobs"
DATA, SCHED, ART = "recrawl-data", "recrawl-schedules", "recrawl-artifacts"
SPARK_WRITE = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
               "s3:ListMultipartUploadParts")  # S3A + magic committer rewrite partitions


def objs(bucket: str, *prefixes: str) -> set[str]:
    return {f"arn:aws:s3:::{bucket}/{p}/*" for p in prefixes}


def listing(bucket: str, *prefixes: str) -> set[str]:
    return {f"arn:aws:s3:::{bucket}?prefix={p}/*" for p in prefixes}


def key_of(bucket: str) -> str:
    """The bucket's default SSE-KMS key, from its bucket_encryption file."""
    rule = json.loads((PROD / "bucket_encryption" / f"{bucket}.json").read_text())["Rules"][0]
    default = rule["ApplyServerSideEncryptionByDefault"]
    assert default["SSEAlgorithm"] == "aws:kms"
    return default["KMSMasterKeyID"]


def spark_role(reads: tuple[str, ...], writes: tuple[str, ...]) -> dict[str, set[str]]:
    """A Spark stage on the data root: read inputs, rewrite its outputs (multipart); the
    artefact's code (YARN localises --py-files with the nodes' role); preflight's key check."""
    needs = {"s3:GetObject": objs(DATA, *reads, *writes) | objs(ART, "recrawl"),
             "s3:ListBucket": listing(DATA, *reads, *writes),
             "s3:ListBucketMultipartUploads": {f"arn:aws:s3:::{DATA}"},
             "kms:Decrypt": {key_of(DATA)}, "kms:GenerateDataKey": {key_of(DATA)},
             "kms:DescribeKey": {key_of(DATA)}}
    for action in SPARK_WRITE[1:]:
        needs[action] = objs(DATA, *writes)
    return needs


# role file -> action -> resources. Sources: jobs/ingest.py + update_state.py; allocate.py +
# build_schedule.py (frontier/host_policy quarantine: grep write_quarantine); publish.py
# (staging GET, lock/manifest conditional PUT + GET/HEAD, GC DELETE, LIST); verify.py
# (schedules + the previous day, host_policy for the midnight gap); the fleet's reader
# (jobs.verify.read_schedule: 404 means "republished, re-read", so it needs ListBucket);
# the Airflow worker (dag_tasks.logs_present + validate_logs: footers, its _runs record; the
# artefact, which spark-submit reads in client mode and `recrawl preflight` checks). Preflight
# (jobs/preflight.py) probes with what the stages need, plus: kms:DescribeKey of the key a role
# writes with, a delete of its probe in _runs/_preflight/, ListBucket on publish's staging
# (so that a missing _shards.json is a 404, not a 403). release: CI uploads the artefact.
NEEDS: dict[str, dict[str, set[str]]] = {
    "update_state": spark_role(
        reads=("fetch_logs", "signals", "frontier", "importance", "host_policy"),
        writes=("state", "quarantine", "metrics", "hosts", "_runs")),
    "intake": spark_role(
        reads=("documents",),
        writes=("signals", "host_policy", "document_refs", "quarantine", "_runs")),
    "allocate_build_schedule": spark_role(
        reads=("state", "hosts", "frontier", "importance", "host_policy", "overrides"),
        writes=("_work", "plan", "schedules", "metrics", "_runs", "quarantine")),
    "publish": {
        "s3:GetObject": objs(DATA, "schedules") | objs(SCHED, "schedules"),
        "s3:PutObject": objs(SCHED, "schedules"), "s3:DeleteObject": objs(SCHED, "schedules"),
        "s3:ListBucket": listing(SCHED, "schedules") | listing(DATA, "schedules"),
        "kms:Decrypt": {key_of(DATA), key_of(SCHED)}, "kms:GenerateDataKey": {key_of(SCHED)},
        "kms:DescribeKey": {key_of(SCHED)}},
    "verify": {
        "s3:GetObject": objs(SCHED, "schedules") | objs(DATA, "host_policy"),
        "s3:ListBucket": listing(SCHED, "schedules") | listing(DATA, "host_policy"),
        "kms:Decrypt": {key_of(SCHED), key_of(DATA)}},
    "fetchers": {
        "s3:GetObject": objs(SCHED, "schedules"), "s3:ListBucket": listing(SCHED, "schedules"),
        "kms:Decrypt": {key_of(SCHED)}},
    "airflow_worker": {
        "s3:GetObject": objs(DATA, "fetch_logs", "importance", "host_policy", "signals",
                             "frontier", "_runs") | objs(ART, "recrawl"),
        "s3:ListBucket": listing(DATA, "fetch_logs", "importance", "host_policy", "signals",
                                 "frontier", "_runs"),
        "s3:PutObject": objs(DATA, "_runs"), "s3:DeleteObject": objs(DATA, "_runs/_preflight"),
        "kms:Decrypt": {key_of(DATA)}, "kms:GenerateDataKey": {key_of(DATA)}},
    "release": {
        "s3:GetObject": objs(ART, "recrawl"), "s3:PutObject": objs(ART, "recrawl"),
        "s3:ListBucket": listing(ART, "recrawl")},
}
# Spark stage module -> the role it runs as.
STAGE_ROLES = {"update_state": "update_state", "allocate": "allocate_build_schedule",
               "build_schedule": "allocate_build_schedule", "intake": "intake"}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def statements(doc: dict) -> list[dict]:
    found = doc["Statement"]
    return found if isinstance(found, list) else [found]


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def grants(doc: dict) -> dict[str, set[str]]:
    """action -> resources an identity policy allows (ListBucket: one entry per prefix)."""
    out: dict[str, set[str]] = {}
    for st in statements(doc):
        assert st["Effect"] == "Allow", f"{st.get('Sid')}: role policies only allow"
        prefixes = st.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
        for action in as_list(st["Action"]):
            for resource in as_list(st["Resource"]):
                if action == "s3:ListBucket" and prefixes:
                    out.setdefault(action, set()).update(f"{resource}?prefix={p}"
                                                         for p in as_list(prefixes))
                else:
                    out.setdefault(action, set()).add(resource)
    return out


def test_every_json_under_infra_production_parses():
    files = sorted(PROD.rglob("*.json"))
    assert len(files) >= 10
    for path in files:
        load(path)


def test_each_role_is_in_the_needs_table():
    assert {p.stem for p in (PROD / "iam").glob("*.json")} == set(NEEDS)


@pytest.mark.parametrize("role", sorted(NEEDS))
def test_role_grants_exactly_what_its_stage_needs(role):
    got = grants(load(PROD / "iam" / f"{role}.json"))
    assert got == NEEDS[role], {a: (got.get(a, set()) ^ NEEDS[role].get(a, set()))
                                for a in set(got) | set(NEEDS[role])
                                if got.get(a) != NEEDS[role].get(a)}


@pytest.mark.parametrize("role", sorted(NEEDS))
def test_no_wildcard_actions_or_resources(role):
    """No ``*`` in an action; in a resource only as ``bucket/<named prefix>/*``."""
    for st in statements(load(PROD / "iam" / f"{role}.json")):
        for action in as_list(st["Action"]):
            assert "*" not in action, (role, action)
        for resource in as_list(st["Resource"]):
            if "*" in resource:
                assert re.fullmatch(r"arn:aws:s3:::[a-z0-9.-]+/[A-Za-z0-9_=.-]+(/[A-Za-z0-9_=.-]+)*/\*",
                                    resource), (role, resource)


@pytest.mark.parametrize("role", sorted(NEEDS))
def test_kms_grants_are_scoped_to_s3_and_cover_every_encrypted_bucket_used(role):
    doc = load(PROD / "iam" / f"{role}.json")
    got = grants(doc)
    for st in statements(doc):  # DescribeKey (metadata only) is preflight's, called directly
        if any(a.startswith("kms:") and a != "kms:DescribeKey" for a in as_list(st["Action"])):
            assert st["Condition"]["StringEquals"]["kms:ViaService"].startswith("s3."), st["Sid"]
    for bucket in (DATA, SCHED):
        reads = any(r.startswith(f"arn:aws:s3:::{bucket}/") for r in got.get("s3:GetObject", ()))
        writes = any(r.startswith(f"arn:aws:s3:::{bucket}/") for r in got.get("s3:PutObject", ()))
        assert not reads or key_of(bucket) in got.get("kms:Decrypt", ()), (role, bucket)
        assert not writes or key_of(bucket) in got.get("kms:GenerateDataKey", ()), (role, bucket)


@pytest.mark.parametrize("stage, role", sorted(STAGE_ROLES.items()))
def test_stages_that_quarantine_rows_may_write_quarantine(stage, role):
    """Derived from the code: a stage calling write_quarantine needs quarantine/ writes."""
    if "write_quarantine" in (JOBS / f"{stage}.py").read_text():
        assert objs(DATA, "quarantine") <= grants(load(PROD / "iam" / f"{role}.json"))["s3:PutObject"]


def test_fetchers_can_list_so_a_missing_key_is_404_as_the_reader_expects():
    """Without ListBucket S3 answers 403 for a missing key; the reader re-reads the manifest
    on a 404 (and reports a 403 as "missing or denied")."""
    assert listing(SCHED, "schedules") <= grants(load(PROD / "iam" / "fetchers.json"))["s3:ListBucket"]


@pytest.mark.parametrize("bucket", [DATA, SCHED, ART])
def test_bucket_policy_denies_plain_http(bucket):
    doc = load(PROD / "bucket_policies" / f"{bucket}.json")
    tls = [st for st in statements(doc) if st["Effect"] == "Deny"
           and st.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
    assert tls, bucket
    assert as_list(tls[0]["Action"]) == ["s3:*"] and tls[0]["Principal"] == "*"
    assert set(as_list(tls[0]["Resource"])) == {f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"}


def _put_denies(bucket: str) -> list[dict]:
    doc = load(PROD / "bucket_policies" / f"{bucket}.json")
    return [st for st in statements(doc) if st["Effect"] == "Deny"
            and as_list(st["Action"]) == ["s3:PutObject"]
            and as_list(st["Resource"]) == [f"arn:aws:s3:::{bucket}/*"]]


def _denies_when(st: dict, key: str, value: str) -> bool:
    return st.get("Condition", {}).get("StringNotEquals", {}).get(key) == value


def test_publish_bucket_denies_every_put_without_sse_kms_and_its_key():
    """publish sends SSE-KMS on every PUT (publish.sse_kms_key_id): a put without the header
    (StringNotEquals with no Null guard matches a missing header) or with another key is denied."""
    denies = _put_denies(SCHED)
    strict = [st for st in denies if _denies_when(st, "s3:x-amz-server-side-encryption", "aws:kms")]
    assert strict and "Null" not in strict[0]["Condition"]
    assert any(_denies_when(st, "s3:x-amz-server-side-encryption-aws-kms-key-id", key_of(SCHED))
               for st in denies)


def test_data_bucket_encrypts_every_put_with_its_key():
    """The data root is also written by pyarrow (schedule shards, run records), which cannot
    send SSE headers: its puts are encrypted by the bucket's default SSE-KMS key, and any put
    asking for another algorithm or key is denied. S3A sends the same key explicitly."""
    denies = _put_denies(DATA)
    other_alg = [st for st in denies if _denies_when(st, "s3:x-amz-server-side-encryption", "aws:kms")]
    assert other_alg and other_alg[0]["Condition"]["Null"] == {"s3:x-amz-server-side-encryption": "false"}
    assert any(_denies_when(st, "s3:x-amz-server-side-encryption-aws-kms-key-id", key_of(DATA))
               for st in denies)
    from jobs.config import load_config

    sent = load_config(str(PROD / "recrawl.production.toml")).spark.cluster_settings
    assert sent["spark.hadoop.fs.s3a.encryption.algorithm"] == "SSE-KMS"
    assert sent["spark.hadoop.fs.s3a.encryption.key"] == key_of(DATA)
    assert "fs.s3a.encryption" not in (PROD / "spark-defaults.conf").read_text()  # one home


# --- the artefacts bucket and who may assume each role ----------------------------------------

ROLES = json.loads((PROD / "roles.json").read_text())
ACCOUNT = "111122223333"


def test_every_policy_belongs_to_exactly_one_role_with_a_trust_policy():
    attached = [p for role in ROLES.values() for p in role["policies"]]
    assert sorted(attached) == sorted(f"iam/{p.name}" for p in (PROD / "iam").glob("*.json"))
    assert {f"iam/trust/{p.name}" for p in (PROD / "iam" / "trust").glob("*.json")} == \
        {role["trust"] for role in ROLES.values()}
    assert set(ROLES) == {p.stem for p in (PROD / "iam" / "trust").glob("*.json")}


@pytest.mark.parametrize("role", sorted(ROLES))
def test_trust_policy_names_who_may_assume_the_role(role):
    """Allow only, one named principal kind (a service, a role of the account, an OIDC
    provider with its audience and subject pinned), never ``*``, no Resource."""
    for st in statements(load(PROD / ROLES[role]["trust"])):
        assert st["Effect"] == "Allow" and "Resource" not in st, st
        principal = st["Principal"]
        assert isinstance(principal, dict) and len(principal) == 1 and "*" not in json.dumps(principal)
        kind, value = next(iter(principal.items()))
        if kind == "Service":
            assert value == "ec2.amazonaws.com" and st["Action"] == "sts:AssumeRole"
        elif kind == "AWS":
            assert value.startswith(f"arn:aws:iam::{ACCOUNT}:role/") and st["Action"] == "sts:AssumeRole"
        else:
            assert kind == "Federated" and st["Action"] == "sts:AssumeRoleWithWebIdentity"
            assert st["Condition"]["StringEquals"]["token.actions.githubusercontent.com:aud"] == \
                "sts.amazonaws.com"
            assert ":ref:refs/tags/" in st["Condition"]["StringLike"]["token.actions.githubusercontent.com:sub"]


def test_only_the_release_role_writes_code_and_the_nodes_read_it():
    """The artefacts bucket: code is written by CI's release role only (bucket policy), read by
    whoever runs it (spark-submit on the Airflow workers, YARN localisation on the nodes)."""
    denies = [st for st in statements(load(PROD / "bucket_policies" / f"{ART}.json"))
              if st["Effect"] == "Deny" and "s3:PutObject" in as_list(st["Action"])]
    assert len(denies) == 1 and "s3:DeleteObject" in denies[0]["Action"]
    assert denies[0]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] == \
        f"arn:aws:iam::{ACCOUNT}:role/recrawl-release"
    writers = {r for r in NEEDS if any(x.startswith(f"arn:aws:s3:::{ART}/")
                                       for x in NEEDS[r].get("s3:PutObject", ()))}
    assert writers == {"release"} and ROLES["recrawl-release"]["policies"] == ["iam/release.json"]
    readers = {r for r in NEEDS if objs(ART, "recrawl") <= NEEDS[r].get("s3:GetObject", set())}
    assert {"update_state", "allocate_build_schedule", "airflow_worker"} <= readers
