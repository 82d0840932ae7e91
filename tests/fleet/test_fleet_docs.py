"""Every code block of docs/fleet.md runs as written, in a fresh interpreter, against the S3
server on loopback: a day published by the planner's publish is read shard by shard and the
fetcher's log is written back, and the log is what the planner's contract expects.

docs/queries.md's blocks (```sql duckdb / ```sql spark) run in tests/ops/test_queries.py and
tests/ops/test_explain.py; here only that it holds no other kind of block.
"""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import schemas
from jobs.publish import ensure_bucket, publish
from tests.conftest import REPO
from tests.s3server import (DUMMY_AWS_ENV, UNSET_AWS_ENV, MotoS3Server, dummy_aws_env,
                            sample_schedule, stage_schedule)

SCHEDULES, FETCH_LOGS = "s3://sched/daily", "s3://data/fetch_logs"


def code_blocks(doc: str) -> list[tuple[str, str]]:
    """(info string, text) of every fenced block of a markdown file under docs/."""
    text = open(os.path.join(REPO, "docs", doc)).read()
    return [(m.group(1).strip(), m.group(2))
            for m in re.finditer(r"^```([^\n]*)\n(.*?)^```$", text, re.M | re.S)]


def publish_today(endpoint_url: str, staging: str, n_rows: int = 300) -> tuple[str, int]:
    """Today's schedule (UTC) published to SCHEDULES on the server: (date, rows)."""
    day = datetime.now(timezone.utc).date().isoformat()
    for bucket in ("sched", "data"):
        ensure_bucket(endpoint_url, bucket)
    df = sample_schedule(n_rows=n_rows, n_hosts=12, day=day)
    stage_schedule(df, staging, n_shards=4)
    publish(staging, SCHEDULES, day, {"run": "docs"}, endpoint_url=endpoint_url)
    return day, len(df)


def fetcher_env(endpoint_url: str) -> dict:
    """A fetcher's environment: the AWS settings the docs name, nothing of this checkout's
    own settings (no PYTHONPATH: the interpreter imports the jobs it has installed)."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET_AWS_ENV and k != "PYTHONPATH"}
    return {**env, **DUMMY_AWS_ENV, "AWS_ENDPOINT_URL": endpoint_url,
            "RECRAWL_SCHEDULES": SCHEDULES, "RECRAWL_FETCH_LOGS": FETCH_LOGS,
            "FETCHER": "0", "FETCHERS": "1"}


def fetch_log_rows(server: MotoS3Server, day: str) -> pa.Table:
    """Every fetch-log part the fetcher wrote for ``day``, checked against the contract."""
    client = server.client()
    listed = client.list_objects_v2(Bucket="data", Prefix=f"fetch_logs/dt={day}/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert keys and all(re.search(r"/part-[^/]+\.parquet$", k) for k in keys), keys
    tables = [pq.read_table(io.BytesIO(client.get_object(Bucket="data", Key=k)["Body"].read()))
              for k in keys]
    for table in tables:
        schemas.check_schema(schemas.FETCH_LOG, table.schema, keys[0])
    return pa.concat_tables(tables)


def test_fleet_doc_has_only_python_blocks_and_queries_doc_only_sql_ones():
    assert [info for info, _ in code_blocks("fleet.md")] == ["python", "python", "python"]
    assert {info for info, _ in code_blocks("queries.md")} == {"sql duckdb", "sql spark"}


def test_every_fleet_doc_block_runs_as_written_against_s3(tmp_path):
    program = "\n".join(text for _, text in code_blocks("fleet.md"))
    with dummy_aws_env(), MotoS3Server() as server:
        env = fetcher_env(server.endpoint_url)
        day, rows = publish_today(server.endpoint_url, str(tmp_path / "staging"))
        done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path,
                              env={**env, "PYTHONPATH": REPO}, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        log = fetch_log_rows(server, day)
        docs = server.client().list_objects_v2(Bucket="data", Prefix=f"documents/dt={day}/")
    assert len(docs.get("Contents", [])) == 1  # the robots.txt the third block handed over
    assert log.num_rows == rows
    assert set(log["status"].to_pylist()) <= {200, 304}
    hashed = [h is not None for h in log["content_hash"].to_pylist()]
    assert hashed == [s == 200 for s in log["status"].to_pylist()] and any(hashed)
