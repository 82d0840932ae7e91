"""The Spark stages on small Parquet fixtures, in a real local[2] session."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyspark
import pytest

from jobs.core.times import epoch_seconds
from jobs import allocate, build_schedule, partitions, shards, update_state, validate_logs
from jobs.core import host_plan
from jobs.fleet.schedule import SHARD_INDEX_NAME, read_shard_index
from tests import tiny_web
from tests.conftest import make_config


@pytest.fixture(scope="module")
def run_two_days(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tiny"))
    tiny_web.build(root)
    cfg = make_config(root, "budget.daily_fetches=40", "budget.discovery_share=0.1",
                      "budget.fast_share=0.0")
    out = {"cfg": cfg, "root": root}
    for day in ("2026-11-01", "2026-11-02"):
        validate_logs.run(cfg, day)
        out[f"update_{day}"] = update_state.run(cfg, day, spark,
                                                   bootstrap=(day == "2026-11-01"))
    out["allocate"] = allocate.run(cfg, "2026-11-02", spark)
    out["build"] = build_schedule.run(cfg, "2026-11-02", spark)
    return out


def test_pyspark_python_side_matches_the_jvm(spark):
    assert pyspark.__version__ == spark.version


def test_state_is_updated_incrementally(run_two_days):
    state = pd.read_parquet(os.path.join(run_two_days["root"], "state", "dt=2026-11-02"))
    assert len(state) == 11 and state.url.is_unique
    s = state.set_index("url")
    odd, even = s.loc["https://news.example/p1"], s.loc["https://news.example/p0"]
    assert odd.n_changes == 1 and odd.interval_s == 43200 and odd.etag == '"n1b"'
    # Day 2's 304s come before news.example has earned trust (issue 3 §3): no observation.
    assert even.n_observations == 0 and even.interval_s == 86400 and even.etag == '"n0"'
    assert s.loc["https://news.example/p2"].importance == 8.0
    assert s.loc["https://docs.example/d0"].importance == 1.0  # bad weight quarantined, default
    assert (s.lambda_lo <= s.lambda_hat).all() and (s.lambda_hat <= s.lambda_hi).all()


def test_bad_rows_are_quarantined_with_reasons(run_two_days):
    q = pd.read_parquet(os.path.join(run_two_days["root"], "quarantine", "dt=2026-11-02"))
    reasons = q.astype({"source": str}).groupby(["source", "reason"]).size().to_dict()
    assert reasons == {("fetch_logs", "null_url"): 1, ("fetch_logs", "bad_url"): 1,
                       ("fetch_logs", "bad_status"): 1, ("fetch_logs", "negative_bytes"): 1,
                       ("fetch_logs", "future_fetched_at"): 1,
                       ("importance", "bad_importance"): 1,
                       ("host_policy", "bad_crawl_delay"): 1}
    assert all(json.loads(r) for r in q.row_json)
    metrics = pd.read_parquet(os.path.join(run_two_days["root"], "metrics", "dt=2026-11-02"))
    assert metrics.quarantined_rows.iloc[0] == 7 and metrics.log_rows.iloc[0] == 16


def test_schedule_obeys_budget_delay_shards_and_headers(run_two_days):
    root, cfg = run_two_days["root"], run_two_days["cfg"]
    out_dir = os.path.join(root, "schedules", "dt=2026-11-03")
    index = read_shard_index(out_dir)
    frames = []
    for info in index:
        df = pd.read_parquet(os.path.join(out_dir, info["file"]))
        assert len(df) == info["rows"]
        assert set(shards.shard_of(df.host, cfg.schedule.n_shards)) == {info["shard"]}
        frames.append(df)
    sched = pd.concat(frames)
    assert 0 < len(sched) <= cfg.budget.daily_fetches
    window = (pd.Timestamp("2026-11-03", tz="UTC"), pd.Timestamp("2026-11-04", tz="UTC"))
    assert sched.not_before.min() >= window[0] and sched.not_before.max() < window[1]
    delays = {"news.example": 600.0, "docs.example": 5.0, "evil.example": 10.0}
    for host, g in sched.groupby("host"):
        gaps = np.diff(np.sort(epoch_seconds(g.not_before)))
        assert len(gaps) == 0 or gaps.min() >= delays[host] - 1e-6
    assert (sched.host == "docs.example").sum() <= 2  # max_fetches_per_day
    news = sched[sched.url.str.startswith("https://news.example/p")]
    cond = news[news.method == "conditional"]
    assert len(cond) and all(cond.if_none_match.str.startswith('"n'))
    evil = sched[sched.host == "evil.example"]
    assert (evil.method == "full").all() and evil.if_none_match.isna().all()
    disc = sched[sched.lane == "discovery"]
    assert disc.url.tolist() == ["https://news.example/new1"]


def test_candidates_hold_visits_only_and_the_run_figures_travel_in_the_marker(run_two_days):
    part = os.path.join(run_two_days["root"], "_work", "dt=2026-11-02", "candidates")
    cand = pd.read_parquet(part)
    assert len(cand) and cand.url.notna().all()  # no summary rows among the visits
    assert list(cand.columns) == host_plan.CANDIDATE_COLUMNS
    extra = partitions.committed_extra(part, "candidates")
    figures, rec = extra["figures"], run_two_days["allocate"]
    assert set(extra) == {"cut", "figures"} and set(figures) == set(allocate.FIGURE_SUMS)
    # backfill candidates are next-day visits pulled forward: not due today
    assert figures["due_count"] == rec["due_total"] >= len(cand[cand.lane != "backfill"])
    assert figures["known_urls"] > 0 and figures["signals"] == rec["signals_pending"]
    assert figures["weighted_freshness"] / figures["weight_sum"] == rec["expected_freshness"]
    assert sum(c["candidates"] for c in extra["cut"].values()) == len(cand)


def test_budget_cut_keeps_the_highest_priorities(spark, run_two_days):
    cfg = make_config(run_two_days["root"], "budget.daily_fetches=5", "budget.fast_share=0",
                      "budget.discovery_share=0", "budget.audit_share=0")
    allocate.run(cfg, "2026-11-02", spark)
    built = build_schedule.run(cfg, "2026-11-02", spark)
    assert built["planned_total"] == 5
    cand = pd.read_parquet(os.path.join(run_two_days["root"], "_work", "dt=2026-11-02",
                                        "candidates"))
    out_dir = os.path.join(run_two_days["root"], "schedules", "dt=2026-11-03")
    sched = pd.concat(pd.read_parquet(os.path.join(out_dir, i["file"]))
                      for i in read_shard_index(out_dir))
    # The refresh rows kept are the refresh candidates of highest priority (what the lanes
    # leave goes to backfill: a pulled-forward visit, lane refresh in the schedule too).
    refresh = cand[cand.lane == "refresh"].priority.to_numpy()
    kept = min(len(refresh), 5)
    assert kept >= 1
    top = np.sort(refresh)[-kept:]
    got = np.sort(sched.priority.to_numpy())[-kept:]
    np.testing.assert_allclose(got, top, rtol=0, atol=1e-12)


def test_rerun_gives_identical_files(spark, run_two_days):
    cfg = run_two_days["cfg"]
    out_dir = os.path.join(run_two_days["root"], "schedules", "dt=2026-11-03")
    allocate.run(cfg, "2026-11-02", spark)
    build_schedule.run(cfg, "2026-11-02", spark)
    first = {i["file"]: i["sha256"] for i in read_shard_index(out_dir)}
    allocate.run(cfg, "2026-11-02", spark)
    build_schedule.run(cfg, "2026-11-02", spark)
    again = {i["file"]: i["sha256"] for i in read_shard_index(out_dir)}
    assert first == again and sorted(f for f in os.listdir(out_dir)
                                     if f.endswith(".parquet")) == sorted(first)


def test_absurd_schedule_fails_before_publishing(spark, run_two_days):
    root = run_two_days["root"]
    big = make_config(root, "budget.daily_fetches=40")
    allocate.run(big, "2026-11-02", spark)
    # A build run whose budget disagrees with the cut it is given must refuse.
    small = make_config(root, "budget.daily_fetches=3")
    out_dir = os.path.join(root, "schedules", "dt=2026-11-03")
    with pytest.raises(build_schedule.AbsurdScheduleError, match="exceed the budget"):
        build_schedule.run(small, "2026-11-02", spark)
    assert not os.path.exists(os.path.join(out_dir, SHARD_INDEX_NAME))


@pytest.mark.parametrize("infos, due, message", [
    ([{"rows": 3, "min_gap_ratio": 0.5}], 3, "closer than its crawl delay"),
    ([{"rows": 0, "min_gap_ratio": None}], 7, "no rows scheduled"),
    ([{"rows": 11, "min_gap_ratio": 1.0}], 11, "exceed the budget"),
])
def test_check_schedule_rules(infos, due, message):
    with pytest.raises(build_schedule.AbsurdScheduleError, match=message):
        build_schedule.check_schedule(infos, 10, due)


def test_audit_conversions_drop_the_validators_of_the_rows_they_convert(spark):
    # On a0a3a53 the validators were kept: `eligible` was re-evaluated after method had
    # already become "full", so audits went out as conditional GETs (a 304 defeats them).
    from jobs.core.lanes import share_targets
    from jobs.params import budget_params
    from tests.conftest import make_config

    rows = [("https://a.example/p%d" % i, "conditional", '"e%d"' % i,
             "Sun, 01 Nov 2026 00:00:00 GMT", True) for i in range(40)]
    selected = spark.createDataFrame(rows, "url string, method string, if_none_match string, "
                                           "if_modified_since string, audit_wanted boolean")
    cfg = make_config("/nonexistent", "budget.daily_fetches=100", "budget.audit_share=0.2")
    limit = share_targets(budget_params(cfg))["audit"]  # floor(0.2 x 100)
    out, taken = build_schedule.audit_conversions(selected, limit, "2026-11-03")
    got = out.toPandas()
    full = got[got.method == "full"]
    assert taken == len(full) and 0 < taken <= 20
    assert full.if_none_match.isna().all() and full.if_modified_since.isna().all()
    cond = got[got.method == "conditional"]
    assert cond.if_none_match.notna().all()
