"""Freshness per page kind in the backtest report (issue 14): the aggregation, its agreement
with the truth metrics, and its place in the report's data and HTML."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lab.backtest.report import kind_display, kind_freshness, kind_table, kind_text, write_report

POISSON, DAILY, BURSTY, WEEKLY = range(4)


def _alloc(policy: str, seed: int, fresh: list) -> pd.DataFrame:
    # Five pages: a front page, then one page of each process kind.
    return pd.DataFrame({"policy": policy, "seed": seed, "host": "h",
                         "kind": [POISSON, POISSON, DAILY, BURSTY, WEEKLY],
                         "front": [True, False, False, False, False],
                         "importance": [10.0, 1.0, 1.0, 2.0, 1.0],
                         "obs_days": [2.0, 2.0, 2.0, 2.0, 1.0], "fresh_days": fresh,
                         "lam": 0.5, "visits_per_day": 1.0})


HAND = pd.concat([_alloc("optimal", 0, [1.0, 2.0, 0.0, 1.0, 0.5]),
                  _alloc("oracle", 0, [2.0, 2.0, 1.0, 1.0, 1.0]),
                  _alloc("optimal", 1, [2.0, 1.0, 1.0, 0.0, 1.0]),
                  _alloc("oracle", 1, [2.0, 2.0, 2.0, 2.0, 0.5])], ignore_index=True)


def test_kind_freshness_on_a_hand_made_frame():
    k = kind_freshness(HAND)
    assert list(k.loc[(k["policy"] == "optimal") & (k["seed"] == 0), "kind"]) == [
        "all", "front", "poisson", "daily", "bursty", "weekly"]
    k = k.set_index(["policy", "seed", "kind"]).sort_index()
    # all, optimal seed 0: plain 4.5 / 9; weighted (10 + 2 + 0 + 2 + 0.5) / (20 + 2 + 2 + 4 + 1)
    assert k.loc[("optimal", 0, "all"), "freshness"] == pytest.approx(4.5 / 9)
    assert k.loc[("optimal", 0, "all"), "freshness_weighted"] == pytest.approx(14.5 / 29)
    assert k.loc[("optimal", 0, "all"), "pages"] == 5
    assert k.loc[("optimal", 0, "front"), "freshness"] == pytest.approx(0.5)
    assert k.loc[("optimal", 0, "weekly"), "freshness"] == pytest.approx(0.5)
    # Ratios to the oracle of the same seed and kind.
    assert k.loc[("optimal", 0, "all"), "freshness_vs_oracle"] == pytest.approx(4.5 / 7)
    # oracle seed 0, weighted: (20 + 2 + 1 + 2 + 1) / 29
    assert k.loc[("optimal", 0, "all"), "freshness_weighted_vs_oracle"] == pytest.approx(14.5 / 26)
    assert k.loc[("optimal", 1, "daily"), "freshness_vs_oracle"] == pytest.approx(0.5)
    assert k.loc[("optimal", 1, "weekly"), "freshness_vs_oracle"] == pytest.approx(2.0)
    assert (k.loc["oracle", "freshness_vs_oracle"] == 1.0).all()

    t = kind_table(k.reset_index()).set_index(["policy", "kind"])
    # Mean and sample sd over the two seeds: the ratio is taken per seed, then averaged.
    r = [4.5 / 7, 5.0 / 8.5]
    assert t.loc[("optimal", "all"), "freshness_vs_oracle_mean"] == pytest.approx(np.mean(r))
    assert t.loc[("optimal", "all"), "freshness_vs_oracle_sd"] == pytest.approx(np.std(r, ddof=1))
    assert t.loc[("optimal", "bursty"), "freshness_mean"] == pytest.approx(0.25)
    assert t.loc[("optimal", "bursty"), "seeds"] == 2

    shown = kind_display(kind_table(kind_freshness(HAND)))
    assert list(shown.columns) == ["policy", "measure", "all", "front", "poisson", "daily",
                                   "bursty", "weekly"]
    row = shown[(shown["policy"] == "optimal") & (shown["measure"] == "÷ oracle")].iloc[0]
    assert row["all"] == f"{np.mean(r):.3f} ± {np.std(r, ddof=1):.3f}"
    assert shown.iloc[0]["measure"] == "pages" and shown.iloc[0]["weekly"] == "1"
    # Without an oracle run the ratio rows are left out, not shown as NaN.
    alone = kind_text(HAND[HAND["policy"] == "optimal"])
    assert "oracle" not in alone and "nan" not in alone


def test_kind_all_is_the_truth_metrics_freshness():
    # The per-kind sums over every page reproduce the run's truth metrics (the same day sums).
    from lab.backtest.loop import _allocation
    from lab.sim import Simulation, WebParams, run_history

    sim = Simulation(WebParams(n_urls=600, n_hosts=12, seed=3, start="2026-01-01",
                               process_shares=(0.6, 0.15, 0.15, 0.1)))
    snap = {}

    def on_day(day, table, rec):
        if day == 1:
            snap["visits"] = sim.copies.visits.copy()
            snap["seen"] = (sim.page_obs_days.copy(), sim.page_fresh_days.copy())

    run_history(sim, 5, on_day)
    alloc = _allocation(sim, snap["visits"], snap["seen"], 3).assign(policy="legacy", seed=0)
    k = kind_freshness(alloc).set_index("kind")
    m = sim.metrics(2, 4)
    assert k.loc["all", "freshness"] == pytest.approx(m["freshness"], rel=1e-9)
    assert k.loc["all", "freshness_weighted"] == pytest.approx(m["freshness_weighted"], rel=1e-9)
    assert set(k.index) == {"all", "front", "poisson", "daily", "bursty", "weekly"}
    assert k.loc["front", "pages"] == 24 and k.drop("all")["pages"].sum() == k.loc["all", "pages"]


def test_report_carries_the_kind_table(tmp_path):
    metrics = pd.DataFrame({"policy": ["optimal", "oracle"] * 2, "seed": [0, 0, 1, 1],
                            "status": "ok", "error": None,
                            "freshness_weighted": [0.5, 0.6, 0.55, 0.65],
                            "freshness": [0.4, 0.5, 0.45, 0.5]})
    empty = pd.DataFrame()
    path = write_report(tmp_path, {"seeds": [0, 1]}, "python -m lab.backtest", metrics, empty,
                        HAND, empty, empty, empty, [])
    summary = json.loads((tmp_path / "data" / "summary.json").read_text())
    rows = {(r["policy"], r["kind"]): r for r in summary["kinds"]}
    assert rows[("optimal", "weekly")]["freshness_mean"] == pytest.approx(0.75)
    assert rows[("oracle", "all")]["freshness_vs_oracle_mean"] == 1.0
    per_seed = pd.read_parquet(tmp_path / "data" / "kinds.parquet")
    assert len(per_seed) == 2 * 2 * 6
    pages = pd.read_parquet(tmp_path / "data" / "pages.parquet")  # the per-page frame, whole
    pd.testing.assert_frame_equal(pages, HAND.reset_index(drop=True), check_dtype=False)
    html = path.read_text()
    assert "Freshness per page kind" in html and "÷ oracle, importance-weighted" in html
    assert html.count("<table") == 3  # statuses, truth metrics, kinds


def test_truth_pages_give_each_publishers_change_instant(tmp_path):
    """_truth/pages carries the fixed change instant of daily and weekly publishers, on the
    planner's clock (seconds into the UTC day, or into the week from Monday 00:00 UTC): the
    simulator's changes of those pages fall within minutes of it."""
    from lab.backtest.loop import BacktestSpec, write_inputs
    from lab.sim import Simulation
    from lab.sim.changes import shard_day_changes

    sim = Simulation(BacktestSpec(seed=3, urls=600, hosts=8).params())
    write_inputs(sim, tmp_path, 0)
    truth = pd.read_parquet(tmp_path / "_truth" / "pages")
    assert set(truth.columns) == {"url", "kind", "period_s", "change_s"}
    timed = truth[truth["period_s"].notna()]
    assert set(timed["kind"]) == {"daily", "weekly"} and len(timed) > 20
    assert truth.loc[truth["kind"].isin(["poisson", "bursty", "front"]), "change_s"].isna().all()
    p, pages = sim.params, sim.web.pages
    start = pd.Timestamp(p.start_date, tz="UTC").timestamp()
    instant = timed.set_index("url")
    lags = []
    for day in range(14):
        page, t = shard_day_changes(p, pages, np.arange(len(pages.url)), day,
                                    np.random.default_rng(day))
        keep = np.isin(pages.url[page], instant.index)
        row = instant.loc[pages.url[page][keep]]
        period = row["period_s"].to_numpy()
        origin = np.where(period == 7 * 86400.0, 4 * 86400.0, 0.0)
        lag = np.mod(start + t[keep] * 86400.0 - origin - row["change_s"].to_numpy(), period)
        lags.append(np.minimum(lag, period - lag))
    lags = np.concatenate(lags)
    assert len(lags) > 50 and np.max(lags) < 30 * 60  # ± 5 min jitter, clipped at midnight
