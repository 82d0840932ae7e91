"""The operator's overrides/ table: checked row by row, applied by the planner (pins capped
by politeness, pauses, forced fetches, forgotten URLs), shown by explain and the report.

Fast: the pure rules (jobs.core.overrides) and a bucket planned with override columns
(jobs.core.host_plan). e2e: a real overrides/ file through the real stages (update_state,
allocate, build_schedule with Spark), then explain and the report read the results.
"""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

from jobs.core import host_plan
from jobs.core import overrides as core
from tests.core.test_host_plan import W0, _bucket, _ctx

WINDOW_DAY = "2026-11-30"


def _table(rows):
    return pd.DataFrame(rows).reindex(columns=list(core.COLUMNS))


GOOD = [
    {"action": "pin", "url": "https://a.example/p1", "visits_per_day": 3.0, "note": "ops"},
    {"action": "pause_host", "host": "B.Example", "until": dt.date(2026, 12, 5)},
    {"action": "force", "url": "https://a.example/p2",
     "created_at": pd.Timestamp("2026-11-29T10:00", tz="UTC")},
    {"action": "forget", "url": "https://a.example/p3", "until": dt.date(2026, 12, 31)},
]
BAD = [
    ({"action": "ban", "url": "https://a.example/x"}, "bad_action"),
    ({"action": "pin", "visits_per_day": 2.0}, "missing_url"),
    ({"action": "pin", "url": "https://a.example/q", "visits_per_day": 0.0}, "bad_visits_per_day"),
    ({"action": "pin", "url": "https://a.example/q", "visits_per_day": 1e6}, "bad_visits_per_day"),
    ({"action": "force", "url": "ftp://a.example/q", "created_at": pd.Timestamp("2026-11-29", tz="UTC")},
     "bad_url"),
    ({"action": "force", "url": "https://a.example/q"}, "missing_created_at"),
    ({"action": "pause_host", "host": "c.example"}, "missing_until"),
    ({"action": "pause_host", "until": dt.date(2026, 12, 1)}, "missing_host"),
    ({"action": "pause_host", "host": "bad host!", "until": dt.date(2026, 12, 1)}, "bad_host"),
    ({"action": "forget", "url": "https://user:pw@a.example/q"}, "url_userinfo"),
]


def test_bad_rows_are_quarantined_with_a_reason_and_good_ones_kept():
    valid, bad = core.check(_table(GOOD + [r for r, _ in BAD]), 2048)
    assert list(valid["action"]) == ["pin", "pause_host", "force", "forget"]
    assert valid.loc[1, "target"] == "b.example"  # hosts are normalised
    assert list(bad["reason"]) == [reason for _, reason in BAD]
    assert all(json.loads(j) for j in bad["row_json"])


def test_two_rows_for_one_target_are_both_quarantined_as_duplicates():
    rows = GOOD + [{"action": "pin", "url": "https://a.example/p1", "visits_per_day": 9.0}]
    valid, bad = core.check(_table(rows), 2048)
    assert "pin" not in set(valid["action"])
    assert list(bad["reason"]) == ["duplicate_override"] * 2


def test_an_override_names_a_page_in_any_spelling_of_its_url():
    rows = [{"action": "pin", "url": "https://A.EXAMPLE.:443/p1#top", "visits_per_day": 2.0},
            {"action": "forget", "url": "HTTPS://a.example/%70%32"}]
    valid, _ = core.check(_table(rows), 2048)
    assert list(valid["target"]) == ["https://a.example/p1", "https://a.example/p2"]
    assert list(valid["url"]) == list(valid["target"])
    both = GOOD + [{"action": "pin", "url": "https://a.example.:443/p1", "visits_per_day": 9.0}]
    _, bad = core.check(_table(both), 2048)
    assert list(bad["reason"]) == ["duplicate_override"] * 2


def test_until_ends_an_override_and_a_pause_lasts_to_its_date():
    valid, _ = core.check(_table(GOOD), 2048)
    assert len(core.in_force(valid, WINDOW_DAY)) == 4
    # the pause ends at 2026-12-05 00:00: the window of 12-04 is paused, that of 12-05 not
    assert "pause_host" in set(core.in_force(valid, "2026-12-04")["action"])
    assert "pause_host" not in set(core.in_force(valid, "2026-12-05")["action"])
    assert list(core.in_force(valid, "2026-12-31")["action"]) == ["pin", "force"]
    cols = core.page_columns(core.in_force(valid, WINDOW_DAY)).set_index("url")
    assert cols.loc["https://a.example/p1", "pin_rate"] == 3.0
    assert cols.loc["https://a.example/p2", "force_after"] == pd.Timestamp(
        "2026-11-29T10:00", tz="UTC").timestamp()
    assert bool(cols.loc["https://a.example/p3", "forget"])
    assert core.paused_hosts(core.in_force(valid, WINDOW_DAY)) == ["b.example"]
    lines = [core.describe(r) for r in valid.to_dict("records")]
    assert lines[0] == "pin https://a.example/p1 at 3 visits/day (ops)"
    assert lines[1] == "pause host b.example: no fetch before 2026-12-05"


def _planned(pages, ctx):
    out = host_plan.plan_bucket(pages, ctx)
    visits = out[out["url"].notna() & out["reason"].isna()]
    plan = out[out["reason"].notna()].set_index("url")
    return visits, plan


def test_a_pin_replaces_the_rate_but_never_passes_the_host_cap():
    pages = _bucket(seed=3)
    ctx = _ctx(level=0.05)
    known = pages[(pages["lane"] == "refresh") & ~pages["gone"]]
    slow = known[known["host"] == "h0.example"].iloc[0]   # crawl delay 2880 s: cap 30/day
    fast = known[known["host"] == "h4.example"].iloc[0]   # crawl delay 10 s
    pin = np.full(len(pages), np.nan)
    pin[pages.index.get_loc(slow.name)] = 500.0
    pin[pages.index.get_loc(fast.name)] = 6.0
    visits, plan = _planned(pages.assign(pin_rate=pin), ctx)
    cap0 = plan.loc[slow.url, "host_cap"]
    assert plan.loc[slow.url, "reason"] == "override_pin_capped"
    assert plan.loc[slow.url, "planned_rate"] == cap0 < 500
    assert plan.loc[fast.url, "reason"] == "override_pin"
    assert plan.loc[fast.url, "planned_rate"] == 6.0
    mine = visits[visits["url"] == fast.url]
    assert (mine["lane"] == "refresh").sum() == 6  # six visits in the day's window
    assert "backfill" not in set(mine["lane"])     # a pinned rate is not topped up
    # politeness: no host gets more candidate visits than its cap
    per_host = visits.groupby("host").size()
    caps = plan.groupby("host")["host_cap"].max()
    assert (per_host <= caps.reindex(per_host.index)).all()
    assert mine.loc[mine["lane"] != "audit", "probe"].all()  # kept first by the cut


def test_a_forced_page_is_due_at_the_window_start_unless_fetched_since():
    pages = _bucket(seed=4)
    ctx = _ctx(level=0.05)
    known = pages[(pages["lane"] == "refresh") & ~pages["gone"]
                  & pages["pending_signal_at"].isna()]
    a, b = known.iloc[0], known.iloc[1]
    force = np.full(len(pages), np.nan)
    force[pages.index.get_loc(a.name)] = W0 - 60.0                    # asked after its fetch
    force[pages.index.get_loc(b.name)] = pages.loc[b.name, "last_fetch_at"].timestamp() - 1
    visits, plan = _planned(pages.assign(force_after=force), ctx)
    assert plan.loc[a.url, "reason"] == "override_force"
    first = visits[visits["url"] == a.url].sort_values("due_s").iloc[0]
    assert first["due_s"] == pytest.approx(W0, abs=1.0) and first["p_changed"] == 1.0
    assert plan.loc[b.url, "reason"] != "override_force"


def test_a_paused_host_gets_no_visit():
    pages = _bucket(seed=5)
    ctx = _ctx(level=0.05)
    paused = pages["host"] == "h2.example"
    visits, plan = _planned(pages.assign(paused=paused, cap_factor=np.where(
        paused, 0.0, pages["cap_factor"])), ctx)
    assert not (visits["host"] == "h2.example").any()
    assert set(plan.loc[plan["host"] == "h2.example", "reason"]) == {"override_pause"}
    assert (visits["host"] != "h2.example").sum() > 0


# --- e2e: a real overrides/ file through the real stages -----------------------------------

DAYS = ("2026-11-27", "2026-11-28", "2026-11-29")
D = DAYS[-1]


@pytest.fixture(scope="module")
def overridden(spark, tmp_path_factory):
    from jobs import allocate, build_schedule, update_state, validate_logs
    from lab.tools.generate_sample import generate_sample
    from tests.conftest import make_config

    root = tmp_path_factory.mktemp("overrides")
    generate_sample(str(root), urls=600, hosts=12, days=len(DAYS), end_date=D, seed=11)
    cfg = make_config(str(root), "budget.daily_fetches=400")
    for day in DAYS:
        validate_logs.run(cfg, day)
        update_state.run(cfg, day, spark, bootstrap=(day == DAYS[0]))
    state = pd.read_parquet(root / "state" / f"dt={D}")
    live = state[~state["gone"]].sort_values("url")
    # three hosts: one with an explicit daily cap of 40 (set in its host_policy row) for the
    # pins, one for the forced fetch, the one with most pages paused
    by_size = live.groupby("host").size().sort_values(ascending=False)
    paused, slow, quick = by_size.index[:3]
    policy = pd.read_parquet(root / "host_policy")
    # (an int column: pandas reads it as float beside the nulls, the contract wants int)
    policy["max_fetches_per_day"] = policy["max_fetches_per_day"].astype("Int64")
    policy.loc[policy["host"] == slow, "max_fetches_per_day"] = 40
    assert (policy["host"] == slow).any()
    policy.to_parquet(root / "host_policy" / "part-0.parquet", index=False)
    pin, pin_high, forgot = (live.loc[live["host"] == slow, "url"].iloc[k] for k in range(3))
    forced = live.loc[live["host"] == quick, "url"].iloc[0]
    rows = [
        {"action": "pin", "url": pin, "visits_per_day": 2.0, "note": "ops: launch"},
        {"action": "pin", "url": pin_high, "visits_per_day": 1440.0},
        {"action": "pause_host", "host": paused, "until": dt.date(2026, 12, 2)},
        # asked at the window's start: after every fetch of the logs so far
        {"action": "force", "url": forced, "created_at": pd.Timestamp("2026-11-30", tz="UTC")},
        {"action": "forget", "url": forgot},
        {"action": "ban", "url": pin},                                        # bad_action
        {"action": "pin", "url": "https://x.example/a b", "visits_per_day": 1.0},  # bad_url
    ]
    (root / "overrides").mkdir()
    frame = _table(rows).astype({"visits_per_day": float})
    frame["until"] = pd.to_datetime(frame["until"]).dt.date
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    frame.to_parquet(root / "overrides" / "ops.parquet", index=False)
    record = allocate.run(cfg, D, spark)
    build_schedule.run(cfg, D, spark)
    plan = pd.read_parquet(root / "plan" / f"dt={D}")
    sched = pd.read_parquet(root / "schedules" / "dt=2026-11-30")
    return {"cfg": cfg, "root": root, "record": record, "plan": plan.set_index("url"),
            "sched": sched, "paused": paused, "pin": pin, "pin_high": pin_high,
            "forced": forced, "forgot": forgot}


@pytest.mark.e2e
def test_overrides_reach_plan_and_schedule_and_bad_rows_are_quarantined(overridden):
    o = overridden
    plan, sched = o["plan"], o["sched"]
    assert plan.loc[o["pin"], "reason"] == "override_pin"
    assert plan.loc[o["pin"], "planned_rate"] == 2.0
    assert (sched["url"] == o["pin"]).sum() == 2
    cap = plan.loc[o["pin_high"], "host_cap"]
    assert cap < 1440 and plan.loc[o["pin_high"], "reason"] == "override_pin_capped"
    assert plan.loc[o["pin_high"], "planned_rate"] == cap
    assert plan.loc[o["forced"], "reason"] == "override_force"
    first = pd.to_datetime(sched[sched["url"] == o["forced"]]["not_before"], utc=True).min()
    assert first < pd.Timestamp("2026-11-30T01:00", tz="UTC")
    assert o["forgot"] not in plan.index and not (sched["url"] == o["forgot"]).any()
    assert not (sched["host"] == o["paused"]).any()
    assert set(plan.loc[plan["host"] == o["paused"], "reason"]) == {"override_pause"}
    # politeness: per host, the schedule's rows stay a crawl delay apart and under the cap
    for host, g in sched.groupby("host"):
        t = np.sort((pd.to_datetime(g["not_before"], utc=True)
                     - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy())
        if len(t) > 1:
            assert np.diff(t).min() >= g["crawl_delay_s"].iloc[0] - 1e-6, host
    rec = o["record"]["overrides"]
    assert rec == {"in_force": 5, "by_action": {"forget": 1, "force": 1, "pause_host": 1,
                                                "pin": 2}, "quarantined": 2}
    q = pd.read_parquet(o["root"] / "quarantine" / f"dt={D}" / "source=overrides")
    assert sorted(q["reason"]) == ["bad_action", "bad_url"]


@pytest.mark.e2e
def test_explain_and_report_show_the_overrides(overridden, capsys, tmp_path):
    from jobs import console

    o = overridden
    sets = ["--set", f"paths.root={o['root']}", "--set", "budget.daily_fetches=400"]
    code = console.main(["explain", o["pin_high"], "--date", D, "--schedule", "staging", *sets])
    out = capsys.readouterr().out
    assert code == 0 and "Overrides in force (overrides/):" in out
    assert f"pin {o['pin_high']} at 1440 visits/day" in out
    assert "reason: override_pin_capped -- the operator pinned the page above its host's " \
           "daily cap: politeness wins" in out
    code = console.main(["explain", o["forgot"], "--date", D, "--schedule", "staging", *sets])
    out = capsys.readouterr().out
    assert code == 0 and "forgotten by an override" in out
    page = tmp_path / "r.html"
    assert console.main(["report", "--date", D, "--out", str(page), *sets]) == 0
    html = page.read_text()
    assert "Operator overrides" in html and "5 override(s)" in html
    assert "2 bad override row(s) quarantined" in html
    assert f"pause host {o['paused']}: no fetch before 2026-12-02" in html
