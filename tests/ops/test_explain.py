"""`recrawl explain` and the plan/ table on a root built by the real stages (e2e: Spark).

Three days of generated history, update_state for each, allocate + build_schedule for the
last two, the last one published to a loopback S3 server; then explain reads a URL's rows
with pyarrow only, and every Spark SQL (and DuckDB) query of docs/queries.md runs on it.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from jobs import (allocate, build_schedule, console, dag_tasks, partitions, update_state,
                  validate_logs, verify)
from jobs.paths import schedule_date, work_path
from tests.conftest import make_config
from tests.ops.test_queries import (check_answers, localised, query_blocks, run_duckdb,
                                statements)

DAYS = ("2026-11-27", "2026-11-28", "2026-11-29")
D = DAYS[-1]


@pytest.fixture(scope="module")
def pipeline(s3_server, spark, tmp_path_factory):
    from jobs.publish import ensure_bucket
    from lab.tools.generate_sample import generate_sample

    root = str(tmp_path_factory.mktemp("explain"))
    generate_sample(root, urls=600, hosts=12, days=len(DAYS), end_date=D, seed=11)
    s3 = s3_server
    ensure_bucket(s3.endpoint_url, "sched")
    overrides = ["budget.daily_fetches=400", "publish.target=s3://sched/daily",
                 f"publish.endpoint_url={s3.endpoint_url}"]
    cfg = make_config(root, *overrides)
    for day in DAYS:
        validate_logs.run(cfg, day)
        update_state.run(cfg, day, spark, bootstrap=(day == DAYS[0]))
    for day in DAYS[1:]:
        allocate.run(cfg, day, spark)
        build_schedule.run(cfg, day, spark)
    dag_tasks.run_publish(cfg, D)
    sets = [x for o in [f"paths.root={root}", "spark.master=local[2]",
                        "spark.state_buckets=2", "schedule.n_shards=4", *overrides]
            for x in ("--set", o)]
    yield {"cfg": cfg, "root": root, "sets": sets, "s3": s3}


def _plan(cfg, day):
    return pd.concat([pd.read_parquet(f) for f in partitions.committed_files(
        cfg.paths.table("plan", day), "plan")], ignore_index=True)


def _explain(capsys, pipeline, *args):
    code = console.main(["explain", *args, *pipeline["sets"]])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_table_has_one_row_per_page_and_agrees_with_the_candidates(pipeline):
    cfg = pipeline["cfg"]
    plan = _plan(cfg, D)
    state = pd.read_parquet(cfg.paths.table("state", D), columns=["url"])
    assert plan.url.is_unique
    assert set(state.url) <= set(plan.url)
    assert set(plan.url) - set(state.url) == set(plan.url[plan.lane == "discovery"])
    cand = pd.concat([pd.read_parquet(f) for f in partitions.committed_files(
        work_path(cfg, D, "candidates"), "candidates")], ignore_index=True)
    per_url = cand.groupby("url").agg(n=("url", "size"), rate=("rate", "first"))
    p = plan.set_index("url")
    assert (p.visits.reindex(per_url.index) == per_url.n).all()
    assert p.visits.sum() == len(cand)
    np.testing.assert_allclose(p.planned_rate.reindex(per_url.index), per_url.rate)
    assert p.p_stale_now.between(0, 1).all() and p.reason.notna().all()
    record = json.load(open(f"{cfg.paths.root}/_runs/dt={D}/allocate.json"))
    assert record["plan_rows"] == len(plan)


def _scheduled_url(pipeline):
    cfg = pipeline["cfg"]
    rows = verify.read_schedule(cfg.publish.target, schedule_date(D), cfg.publish.endpoint_url)
    counts = rows[rows.lane != "audit"].url.value_counts()
    return counts.index[0], rows[rows.url == counts.index[0]].sort_values("not_before")


def test_explain_json_matches_state_plan_schedule_and_logs(capsys, pipeline):
    cfg, root = pipeline["cfg"], pipeline["root"]
    url, slots = _scheduled_url(pipeline)
    code, out, err = _explain(capsys, pipeline, url, "--date", D, "--json")
    assert code == 0, err
    doc = json.loads(out)
    state = pd.read_parquet(cfg.paths.table("state", D)).set_index("url").loc[url]
    assert doc["state"]["lambda_hat"] == pytest.approx(state.lambda_hat)
    assert doc["state"]["lambda_hi"] == pytest.approx(state.lambda_hi)
    assert doc["state"]["n_observations"] == state.n_observations
    for col in ("lm_n", "lm_changes", "lm_exposure"):
        assert doc["state"][col] == pytest.approx(state[col]), col
    plan = _plan(cfg, D).set_index("url").loc[url]
    assert doc["plan"]["planned_rate"] == pytest.approx(plan.planned_rate)
    assert doc["plan"]["reason"] == plan.reason and doc["plan"]["reason_text"]
    assert doc["host_row"]["host"] == state.host and doc["host_row"]["validator_class"]
    assert doc["allocate"]["policy"] == cfg.policy.name
    assert doc["schedule"]["source"] == "published"
    got = [pd.Timestamp(s["not_before"]) for s in doc["schedule"]["slots"]]
    assert got == list(slots.not_before) and len(got) >= 1
    logs = pd.concat([pd.read_parquet(f"{root}/fetch_logs/dt={d}") for d in DAYS])
    assert len(doc["fetches"]["rows"]) == (logs.url == url).sum()
    assert doc["fetches"]["missing_days"] == []


def test_explain_text_names_rate_reason_slots_and_fetches(capsys, pipeline):
    url, slots = _scheduled_url(pipeline)
    code, out, err = _explain(capsys, pipeline, url, "--date", D)
    assert code == 0, err
    print(out, file=__import__("sys").stderr)  # shown with -s / on failure: the report's sample
    assert out.startswith(url)
    for needle in ("lambda_hat", "90% interval", "dated by Last-Modified: ", "validator class",
                   "planned rate", "reason: ",
                   "host cap", "p_stale_now", "P(changed since the last ",
                   "no change since the copy (trusted, may defer a visit) ",
                   f"Schedule {schedule_date(D)} (published",
                   "served-rate limit",
                   "Fetches 2026-11-27 .. 2026-11-29"):
        assert needle in out, needle
    first = slots.not_before.iloc[0].strftime("%Y-%m-%d %H:%M:%S")
    assert first in out


def test_explain_refuses_missing_partitions_and_unknown_urls(capsys, pipeline):
    url, _ = _scheduled_url(pipeline)
    code, out, err = _explain(capsys, pipeline, url, "--date", DAYS[0])  # no allocate run
    assert code == 2 and out == "" and "[plan]" in err and "MissingPartitionError" in err
    code, out, err = _explain(capsys, pipeline, "https://nowhere.example/x", "--date", D)
    assert code == 2 and out == "" and "URL not known" in err and err.count("\n") == 1
    # A day allocate planned but nobody published: state and plan are still shown, and the
    # schedule section (and one stderr line) names why it could not be read.
    code, out, err = _explain(capsys, pipeline, url, "--date", DAYS[1], "--schedule",
                              "published")
    assert code == 0 and "State (state/dt=" in out and "Plan (plan/dt=" in out
    assert "NOT READABLE: MissingPartitionError: [schedules]" in out
    assert err.startswith("warning: schedule") and "[schedules]" in err


def test_every_spark_sql_query_runs_and_matches_duckdb(spark, pipeline):
    root, cfg = pipeline["root"], pipeline["cfg"]
    plan = _plan(cfg, D)
    url = plan[plan.lane == "refresh"].url.iloc[0]
    answers = []
    for section, sql in query_blocks("spark"):
        *setup, last = statements(localised(sql, root, url))
        for s in setup:
            spark.sql(s)
        answers.append((section, spark.sql(last).toPandas()))
    check_answers(answers, plan, url, days_with_metrics=2, days=3)
    duck = [run_duckdb(localised(sql, root, url)) for _, sql in query_blocks("duckdb")]
    for (section, theirs), ours in zip(answers, duck):
        assert list(theirs.columns) == list(ours.columns), section
        assert len(theirs) == len(ours), section
        for c in theirs.columns:
            a, b = theirs[c].tolist(), ours[c].tolist()
            if c == "dt":
                a, b = [str(x)[:10] for x in a], [str(x)[:10] for x in b]
            if theirs[c].dtype.kind == "f" or ours[c].dtype.kind == "f":
                np.testing.assert_allclose(np.array(a, float), np.array(b, float),
                                           rtol=1e-9, err_msg=f"{section}: {c}")
            else:
                assert a == b, (section, c)
    print(json.dumps({s: f.to_dict("records") for s, f in answers}, default=str, indent=1),
          file=__import__("sys").stderr)


def test_published_schedule_without_credentials_is_a_named_error_not_a_traceback(
        monkeypatch, tmp_path, capsys):
    """An operator without the object store's credentials gets exit 2 and what to do."""
    from jobs import explain

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # (a loopback endpoint gets a placeholder key instead: jobs.objstore.make_s3_client)
    cfg = make_config(tmp_path, "publish.target=s3://recrawl-schedules",
                      "publish.endpoint_url=https://s3.storage.invalid")
    with pytest.raises(partitions.MissingPartitionError, match="NoCredentialsError.*--schedule staging"):
        explain.schedule_slots(cfg, "2026-11-29", "https://h.example/p", "h.example", "published")


def test_explain_says_which_instant_p_stale_now_counted_from():
    """The plan's stale_since_at is the last confirmed copy unless the host's 304s are
    trusted (jobs.core.plan_work.stale_since); a plan written before the column counted from
    the last success."""
    from jobs.explain import _stale_since_text

    at = pd.Timestamp("2026-11-28T06:00Z")
    plan = {"stale_since_at": at, "last_success_at": pd.Timestamp("2026-11-29T01:00Z")}
    untrusted = _stale_since_text(plan, {"trust_etag": False, "trust_lm": False})
    assert untrusted.startswith("the last confirmed copy 2026-11-28 06:00:00 UTC")
    assert "304s are not trusted" in untrusted
    assert "the last confirmed copy" in _stale_since_text(plan, None)  # no host row: untrusted
    trusted = _stale_since_text(plan, {"trust_etag": False, "trust_lm": True})
    assert trusted.startswith("the last success 2026-11-28 06:00:00 UTC") and "trusted" in trusted
    old = _stale_since_text({"last_success_at": plan["last_success_at"]}, None)
    assert old == "the last success 2026-11-29 01:00:00 UTC"


def test_explain_shows_the_dated_evidence_lambda_hat_reads():
    """λ̂ also reads the trusted Last-Modified sums (``lm_*``, the first copy's age among
    them), which the change bits do not show: a slow page's low λ̂ is explained by them."""
    from jobs.explain import _dated_text

    line = _dated_text({"lm_n": 2.0, "lm_changes": 1.0, "lm_exposure": 87.25})
    assert "dated by Last-Modified: 2 observations (1 changes) over 87.2 days" in line
    assert "The age at discovery" in line
    for none in ({"lm_n": 0.0, "lm_changes": 0.0, "lm_exposure": 0.0}, {"lm_n": None}, {}):
        assert "dated by Last-Modified: nothing" in _dated_text(none), none
