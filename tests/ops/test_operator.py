"""The operator's commands on a root built by the real stages (e2e: Spark): an outage day
carried forward (daily and rebuilt alike), ``recrawl status``, ``stats`` and ``dump``.

Five generated days D1..D5; the fleet "did not fetch" on D3 (its logs removed). D1, D2 are
run daily and D2 planned and published to a loopback S3 server; D3 is declared an outage
through the real command (no Spark); D4 is run and planned. The commands under test run as
an operator runs them, ``python -m jobs.console ...`` in a subprocess.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from jobs import allocate, build_schedule, dag_tasks, partitions, update_state, validate_logs
from jobs.paths import schedule_date
from tests.conftest import make_config
from tests.s3server import MotoS3Server, dummy_aws_env

DAYS = ("2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29")
D1, D2, D3, D4, D5 = DAYS
INPUTS = ("fetch_logs", "signals", "importance", "host_policy", "frontier")


def _recrawl(sets, *args):
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "jobs.console", *args, *sets],
                         capture_output=True, text=True, timeout=600, env=dict(os.environ))
    out.seconds = time.monotonic() - started
    return out


def _frame(cfg, table, day):
    files = partitions.committed_files(cfg.paths.table(table, day), table)
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


@pytest.fixture(scope="module")
def root(spark, tmp_path_factory):
    from jobs.publish import ensure_bucket
    from lab.tools.generate_sample import generate_sample

    path = str(tmp_path_factory.mktemp("operator"))
    generate_sample(path, urls=500, hosts=10, days=len(DAYS), end_date=D5, seed=7)
    shutil.rmtree(os.path.join(path, "fetch_logs", f"dt={D3}"))  # the fleet's outage day
    shutil.rmtree(os.path.join(path, "fetch_logs", f"dt={D5}"))  # a day simply missing
    with dummy_aws_env(), MotoS3Server() as s3:
        ensure_bucket(s3.endpoint_url, "sched")
        overrides = ["budget.daily_fetches=300", "publish.target=s3://sched/daily",
                     f"publish.endpoint_url={s3.endpoint_url}"]
        cfg = make_config(path, *overrides)
        sets = [x for o in [f"paths.root={path}", "spark.master=local[2]",
                            "spark.state_buckets=2", "schedule.n_shards=4", *overrides]
                for x in ("--set", o)]
        for day in (D1, D2):
            validate_logs.run(cfg, day)
            update_state.run(cfg, day, spark, bootstrap=(day == D1))
        allocate.run(cfg, D2, spark)
        build_schedule.run(cfg, D2, spark)
        dag_tasks.run_publish(cfg, D2)
        outage = _recrawl(sets, "update-state", "--date", D3, "--no-fetches")
        validated = _recrawl(sets, "validate-logs", "--date", D3)
        update_state.run(cfg, D4, spark)
        allocate.run(cfg, D4, spark)
        build_schedule.run(cfg, D4, spark)
        yield {"cfg": cfg, "root": path, "sets": sets, "outage": outage,
               "validated": validated, "spark": spark}


# --- outage days ---------------------------------------------------------------------------

def test_an_outage_day_carries_state_and_hosts_forward_exactly(root):
    cfg, out = root["cfg"], root["outage"]
    assert out.returncode == 0, out.stderr
    assert out.seconds < 60, "carrying forward needs no Spark"
    record = json.loads(out.stdout)
    assert record["no_fetches"] is True and record["carried_from"] == D2
    assert record["log_rows"] == 0 and record["audit_freshness"] is None
    prev = json.load(open(f"{root['root']}/_runs/dt={D2}/update_state.json"))
    assert record["urls_known"] == prev["urls_known"] > 100
    assert record["hosts_by_class"] == prev["hosts_by_class"]
    for table, key in (("state", "url"), ("hosts", "host")):
        before = _frame(cfg, table, D2).sort_values(key).reset_index(drop=True)
        after = _frame(cfg, table, D3).sort_values(key).reset_index(drop=True)
        # Nothing changes: λ̂ included, and updated_dt stays the day that folded the row, so
        # the next fold decays the evidence over both days (age is computed at read time).
        pd.testing.assert_frame_equal(before, after, check_exact=True)
    assert os.path.exists(f"{root['root']}/fetch_logs/dt={D3}/_NO_FETCHES.json")
    validated = root["validated"]
    assert validated.returncode == 0, validated.stderr
    assert json.loads(validated.stdout)["no_fetches"] is True
    # The day after folds normally, from the carried state.
    state4 = _frame(cfg, "state", D4)
    assert len(state4) >= record["urls_known"] and np.isfinite(state4.lambda_hat).all()
    assert {str(d) for d in state4.updated_dt} == {D4}


def test_a_missing_day_stays_an_error(root):
    out = _recrawl(root["sets"], "update-state", "--date", D5)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert "SchemaError" in out.stderr and f"fetch_logs/dt={D5}" in out.stderr
    assert out.seconds < 60  # refused from the footers, before a Spark session


def test_rebuild_over_an_outage_day_equals_the_daily_runs(root, tmp_path):
    from jobs import rebuild_state

    cfg = root["cfg"]
    copy = str(tmp_path / "rebuilt")
    for table in INPUTS:  # the inputs only (the outage marker travels with fetch_logs)
        src = os.path.join(root["root"], table)
        if os.path.exists(src):
            shutil.copytree(src, os.path.join(copy, table))
    cfg2 = make_config(copy, "budget.daily_fetches=300")
    records = dict(zip(DAYS[:4], rebuild_state.run(cfg2, D1, D4, root["spark"])))
    daily = _frame(cfg, "state", D4).sort_values("url").reset_index(drop=True)
    rebuilt = _frame(cfg2, "state", D4).sort_values("url").reset_index(drop=True)[daily.columns]
    pd.testing.assert_frame_equal(daily, rebuilt, check_exact=False, rtol=1e-9)
    for d in DAYS[:4]:
        a = _frame(cfg, "hosts", d).sort_values("host").reset_index(drop=True)
        b = _frame(cfg2, "hosts", d).sort_values("host").reset_index(drop=True)[a.columns]
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9)
        assert records[d] == json.load(open(f"{root['root']}/_runs/dt={d}/update_state.json")), d
    assert records[D3]["no_fetches"] is True
    # A rebuild cannot start on an outage day, and a day without logs nor marker is refused.
    out = _recrawl(["--set", f"paths.root={copy}"], "rebuild-state", "--from", D3, "--to", D4)
    assert out.returncode == 2 and "OutageRefused" in out.stderr, out.stderr
    out = _recrawl(["--set", f"paths.root={copy}"], "rebuild-state", "--from", D1, "--to", D5)
    assert out.returncode == 2 and f"fetch_logs/dt={D5}" in out.stderr, out.stderr


# --- status --------------------------------------------------------------------------------

def test_status_lists_partitions_runs_and_the_published_day(root):
    out = _recrawl(root["sets"], "status", "--from", D1, "--to", D4, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    days = {d["date"]: d for d in doc["days"]}
    assert list(days) == list(DAYS[:4])
    cfg = root["cfg"]
    for d in DAYS[:4]:
        t = days[d]["tables"]
        assert t["state"]["status"] == "committed"
        assert t["state"]["rows"] == len(_frame(cfg, "state", d))
        assert t["hosts"]["rows"] == len(_frame(cfg, "hosts", d))
    assert days[D3]["tables"]["fetch_logs"]["status"] == "outage"
    assert days[D2]["tables"]["fetch_logs"]["status"] == "present"
    assert days[D2]["tables"]["fetch_logs"]["rows"] == sum(
        len(pd.read_parquet(os.path.join(root["root"], "fetch_logs", f"dt={D2}", f)))
        for f in os.listdir(os.path.join(root["root"], "fetch_logs", f"dt={D2}"))
        if f.endswith(".parquet"))
    assert days[D2]["tables"]["plan"]["status"] == "committed"
    assert days[D3]["tables"]["plan"]["status"] == "missing"
    assert days[D2]["published"]["status"] == "yes"
    assert days[D2]["published"]["rows"] == days[D2]["tables"]["schedule"]["rows"] > 0
    assert days[D4]["published"]["status"] == "no"
    runs = {r["stage"]: r for r in days[D3]["runs"]}
    assert runs["update_state"]["record"] and runs["update_state"]["attempts"] == 1
    assert runs["update_state"]["outcome"] == "ok" and runs["update_state"]["seconds"] > 0
    assert doc["next_run"] == {"date": D5, "ready": True, "missing": []}
    text = _recrawl(root["sets"], "status", "--from", D3, "--to", D4)
    assert text.returncode == 0 and "outage" in text.stdout and "next run" in text.stdout
    print(text.stdout, file=sys.stderr)  # the closing note's sample (-s)


def test_status_exits_6_when_the_next_run_cannot_start(root, tmp_path):
    # An uncommitted partition (a writer died before its marker) and a missing one.
    os.makedirs(os.path.join(root["root"], "hosts", f"dt={D5}"), exist_ok=True)
    try:
        out = _recrawl(root["sets"], "status", "--from", D4, "--to", D5, "--json")
    finally:
        os.rmdir(os.path.join(root["root"], "hosts", f"dt={D5}"))
    assert out.returncode == 6, out.stderr
    assert len(out.stderr.splitlines()) == 1 and "NotReady" in out.stderr
    doc = json.loads(out.stdout)
    t = doc["days"][-1]["tables"]
    assert t["state"]["status"] == "missing" and t["hosts"]["status"] == "uncommitted"
    assert t["fetch_logs"]["status"] == "missing"
    assert doc["next_run"]["missing"] == [f"state/dt={D5} is missing",
                                          f"hosts/dt={D5} is uncommitted"]


# --- stats ---------------------------------------------------------------------------------

def test_stats_counts_agree_with_the_tables(root):
    cfg = root["cfg"]
    out = _recrawl(root["sets"], "stats", "--date", D4, "--json", "--top", "3")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    state, plan, hosts = (_frame(cfg, t, D4) for t in ("state", "plan", "hosts"))
    assert doc["urls"] == len(state) and doc["hosts"] == len(hosts)
    assert doc["urls_by_lane"] == state.lane.value_counts().to_dict()
    assert sum(doc["urls_by_trust_class"].values()) == len(state)
    by_class = state.host.map(hosts.set_index("host").validator_class).value_counts()
    assert doc["urls_by_trust_class"] == by_class.to_dict()
    assert sum(doc["urls_by_last_status"].values()) == len(state)
    assert doc["planned_visits"] == plan.visits.sum()
    assert doc["planned_visits_by_reason"] == {
        k: v for k, v in plan.groupby("reason").visits.sum().items()}
    assert doc["lambda_hat"]["q50"] == pytest.approx(np.quantile(state.lambda_hat, 0.5))
    top = state.host.value_counts()
    assert [r["urls"] for r in doc["top_hosts_by_urls"]] == list(top.head(3))
    visits = plan.groupby("host").visits.sum().sort_values(ascending=False)
    assert doc["top_hosts_by_planned_visits"][0]["visits"] == visits.iloc[0]
    assert len(doc["top_hosts_by_stale_importance"]) == 3
    text = _recrawl(root["sets"], "stats", "--date", D4)
    assert text.returncode == 0 and "URLs by lane" in text.stdout
    print(text.stdout, file=sys.stderr)  # the closing note's sample (-s)


def test_stats_of_one_host_and_of_an_unknown_one(root):
    cfg = root["cfg"]
    state, plan = _frame(cfg, "state", D4), _frame(cfg, "plan", D4)
    host = state.host.value_counts().index[0]
    out = _recrawl(root["sets"], "stats", "--date", D4, "--host", host, "--json",
                   "--top", "1000")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    mine = plan[plan.host == host]
    assert doc["host_row"]["host"] == host and doc["host_row"]["validator_class"]
    assert doc["host_cap"] == mine.host_cap.max()
    assert doc["planned_visits"] == mine.visits.sum()
    assert doc["urls"] == len(set(state.url[state.host == host]) | set(mine.url))
    lams = [r["lambda_hat"] for r in doc["top_urls_by_lambda"] if r["lambda_hat"] is not None]
    assert lams == sorted(lams, reverse=True)
    # The host's share of the plan's value: sum of importance x freshness at the planned rate.
    from jobs.stats import plan_value
    assert doc["share"]["value"] == pytest.approx(plan_value(mine), rel=1e-9)
    assert doc["share"]["value_total"] == pytest.approx(plan_value(plan), rel=1e-9)
    assert 0 < doc["share"]["value_share"] < 1
    assert doc["share"]["visits_share"] == pytest.approx(mine.visits.sum() / plan.visits.sum())
    text = _recrawl(root["sets"], "stats", "--date", D4, "--host", host)
    assert text.returncode == 0 and "served-rate limit" in text.stdout
    assert "share of the plan's expected value" in text.stdout
    out = _recrawl(root["sets"], "stats", "--date", D4, "--host", "nowhere.example")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert "host not known" in out.stderr


# --- dump ----------------------------------------------------------------------------------

def test_dump_host_and_where_as_csv_and_parquet(root, tmp_path):
    cfg = root["cfg"]
    state = _frame(cfg, "state", D4)
    host = state.host.value_counts().index[0]
    out = _recrawl(root["sets"], "dump", "--date", D4, "--table", "state", "--host", host)
    assert out.returncode == 0, out.stderr
    got = pd.read_csv(io.StringIO(out.stdout))
    assert sorted(got.url) == sorted(state.url[state.host == host])
    cut = float(np.median(state.lambda_hat))
    pq_out = tmp_path / "fast.parquet"
    out = _recrawl(root["sets"], "dump", "--date", D4, "--table", "state", "--where",
                   f"lambda_hat > {cut!r} AND NOT gone", "--format", "parquet",
                   "--out", str(pq_out))
    assert out.returncode == 0, out.stderr
    got = pd.read_parquet(pq_out)
    want = state[(state.lambda_hat > cut) & ~state.gone.astype(bool)]
    assert sorted(got.url) == sorted(want.url) and list(got.columns) == list(state.columns)
    sched = tmp_path / "sched.parquet"
    out = _recrawl(root["sets"], "dump", "--date", D4, "--table", "schedule", "--format",
                   "parquet", "--out", str(sched))
    assert out.returncode == 0, out.stderr
    staged = cfg.paths.table("schedules", schedule_date(D4))
    want = pd.concat([pd.read_parquet(os.path.join(staged, f)) for f in os.listdir(staged)
                      if f.endswith(".parquet")])
    assert len(pd.read_parquet(sched)) == len(want) > 0
    plan = _frame(cfg, "plan", D4)
    out = _recrawl(root["sets"], "dump", "--date", D4, "--table", "plan", "--where",
                   "reason = 'multiplier'")
    assert out.returncode == 0, out.stderr
    assert len(pd.read_csv(io.StringIO(out.stdout))) == (plan.reason == "multiplier").sum()


# --- docs/operations.md: the runbooks, run as written ------------------------------------------

KEY = "arn:aws:kms:us-east-1:123456789012:key/99999999-8888-7777-6666-555555555555"


def _runbook_block(name: str) -> str:
    import re

    from tests.conftest import REPO

    with open(os.path.join(REPO, "docs", "operations.md"), encoding="utf-8") as fh:
        text = fh.read()
    found = re.search(rf"<!-- runbook-test: {name} -->\n```bash\n(.*?)```", text, re.S)
    assert found, f"docs/operations.md has no runbook-test block {name!r}"
    return found.group(1)


@pytest.fixture(scope="module")
def runbook(root, tmp_path_factory):
    """Runs a runbook block with bash -eu, a `recrawl` on the PATH (this checkout) and the
    fixture's config as $CONFIG."""
    from jobs.config import toml_text

    work = tmp_path_factory.mktemp("runbook")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "recrawl"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m jobs.console \"$@\"\n")
    shim.chmod(0o755)
    config = work / "recrawl.toml"
    config.write_text(toml_text(root["cfg"]))

    def run(name, cwd=None, **env):
        block = _runbook_block(name)
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], capture_output=True,
                             text=True, timeout=1800, cwd=str(cwd or work),
                             env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                                  "CONFIG": str(config), "ROOT": root["root"], **env})
        assert out.returncode == 0, (name, out.stdout[-2000:], out.stderr[-4000:])
        return out

    return run


def _manifest(cfg, day):
    from jobs.objstore import open_store
    from jobs.paths import schedule_manifest_key

    store, location = open_store(cfg.publish.target, endpoint_url=cfg.publish.endpoint_url)
    return json.loads(store.get_bytes(schedule_manifest_key(location.prefix,
                                                            schedule_date(day))))


def _files(manifest):
    return [(f["key"], f["sha256"]) for f in manifest["files"]]


def test_runbook_kms_rotation_encrypts_every_new_object_with_the_new_key(root, runbook):
    from jobs.objstore import make_s3_client

    cfg = root["cfg"]
    runbook("kms", D=D4, NEW_KEY=KEY)
    manifest = _manifest(cfg, D4)
    client = make_s3_client(cfg.publish.endpoint_url)
    keys = [f["key"] for f in manifest["files"]] + [
        f"daily/schedules/dt={schedule_date(D4)}/_manifest.json"]
    for key in keys:
        head = client.head_object(Bucket="sched", Key=key)
        assert (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) == ("aws:kms", KEY)
    root["published_d4"] = _files(manifest)


def test_runbook_failed_day_reruns_to_the_same_schedule(root, runbook):
    out = runbook("failed", D=D4)
    assert "recrawl status" in out.stdout
    assert _files(_manifest(root["cfg"], D4)) == root["published_d4"]


def test_runbook_rollback_restores_the_previous_publish(root, runbook):
    import dataclasses

    cfg = root["cfg"]
    bad = dataclasses.replace(cfg, budget=dataclasses.replace(cfg.budget, daily_fetches=100))
    allocate.run(bad, D4, root["spark"])  # a bad publish (in-process: one JVM start less)
    build_schedule.run(bad, D4, root["spark"])
    dag_tasks.run_publish(bad, D4)
    assert _manifest(cfg, D4)["extra"]["config"]["budget"]["daily_fetches"] == 100
    assert _files(_manifest(cfg, D4)) != root["published_d4"]
    runbook("rollback", D=D4, GOOD=D2)
    restored = _manifest(cfg, D4)
    assert _files(restored) == root["published_d4"]  # byte for byte: same keys and sha256
    assert restored["extra"]["config"] == _manifest(cfg, D2)["extra"]["config"]


def test_runbook_outage_then_clear(root, runbook):
    cfg = root["cfg"]
    runbook("outage", D=D5)
    pd.testing.assert_frame_equal(
        _frame(cfg, "state", D4).sort_values("url").reset_index(drop=True),
        _frame(cfg, "state", D5).sort_values("url").reset_index(drop=True), check_exact=True)
    assert _manifest(cfg, D5)["totals"]["rows"] > 0
    out = _recrawl(root["sets"], "status", "--from", D5, "--to", D5, "--json")
    assert out.returncode == 0, out.stderr
    day = json.loads(out.stdout)["days"][0]
    assert day["tables"]["fetch_logs"]["status"] == "outage"
    assert day["published"]["status"] == "yes"
    runbook("clear", D=D5)
    for t in ("state", "hosts", "plan", "metrics", "_runs", "_work"):
        assert not os.path.exists(os.path.join(root["root"], t, f"dt={D5}")), t
    assert os.path.exists(os.path.join(root["root"], "fetch_logs", f"dt={D5}",
                                       "_NO_FETCHES.json"))


def test_runbook_backfill_rebuilds_the_range_and_plans_its_last_day(runbook, tmp_path):
    """The backfill runbook, as written, on a new deployment with four days of history: the
    state of the last day only, then its plan and schedule."""
    from jobs.config import toml_text
    from lab.tools.generate_sample import generate_sample

    days = ("2026-10-01", "2026-10-02", "2026-10-03", "2026-10-04")
    path = str(tmp_path / "history")
    generate_sample(path, urls=300, hosts=6, days=len(days), end_date=days[-1], seed=11)
    cfg = make_config(path, "budget.daily_fetches=120")
    config = tmp_path / "backfill.toml"
    config.write_text(toml_text(cfg))
    runbook("backfill", D0=days[0], D=days[-1], CONFIG=str(config))
    state = _frame(cfg, "state", days[-1])
    assert len(state) > 0 and state["url"].is_unique
    assert not any(os.path.exists(os.path.join(path, "state", f"dt={d}")) for d in days[:-1])
    for d in days:  # every day's run record and metrics are written by the rebuild
        assert os.path.exists(os.path.join(path, "hosts", f"dt={d}")), d
    plan = _frame(cfg, "plan", days[-1])
    unknown = plan[~plan["url"].isin(state["url"])]  # only discovery plans pages not in state
    assert (unknown["lane"] == "discovery").all() and plan["visits"].sum() > 0
    from jobs.runlog import read_stage_record

    built = read_stage_record(cfg, days[-1], "build_schedule")
    assert built["planned_total"] > 0
    assert any(f.endswith(".parquet") for f in os.listdir(
        cfg.paths.table("schedules", schedule_date(days[-1]))))


def test_runbook_import_of_an_existing_crawl_plans_its_last_day(runbook, tmp_path):
    """"Starting from an existing crawl" as written: a WARC of two days imported, the state
    rebuilt from it, the last day planned."""
    from jobs.config import toml_text
    from tests.stages.archive_files import sample_warc

    sample_warc(tmp_path / "crawl-00001.warc.gz")
    cfg = make_config(str(tmp_path / "data"), "budget.daily_fetches=10")
    config = tmp_path / "import.toml"
    config.write_text(toml_text(cfg))
    out = runbook("import", cwd=tmp_path, D0="2026-11-20", D="2026-11-21", CONFIG=str(config))
    assert '"2026-11-20"' in out.stdout and '"2026-11-21"' in out.stdout
    state = _frame(cfg, "state", "2026-11-21")
    assert sorted(state["url"]) == ["http://h2.example.com/b", "http://h2.example.com/gone",
                                    "https://h1.example.com/a"]  # one row for /a's spellings
    from jobs.runlog import read_stage_record

    assert read_stage_record(cfg, "2026-11-21", "build_schedule")["planned_total"] >= 1
