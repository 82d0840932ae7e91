"""The fleet's DocumentWriter: rows checked at the source with the planner's rules, parts the
planner's contract check accepts, locally and on S3 (the loopback moto server)."""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import boto3
import pyarrow.parquet as pq
import pytest

from jobs import schemas
from jobs.fleet.documents import DocumentRowError, DocumentWriter
from jobs.fleet.fetch_log import FetchLogRowError
from tests.conftest import REPO

DATE = "2026-11-29"
T0 = datetime(2026, 11, 29, 8, 30, tzinfo=timezone.utc)


def row(**changes) -> dict:
    base = {"url": "https://Example.org/robots.txt", "kind": "robots", "fetched_at": T0,
            "status": 200, "content_type": "text/plain", "body": b"User-agent: *\n"}
    base.update(changes)
    return base


def test_round_trip_local_parts_meet_the_documents_contract(tmp_path):
    out = tmp_path / "documents" / f"dt={DATE}"
    with DocumentWriter(str(out), date=DATE, rows_per_part=2, writer_id="w1") as docs:
        docs.write(row())
        docs.write(row(url="https://example.org/sitemap.xml.gz", kind="sitemap",
                       body=b"\x1f\x8b\x08\x00", content_type=None))
        docs.write(row(status=404, body=None, host="EXAMPLE.org."))
    assert [p.rsplit("/", 1)[1] for p in docs.parts] == ["part-w1-00000.parquet",
                                                         "part-w1-00001.parquet"]
    footers = schemas.check_files(schemas.DOCUMENTS, docs.parts)
    assert sum(f.num_rows for f in footers) == 3
    rows = pq.read_table(str(out)).to_pylist()
    assert [r["host"] for r in rows] == ["example.org"] * 3
    assert rows[1]["body"] == b"\x1f\x8b\x08\x00" and rows[2]["body"] is None


@pytest.mark.parametrize("changes, column, message", [
    ({"kind": "page"}, "kind", "not one of"),
    ({"url": "ftp://example.org/robots.txt"}, "url", "bad_url"),
    ({"url": "https://u:p@example.org/robots.txt"}, "url", "url_userinfo"),
    ({"host": "other.org"}, "host", "host_mismatch"),
    ({"fetched_at": datetime(2026, 11, 30, tzinfo=timezone.utc)}, "fetched_at", "outside"),
    ({"fetched_at": datetime(2026, 11, 29, 8)}, "fetched_at", "timezone-aware"),
    ({"status": 99}, "status", "bad_status"),
    ({"body": "text, not bytes"}, "body", "not bytes"),
    ({"content_type": 5}, "content_type", "not a string"),
    ({"bodyy": b""}, "bodyy", "not a documents column"),
])
def test_a_bad_row_is_refused_naming_the_column(tmp_path, changes, column, message):
    docs = DocumentWriter(str(tmp_path), date=DATE)
    with pytest.raises(DocumentRowError, match=message) as err:
        docs.write(row(**changes))
    assert err.value.column == column and str(err.value).startswith("documents row 0")
    assert isinstance(err.value, FetchLogRowError)  # the same refusal class: exit 2 on a CLI
    assert docs.close() == []


def test_parts_go_to_s3_in_one_put_each(s3_server):
    client = boto3.client("s3", endpoint_url=s3_server.endpoint_url)
    client.create_bucket(Bucket="fleet-docs")
    with DocumentWriter(f"s3://fleet-docs/data/documents/dt={DATE}", date=DATE,
                        endpoint_url=s3_server.endpoint_url, writer_id="s3w") as docs:
        docs.write(row())
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="fleet-docs")["Contents"]]
    assert keys == [f"data/documents/dt={DATE}/part-s3w-00000.parquet"]


def test_the_writer_imports_without_spark_or_the_parsers():
    code = ("import sys, jobs.fleet.documents; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow', "
            "'protego', 'feedparser', 'defusedxml') or m in ('jobs.config', 'jobs.ingest')); "
            "print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
