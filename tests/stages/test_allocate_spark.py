"""The Spark allocation passes against the in-memory solver, and lanes end to end."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from jobs import allocate, build_schedule, policy_rates
from jobs.fleet.schedule import read_shard_index
from jobs.params import plan_context
from jobs.core import lanes, plan_work
from jobs.core.allocation_kkt import objective_value
from jobs.core.policies import get_policy, policy_rates as in_memory_rates
from jobs.core.times import epoch_seconds
from jobs.runlog import write_stage_record
from tests import tiny_web
from tests.conftest import make_config

W0 = 1_800_000_000.0


def _instance(seed=3, n=400, hosts=6):
    rng = np.random.default_rng(seed)
    host = rng.choice([f"h{i}.example" for i in range(hosts)], n, p=np.r_[0.4, [0.6 / (hosts - 1)] * (hosts - 1)])
    delay = {f"h{i}.example": d for i, d in enumerate([2880.0, 1728.0, 60.0, 60.0, 60.0, 60.0])}
    return pd.DataFrame({
        "host": host, "url": [f"https://{h}/p{i}" for i, h in enumerate(host)], "lane": "refresh",
        "lambda_hat": rng.lognormal(np.log(0.5), 1.5, n), "importance": rng.lognormal(0, 1, n),
        "interval_s": 86400.0, "gone": False, "crawl_delay_s": [delay[h] for h in host],
        "max_fetches_per_day": None, "cap_factor": 1.0})


@pytest.mark.parametrize("name", ["optimal", "proportional"])
def test_spark_passes_match_the_in_memory_solver(spark, name):
    pages = _instance()
    budget = 60
    cfg = make_config("/nonexistent", f"policy.name={name}", f"budget.daily_fetches={budget}",
                      "budget.fast_share=0", "budget.discovery_share=0", "budget.audit_share=0",
                      "audit.sample_rate=0", "allocation.buckets=3")
    sdf = spark.createDataFrame(pages.astype({"max_fetches_per_day": "float"}))
    ctx, info = policy_rates.solve_levels(spark, cfg, policy_rates.bucketed(cfg, sdf), W0,
                                          W0 + 86400)
    assert info["spark_passes"] == 3 and info["floors_affordable"]
    bucket = plan_work.load(pages, ctx)  # every host in one bucket, as pass 3 would
    rates = pd.Series(plan_work.lane_rates(bucket, ctx)[0], index=pages.index)
    caps = {h: int(c) for h, c in zip(bucket.groups.labels, bucket.cap)}
    ref = in_memory_rates(get_policy(name, f_min=1 / 90, f_max=24.0), pages, "host", caps, budget)
    assert rates.sum() <= budget * (1 + 1e-9)
    assert rates.sum() >= budget * (1 - 1e-3)  # the budget binds and is spent
    for host, g in pages.groupby("host"):
        assert rates[g.index].sum() <= caps[host] * (1 + 1e-9)
    assert min(caps.values()) < pages.host.value_counts().max()  # caps do bind here
    # Same rates as the exact bisection, to the grid blend's second-order loss.
    assert np.abs(rates - ref.rates).sum() <= 1e-2 * budget
    if name == "optimal":
        lam, w = pages.lambda_hat.to_numpy(), pages.importance.to_numpy()
        got = objective_value(lam, w, rates.to_numpy())
        best = objective_value(lam, w, ref.rates.to_numpy())
        assert best * (1 - 1e-4) <= got <= best * (1 + 1e-6)


def _state_rows():
    t = pd.Timestamp("2026-11-02T06:00", tz="UTC")
    rows = []
    for i in range(40):
        host = "big.example" if i < 30 else "small.example"
        rows.append({
            "url": f"https://{host}/p{i}" if i not in (0, 30) else f"https://{host}/",
            "host": host, "first_seen": t, "last_fetch_at": t, "last_success_at": t,
            "etag": f'"e{i}"', "last_modified": tiny_web.LM, "interval_s": 86400.0,
            "lambda_hat": 0.05 + 0.1 * (i % 7), "lambda_lo": 0.0, "lambda_hi": 5.0,
            "n_fetches": 3, "n_observations": 2, "n_changes": 1, "exposure_days": 2.0,
            "n_errors": 0, "consecutive_gone": 0, "gone": False, "importance": 1.0 + i % 5,
            "lane": "refresh", "updated_dt": pd.Timestamp("2026-11-02").date()})
    return rows


@pytest.fixture(scope="module")
def lanes_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("lanes"))
    tiny_web.write_committed(root, "state", _state_rows(), "2026-11-02")
    tiny_web.write(root, "host_policy", [{"host": "big.example", "crawl_delay_s": 1440.0,
                                          "max_fetches_per_day": None}])
    tiny_web.write(root, "frontier", [
        {"url": f"https://small.example/new{i}", "discovered_at": pd.Timestamp("2026-11-02", tz="UTC"),
         "importance": float(i)} for i in range(1, 6)] + [
        {"url": "https://small.example/p31", "discovered_at": pd.Timestamp("2026-11-02", tz="UTC"),
         "importance": 9.0}], dt="2026-11-02")
    # small.example has no hosts row: it trusts no validator (allocate.HOST_DEFAULTS).
    tiny_web.write_committed(root, "hosts", [{"host": "big.example", "cap_factor": 0.5,
                                              "trust_etag": False, "trust_lm": True,
                                              "audit_wanted": True}], "2026-11-02")
    # build_schedule merges update_state's run record into metrics: it must exist.
    write_stage_record(make_config(root), "2026-11-02", "update_state",
                       {"urls_known": len(_state_rows()), "urls_gone": 0, "log_rows": 0})
    oracle = pd.DataFrame({"url": [r["url"] for r in _state_rows()], "lambda": 2.0})
    os.makedirs(f"{root}/oracle")
    oracle.to_parquet(f"{root}/oracle/part-0.parquet")
    return root


def _schedule(root):
    out_dir = os.path.join(root, "schedules", "dt=2026-11-03")
    return pd.concat(pd.read_parquet(os.path.join(out_dir, i["file"]))
                     for i in read_shard_index(out_dir))


@pytest.mark.parametrize("oracle", [False, True])
def test_optimal_with_lanes_health_and_audits_end_to_end(spark, lanes_root, oracle):
    cfg = make_config(lanes_root, "policy.name=optimal", "budget.daily_fetches=60",
                      "budget.split=auto", "budget.fast_share=0.1", "budget.audit_share=0.05",
                      "audit.sample_rate=0.2")
    # The oracle's true rates are a backtest-only argument of allocate, not a config key.
    rec = allocate.run(cfg, "2026-11-02", spark,
                       lambda_table=f"{lanes_root}/oracle" if oracle else None)
    build_schedule.run(cfg, "2026-11-02", spark)
    sched = _schedule(lanes_root)
    assert len(sched) <= 60
    big = sched[sched.host == "big.example"]
    assert len(big) <= 30  # 86400/1440 = 60, halved by cap_factor 0.5
    gaps = np.diff(np.sort(epoch_seconds(big.not_before)))
    assert len(gaps) == 0 or gaps.min() >= 1440.0 - 1e-6
    assert big.if_none_match.isna().all()  # trust_etag false: never sent
    fast = sched[sched.lane == "fast"]
    assert set(fast.url) <= {"https://big.example/", "https://small.example/"} and len(fast)
    disc = sched[sched.lane == "discovery"]
    assert "https://small.example/p31" not in set(disc.url)  # known URL: deduplicated
    m = pd.read_parquet(os.path.join(lanes_root, "metrics", "dt=2026-11-02")).iloc[0]
    assert m.budget_split == "auto" and m.spark_passes == 3 and m.floors_affordable
    assert m.refresh_marginal_value > 0 and m.discovery_budget == len(disc)
    if m.discovery_budget > 0:
        assert m.discovery_marginal_value >= m.refresh_marginal_value - 1e-12
    assert m.planned_audit >= 1 and m.audit_conversions <= int(0.05 * 60)
    assert 0 < m.expected_freshness_fast <= 1 and 0 < m.expected_freshness_refresh <= 1
    assert m.planned_total == len(sched) and m.carried_over >= 0
    if oracle:  # every page changes twice a day, so freshness is far lower
        assert rec["expected_freshness_refresh"] < 0.5
    else:
        assert rec["expected_freshness_refresh"] > 0.5


def test_audit_sample_rows_are_scheduled_in_their_own_lane(spark, lanes_root):
    # With audit.sample_rate > 0 the audit sample is written as lane `audit` (method full,
    # no conditional headers), at most budget.audit_share x budget rows, within host caps.
    budget, share = 60, 0.1
    cfg = make_config(lanes_root, "policy.name=adaptive", f"budget.daily_fetches={budget}",
                      f"budget.audit_share={share}", "audit.sample_rate=0.5")
    allocate.run(cfg, "2026-11-02", spark)
    build_schedule.run(cfg, "2026-11-02", spark)
    sched = _schedule(lanes_root)
    audit = sched[sched.lane == "audit"]
    assert 1 <= len(audit) <= int(share * budget)
    assert (audit.method == "full").all()
    assert audit.if_none_match.isna().all() and audit.if_modified_since.isna().all()
    assert len(sched) <= budget
    caps = {"big.example": 30,  # 86400/1440 halved by cap_factor 0.5
            "small.example": int(86400 // cfg.politeness.default_crawl_delay_s)}
    assert all(n <= caps[h] for h, n in sched.groupby("host").size().items())
    index = read_shard_index(os.path.join(lanes_root, "schedules", "dt=2026-11-03"))
    assert sum(i["lanes"].get("audit", 0) for i in index) == len(audit)
    m = pd.read_parquet(os.path.join(lanes_root, "metrics", "dt=2026-11-02")).iloc[0]
    assert m.planned_audit == len(audit)
    assert m.planned_total == m.planned_refresh + m.planned_fast + m.planned_discovery + len(audit)


def test_a_limited_blocked_host_gets_its_share_after_its_wait_spread_evenly(spark, lanes_root,
                                                                           tmp_path):
    """hosts/dt=D from update_state (issue 15): big.example may serve 30 of its 60 visits/day
    and asked (Retry-After) for nothing before 06:00 on D+1, so cap_factor = 0.5 x 0.75."""
    import shutil

    root = str(tmp_path / "limited")
    shutil.copytree(lanes_root, root)
    shutil.rmtree(os.path.join(root, "hosts"))
    w0 = pd.Timestamp("2026-11-03", tz="UTC")
    wait = w0 + pd.Timedelta(6, "h")
    tiny_web.write_committed(root, "hosts", [{
        "host": "big.example", "cap_factor": 0.375, "trust_etag": False, "trust_lm": True,
        "audit_wanted": False, "nominal_cap": 60.0, "rate_limit": 30.0,
        "blocked_until": wait}], "2026-11-02")
    cfg = make_config(root, "policy.name=optimal", "budget.daily_fetches=60")
    allocate.run(cfg, "2026-11-02", spark)
    build_schedule.run(cfg, "2026-11-02", spark)
    sched = _schedule(root)
    big = np.sort(epoch_seconds(sched[sched.host == "big.example"].not_before))
    assert 2 <= len(big) <= 22  # floor(60 x 0.375)
    assert big[0] >= wait.timestamp()
    w1 = (w0 + pd.Timedelta(1, "D")).timestamp()
    # spread over the 18 open hours, not packed 1440 s apart from 06:00
    assert np.diff(big).min() >= (w1 - wait.timestamp()) / len(big) - 1e-3
    # the other host is not held back by big's limit
    small = sched[sched.host == "small.example"]
    assert len(small) and epoch_seconds(small.not_before).min() < wait.timestamp()


def test_a_host_that_struggled_before_is_spread_even_at_its_full_cap(spark, lanes_root,
                                                                     tmp_path):
    """A throttle host (issue 15) whose 429s asked for 174 s between requests (its
    served_ceiling, 495/day) but whose cap, 60, comes from elsewhere is not under a limit
    (L = N); its visits must still not be packed a crawl delay apart at midnight."""
    import shutil

    root = str(tmp_path / "struggled")
    shutil.copytree(lanes_root, root)
    shutil.rmtree(os.path.join(root, "hosts"))
    tiny_web.write_committed(root, "hosts", [{
        "host": "big.example", "cap_factor": 1.0, "trust_etag": False, "trust_lm": True,
        "audit_wanted": False, "nominal_cap": 60.0, "rate_limit": 60.0,
        "served_ceiling": 495.0}], "2026-11-02")
    cfg = make_config(root, "policy.name=optimal", "budget.daily_fetches=60")
    allocate.run(cfg, "2026-11-02", spark)
    build_schedule.run(cfg, "2026-11-02", spark)
    sched = _schedule(root)
    big = np.sort(epoch_seconds(sched[sched.host == "big.example"].not_before))
    assert len(big) >= 2
    assert np.diff(big).min() >= 86400 / len(big) - 1e-3


def test_a_probe_due_host_gets_its_visits_marked_through_allocate(spark, lanes_root, tmp_path):
    """Issue 15: hosts.probe_due reaches the plan. big.example (limit 3 of N = 60, above the
    2 it served on its last bad day), all pages a month overdue: with probe_due every
    non-audit candidate of big is a probe, and the allocate record counts them; without it,
    or for the other host, none is."""
    import shutil

    from jobs.paths import work_path

    for due in (False, True):
        root = str(tmp_path / f"probe_{due}")
        shutil.copytree(lanes_root, root)
        for table in ("hosts", "state"):
            shutil.rmtree(os.path.join(root, table))
        month_ago = pd.Timestamp("2026-10-03T06:00", tz="UTC")
        tiny_web.write_committed(root, "state", [
            {**r, "last_fetch_at": month_ago, "last_success_at": month_ago}
            for r in _state_rows()], "2026-11-02")
        tiny_web.write_committed(root, "hosts", [{
            "host": "big.example", "cap_factor": 0.05, "trust_etag": False, "trust_lm": True,
            "audit_wanted": False, "nominal_cap": 60.0, "rate_limit": 3.0,
            "served_ceiling": 2.0, "probe_due": due}], "2026-11-02")
        cfg = make_config(root, "policy.name=optimal", "budget.daily_fetches=14")
        rec = allocate.run(cfg, "2026-11-02", spark)
        cand = pd.read_parquet(work_path(cfg, "2026-11-02", "candidates"))
        big = cand[(cand.host == "big.example") & (cand.lane != "audit")]
        assert len(big) == 3 and not cand[cand.host != "big.example"].probe.any()
        assert (big.probe == due).all()
        assert sum(lane["probes"] for lane in rec["budget_cut"].values()) == (3 if due else 0)


def test_the_days_cut_keeps_probe_visits_first(spark):
    """jobs.budget_cut: 10 visits of host a with priorities 10-19 and 3 probes of host b with
    priority 0.1 (a limited host's low-value pages), a refresh budget of 5: the probes and
    the two best of a are kept, exactly 5."""
    from jobs import budget_cut

    rows = [("a", f"https://a/{i}", 10.0 + i, False) for i in range(10)]
    rows += [("b", f"https://b/{i}", 0.1, True) for i in range(3)]
    cand = spark.createDataFrame(pd.DataFrame(rows, columns=["host", "url", "priority", "probe"])
                                 .assign(lane="refresh", due_s=0.0))
    cut = budget_cut.solve(cand, {"fast": 0, "audit": 0, "discovery": 0, "refresh": 5}, 5)
    assert cut["refresh"]["probes"] == 3 and cut["refresh"]["selected"] == 5
    kept = budget_cut.apply(cand, cut).toPandas()
    assert sorted(kept.url) == sorted(["https://a/8", "https://a/9"]
                                      + [f"https://b/{i}" for i in range(3)])


def test_url_hash_is_sparks_xxhash64(spark):
    # jobs.core.url_hash.xxh64 (the audit sample's hash) is the standard XXH64, which Spark's
    # xxhash64 also is (seed 42): random strings of every length branch, multibyte UTF-8.
    from jobs.core.url_hash import xxh64

    rng = np.random.default_rng(9)
    alphabet = list("abcxyz0189/:.-_?=&%#") + ["é", "ß", "日", "本", "🙂"]
    strings = ["".join(rng.choice(alphabet, n)) for n in rng.integers(0, 200, 400)]
    df = spark.createDataFrame(pd.DataFrame({"i": np.arange(len(strings)), "s": strings}))
    from pyspark.sql import functions as F
    got = df.select("i", F.xxhash64("s").alias("h")).toPandas().sort_values("i")
    np.testing.assert_array_equal(got["h"].to_numpy(np.int64), xxh64(strings, 42).view(np.int64))


def test_bucket_count_follows_the_page_rows_above_the_configured_floor():
    cfg = make_config("/nonexistent", "allocation.buckets=16", "allocation.rows_per_bucket=250000")
    assert policy_rates.bucket_count(cfg, 0) == 16
    assert policy_rates.bucket_count(cfg, 1_000_000) == 16
    assert policy_rates.bucket_count(cfg, 10_000_000) == 40
    assert policy_rates.bucket_count(cfg, 10_000_001) == 41


def _plan_and_candidates(root):
    plan = pd.read_parquet(os.path.join(root, "plan", "dt=2026-11-02"))
    cands = pd.read_parquet(os.path.join(root, "_work", "dt=2026-11-02", "candidates"))
    return (plan.sort_values("url").reset_index(drop=True),
            cands.sort_values(["url", "due_s", "lane"]).reset_index(drop=True))


def test_more_buckets_from_the_page_rows_plan_the_same_visits(spark, lanes_root):
    sets = ["policy.name=optimal", "budget.daily_fetches=60", "audit.sample_rate=0.2"]
    base = allocate.run(make_config(lanes_root, *sets), "2026-11-02", spark)
    plan0, cand0 = _plan_and_candidates(lanes_root)
    # 40 state rows + 6 frontier rows from the footers, 2 per bucket: 23 partitions.
    cfg = make_config(lanes_root, *sets, "allocation.rows_per_bucket=2")
    pages, _, page_rows, _ = allocate.load_pages(spark, cfg, "2026-11-02")
    assert page_rows == 46
    assert policy_rates.bucketed(cfg, pages, page_rows).rdd.getNumPartitions() == 23
    many = allocate.run(cfg, "2026-11-02", spark)
    plan1, cand1 = _plan_and_candidates(lanes_root)
    pd.testing.assert_frame_equal(plan0, plan1, rtol=1e-9)
    pd.testing.assert_frame_equal(cand0, cand1, rtol=1e-9)
    assert many["due_total"] == base["due_total"] and len(cand1) > 0


def test_the_days_cut_gives_backfill_only_what_the_lanes_leave(spark):
    """Issue 14 §2: 3 refresh candidates and 5 pulled-forward ones, budget 6: every refresh
    visit and the 3 best backfill visits are kept."""
    from jobs import budget_cut

    rows = [("a", f"https://a/{i}", 1.0 + i, "refresh") for i in range(3)]
    rows += [("b", f"https://b/{i}", 0.1 * (i + 1), "backfill") for i in range(5)]
    cand = spark.createDataFrame(pd.DataFrame(rows, columns=["host", "url", "priority", "lane"])
                                 .assign(probe=False, due_s=0.0))
    cut = budget_cut.solve(cand, {"fast": 0, "audit": 0, "discovery": 0, "refresh": 6}, 6)
    assert cut["refresh"]["selected"] == 3 and cut["backfill"]["budget"] == 3
    kept = budget_cut.apply(cand, cut).toPandas()
    assert sorted(kept.url) == sorted([f"https://a/{i}" for i in range(3)]
                                      + [f"https://b/{i}" for i in (2, 3, 4)])


def test_unused_budget_pulls_visits_forward_as_refresh_rows(spark, lanes_root):
    """adaptive's daily intervals leave most of a budget of 100 unused; big.example's cap
    (30) is full, so small.example's 10 pages get their next visits pulled forward."""
    cfg = make_config(lanes_root, "policy.name=adaptive", "budget.daily_fetches=100")
    off = make_config(lanes_root, "policy.name=adaptive", "budget.daily_fetches=100",
                      "lanes.backfill_horizon_days=0")
    allocate.run(off, "2026-11-02", spark)
    build_schedule.run(off, "2026-11-02", spark)
    without = _schedule(lanes_root)
    allocate.run(cfg, "2026-11-02", spark)
    rec = build_schedule.run(cfg, "2026-11-02", spark)
    sched = _schedule(lanes_root)
    m = pd.read_parquet(os.path.join(lanes_root, "metrics", "dt=2026-11-02")).iloc[0]
    assert rec["planned_backfill"] == 10 and m.planned_backfill == 10
    # each of small.example's pages is visited again at the end of the day (its next visit)
    extra = sched.groupby("url").size().sub(without.groupby("url").size(), fill_value=0)
    pulled = extra[extra > 0]
    assert (pulled == 1).all() and len(pulled) == 10
    assert all(u.startswith("https://small.example/") for u in pulled.index)
    assert len(sched) == len(without) + m.planned_backfill <= 100
    assert set(sched.lane) <= {"refresh", "fast", "discovery", "audit"}
    assert set(without.url) <= set(sched.url)  # every due visit is still planned
    for host, rows in sched.groupby("host"):
        gaps = np.diff(np.sort(epoch_seconds(rows.not_before)))
        assert len(gaps) == 0 or gaps.min() >= rows.crawl_delay_s.iloc[0] - 1e-6
    assert m.carried_over == m.due_total - (m.planned_total - m.planned_backfill)


def test_a_page_timed_through_its_host_is_visited_just_after_the_hosts_hour(spark, tmp_path):
    """Issue 14 §1 through allocate and build_schedule: two pages of t.example changed at
    07:30 on six days (timed on their own), a third twice at 07:24 (timed only through the
    host's phase), a fourth never dated. The third's visit lands after 07:24 + lag, within
    the host pool's spread; with shrinkage off it follows its even spacing instead."""
    from jobs.core import timing

    root = str(tmp_path)
    day0 = pd.Timestamp("2026-10-27T00:00", tz="UTC").timestamp()
    changes = {0: [7.5 * 3600 + k * 86400 for k in range(6)],
               1: [7.5 * 3600 + 120 + k * 86400 for k in range(6)],
               2: [7.4 * 3600 + k * 86400 for k in (2, 5)], 3: []}
    sums = timing.empty(4)
    for i, t in changes.items():
        timing.add_changes(sums, np.full(len(t), i), day0 + np.asarray(t, float), 1.0)
    t = pd.Timestamp("2026-11-02T12:00", tz="UTC")
    rows = [{"url": f"https://t.example/p{i}", "host": "t.example", "first_seen": t,
             "last_fetch_at": t, "last_success_at": t, "etag": None, "last_modified": None,
             "interval_s": 86400.0, "lambda_hat": 0.7, "lambda_lo": 0.1, "lambda_hi": 3.0,
             "n_fetches": 8, "n_observations": 7, "n_changes": 5, "exposure_days": 7.0,
             "n_errors": 0, "consecutive_gone": 0, "gone": False, "importance": 1.0,
             "lane": "refresh", "updated_dt": pd.Timestamp("2026-11-02").date(),
             **{c: float(sums[c][i]) for c in timing.TIMING_COLUMNS}} for i in range(4)]
    tiny_web.write_committed(root, "state", rows, "2026-11-02")
    tiny_web.write(root, "host_policy", [{"host": "t.example", "crawl_delay_s": 60.0,
                                          "max_fetches_per_day": None}])
    tiny_web.write(root, "frontier", [], dt="2026-11-02")
    tiny_web.write_committed(root, "hosts", [{"host": "t.example", "cap_factor": 1.0,
                                              "trust_etag": True, "trust_lm": True,
                                              "audit_wanted": False}], "2026-11-02")
    write_stage_record(make_config(root), "2026-11-02", "update_state",
                       {"urls_known": 4, "urls_gone": 0, "log_rows": 0})
    w0 = pd.Timestamp("2026-11-03T00:00", tz="UTC").timestamp()

    def visits(*sets):
        cfg = make_config(root, "policy.name=optimal", "budget.daily_fetches=40",
                          "budget.fast_share=0", "audit.sample_rate=0", *sets)
        allocate.run(cfg, "2026-11-02", spark)
        build_schedule.run(cfg, "2026-11-02", spark)
        s = _schedule(root)
        return {u: np.sort(epoch_seconds(g.not_before)) - w0 for u, g in s.groupby("url")}

    on = visits()
    hour = 3600.0
    for i, phase in ((0, 7.5 * hour), (1, 7.5 * hour + 120), (2, 7.4 * hour)):
        got = on[f"https://t.example/p{i}"]
        assert len(got) == 1 and phase + 600 <= got[0] <= phase + 2.5 * hour  # one a day
    off = visits("timing.host_min_dated_changes=5")
    assert not 7.4 * hour <= off["https://t.example/p2"][0] <= 7.4 * hour + 2.5 * hour
    assert len(off["https://t.example/p0"]) == 1 and off["https://t.example/p0"][0] == \
        pytest.approx(on["https://t.example/p0"][0], abs=120)


def test_bucketed_matches_the_fast_patterns_once_as_prepare_would(spark):
    pages = _instance(n=60).assign(url=lambda d: [
        u if i % 3 else (f"https://{h}/" if i % 2 else f"https://{h}/feed.xml")
        for i, (u, h) in enumerate(zip(d.url, d.host))])
    cfg = make_config("/nonexistent", "policy.name=optimal", "budget.daily_fetches=30")
    sdf = spark.createDataFrame(pages.astype({"max_fetches_per_day": "float"}))
    got = policy_rates.bucketed(cfg, sdf).toPandas().sort_values("url").reset_index(drop=True)
    want = lanes.pattern_match(got["url"], lanes.compile_patterns(cfg.lanes.fast_patterns))
    assert got[plan_work.PATTERN_COLUMN].tolist() == want.tolist() and 0 < want.sum() < len(want)
    ctx = plan_context(cfg, W0, W0 + 86400)
    with_column = plan_work.prepare(got, ctx)
    without = plan_work.prepare(got.drop(columns=[plan_work.PATTERN_COLUMN]), ctx)
    pd.testing.assert_frame_equal(with_column, without)
    assert (with_column["lane"] == "fast").sum() >= want.sum()


def test_plan_keeps_the_states_last_success_to_the_microsecond(spark, tmp_path):
    # The plan's last_success_at goes through float epoch seconds; it must come back as the
    # state's own timestamp, not a microsecond before it.
    root = str(tmp_path)
    rows = _state_rows()
    rng = np.random.default_rng(5)
    for r in rows:
        r["last_success_at"] = r["last_fetch_at"] = r["last_success_at"] - pd.Timedelta(
            microseconds=int(rng.integers(1, 86_400_000_000)))
    tiny_web.write_committed(root, "state", rows, "2026-11-02")
    tiny_web.write_committed(root, "hosts", [{"host": "big.example", "cap_factor": 1.0,
                                              "trust_etag": True, "trust_lm": True,
                                              "audit_wanted": False}], "2026-11-02")
    allocate.run(make_config(root, "budget.daily_fetches=60"), "2026-11-02", spark)
    plan = pd.read_parquet(os.path.join(root, "plan", "dt=2026-11-02")).set_index("url")
    state = pd.DataFrame(rows).set_index("url")
    got = plan["last_success_at"].dropna()
    assert len(got) == len(rows)
    want = state.loc[got.index, "last_success_at"]
    np.testing.assert_array_equal(
        pd.to_datetime(got, utc=True).dt.tz_localize(None).to_numpy(dtype="datetime64[us]"),
        pd.to_datetime(want, utc=True).dt.tz_localize(None).to_numpy(dtype="datetime64[us]"))
