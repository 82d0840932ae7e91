"""The run study's tables on hand-made frames with known answers (lab.studies.study_run)."""
import numpy as np
import pandas as pd
import pytest

from jobs.config import load_config
from jobs.params import timing_params
from lab.studies import study_run


def test_day_ratios_average_the_seeds_per_planned_day_and_per_window():
    rows = []
    for seed, start in ((0, 10), (1, 40)):      # the seeds' planned days need not share dates
        for i in range(12):
            rows += [{"seed": seed, "day": start + i, "policy": "oracle",
                      "freshness_weighted": 0.5},
                     {"seed": seed, "day": start + i, "policy": "optimal",
                      "freshness_weighted": 0.5 * (1.0 + 0.01 * i + 0.02 * seed)}]
    by_day, windows = study_run.day_ratios(pd.DataFrame(rows))
    assert list(by_day.index) == list(range(1, 13))
    assert by_day.loc[1] == pytest.approx(1.01) and by_day.loc[12] == pytest.approx(1.12)
    assert windows == pytest.approx({"1-5": 1.03, "6-10": 1.08, "11-12": 1.115})
    with pytest.raises(ValueError):
        study_run.day_ratios(pd.DataFrame(rows).query("policy == 'optimal'"))


def _pages():
    return pd.DataFrame({
        "kind": ["daily", "daily", "poisson", "poisson", "poisson"],
        "importance": [2.0, 1.0, 1.0, 3.0, 1.0],
        "lam": [1.0, 1.0, 0.5, 0.2, 4.0], "lambda_hat": [1.0, 1.0, 1.2, 0.2, 2.0],
        "f": [1.0, 0.5, 0.05, 0.3, 0.1], "f_oracle": [0.5, 0.5, 0.25, 0.3, 0.0],
        "F": [0.9, 0.3, 0.1, 0.6, 0.0], "F_oracle": [0.4, 0.4, 0.5, 0.6, 0.0],
        "period_s": [86400.0, np.nan, np.nan, np.nan, np.nan],
        "n_observations": [9.0, 9.0, 4.0, 12.0, 4.0], "n_changes": [9.0, 5.0, 4.0, 3.0, 4.0]})


def test_timed_table_weighs_freshness_by_importance_per_kind_and_timing():
    t = study_run.timed_table(_pages())
    assert t.loc[("daily", True), "pages"] == 1 and t.loc[("daily", True), "fresh_real"] == 0.9
    poisson = t.loc[("poisson", False)]
    assert poisson["pages"] == 3 and poisson["visits"] == pytest.approx(0.45)
    assert poisson["fresh_real"] == pytest.approx((0.1 + 1.8) / 5)
    assert poisson["fresh_oracle"] == pytest.approx((0.5 + 1.8) / 5)
    # untimed Poisson model: (f/λ̂)(1 − e^(−λ̂/f)), weighted
    model = [(f / lam) * -np.expm1(-lam / f) for f, lam in ((0.05, 1.2), (0.3, 0.2), (0.1, 2.0))]
    assert poisson["fresh_model"] == pytest.approx((model[0] + 3 * model[1] + model[2]) / 5)


def test_poisson_loss_groups_by_evidence_in_percent_of_the_oracle():
    loss = study_run.poisson_loss(_pages())
    total = 0.5 + 1.8                          # Poisson pages' Σ w F_oracle
    over = loss.loc[("3-10", True, "over")]    # λ̂ 1.2 against λ 0.5, every fetch changed
    assert over["pages"] == 1 and over["loss"] == pytest.approx(100 * 0.4 / total)
    assert loss.loc[(">10", False, "ok"), "loss"] == pytest.approx(0.0)
    assert loss.loc[("3-10", True, "under"), "pages"] == 1   # λ̂ 2 against 4: beyond 1.5×
    assert loss["loss"].iloc[0] == loss["loss"].max()
    with pytest.raises(ValueError):
        study_run.poisson_loss(_pages().query("kind == 'daily'"))


def _commit(root, table, frame):
    from jobs import partitions
    path = root / table / "dt=2026-01-02"
    path.mkdir(parents=True)
    frame.to_parquet(path / "part-0.parquet")
    partitions.commit_files(str(path), table, [str(path / "part-0.parquet")])


def test_run_pages_join_the_state_by_url_when_a_page_never_reached_it(tmp_path):
    # Page b was never observed: the state has no row for it. Its neighbours must still get
    # their own counts (a join by position once gave c the counts of the row after b).
    urls = ["https://h.example/a", "https://h.example/b", "https://h.example/c"]
    alloc = pd.concat([pd.DataFrame({
        "seed": 0, "policy": policy, "url": urls, "kind": [0, 0, 0], "front": False,
        "lam": [0.5, 1.0, 2.0], "importance": 1.0, "visits_per_day": [0.2, 0.3, 0.4],
        "obs_days": 10.0, "fresh_days": [5.0, 6.0, 7.0]}) for policy in ("optimal", "oracle")])
    (tmp_path / "out" / "data").mkdir(parents=True)
    alloc.to_parquet(tmp_path / "out" / "data" / "pages.parquet")
    data = tmp_path / "w" / "seed0" / "optimal" / "data"
    _commit(data, "state", pd.DataFrame({
        "url": [urls[2], urls[0]], "host": "h.example", "lane": "refresh",
        "lambda_hat": [2.2, 0.6], "n_observations": [9.0, 4.0], "n_changes": [9.0, 1.0]}))
    _commit(data, "hosts", pd.DataFrame({"host": ["h.example"], "trust_lm": [False],
                                         "signal_trusted": [False]}))
    _commit(tmp_path / "w" / "seed0" / "oracle" / "data", "plan", pd.DataFrame({
        "reason": ["multiplier"], "marginal_value": [1.5]}))
    params = timing_params(load_config(None, []))
    pages = study_run.run_pages(str(tmp_path / "out"), str(tmp_path / "w"), 0, params)
    got = pages.set_index("url")
    assert list(got.index) == [urls[0], urls[2]]
    assert got.loc[urls[2], "n_observations"] == 9.0 and got.loc[urls[2], "lambda_hat"] == 2.2
    assert got.loc[urls[0], "n_changes"] == 1.0 and got.loc[urls[0], "lam"] == 0.5


def test_poisson_visits_by_speed_and_estimate():
    pages = pd.DataFrame({
        "kind": ["poisson", "poisson", "poisson", "daily"],
        "lam": [0.01, 5.0, 5.0, 1.0], "lambda_hat": [0.03, 2.0, 5.5, 1.0],
        "importance": [1.0, 2.0, 1.0, 9.0], "f": [0.1, 0.5, 0.3, 1.0],
        "f_oracle": [0.05, 0.2, 0.3, 0.5], "F": [0.9, 0.2, 0.1, 0.8],
        "F_oracle": [0.8, 0.1, 0.1, 0.4]})
    t = study_run.poisson_visits(pages)
    assert list(t.index) == [("<0.05", "over"), (">2", "ok"), (">2", "under")]
    assert t.loc[("<0.05", "over"), "extra_visits"] == pytest.approx(0.05)
    assert t.loc[(">2", "under"), "fresh_w"] == pytest.approx(0.2)
    assert t["pages"].sum() == 3                       # the daily page is not Poisson


def test_visits_by_kind_and_day_count_each_planned_days_fetches():
    import datetime as dt

    from lab.studies.study_run import visits_by_kind_and_day

    kind = pd.Series({"a": "poisson", "b": "front", "c": "daily"})
    at = lambda d, h: pd.Timestamp(f"2026-01-{d:02d} {h:02d}:00", tz="UTC")  # noqa: E731
    mine = pd.DataFrame({"url": ["a", "a", "b", "c", "x", "a"],
                         "fetched_at": [at(15, 1), at(15, 23), at(16, 5), at(16, 6), at(16, 7),
                                        at(14, 9)]})  # the last: before the window
    oracle = pd.DataFrame({"url": ["b", "b", "c"],
                           "fetched_at": [at(15, 2), at(16, 3), at(17, 0)]})
    got = visits_by_kind_and_day(mine, oracle, kind, [dt.date(2026, 1, 15), dt.date(2026, 1, 16),
                                                      dt.date(2026, 1, 17)])
    assert list(got.columns) == [1, 2, 3]
    assert got.loc["poisson"].tolist() == [2, 0, 0]
    assert got.loc["front"].tolist() == [-1, 0, 0]
    assert got.loc["daily"].tolist() == [0, 1, -1]
    assert got.loc["other"].tolist() == [0, 1, 0]  # a url without a kind is still counted


def test_untimed_reason_follows_the_planners_gates_in_order():
    params = timing_params(load_config(None, []))
    day = 2 * np.pi / 86400.0
    tight = [np.cos(day * 36000.0), np.sin(day * 36000.0)]  # every change at 10:00
    rows = [  # (period_s, lane, lambda_hat, tod_n, cos, sin, tod_off_n) -> reason
        (86400.0, "refresh", 0.9, 6.0, 6 * tight[0], 6 * tight[1], 0.0, "timed"),
        (np.nan, "fast", 0.9, 6.0, 6 * tight[0], 6 * tight[1], 0.0, "fast lane"),
        (np.nan, "refresh", 0.9, 0.0, 0.0, 0.0, 0.0, "no dated change"),
        (np.nan, "refresh", 0.9, 6.0, 6 * tight[0], 6 * tight[1], 2.0, "refuted"),
        (np.nan, "refresh", 2.0, 6.0, 3.0, 0.0, 0.0, "spread"),             # R̄ 0.5
        (np.nan, "refresh", params.max_changes_per_period + 1, 6.0, 6 * tight[0],
         6 * tight[1], 0.0, "too fast"),
        (np.nan, "refresh", 0.9, 1.0, tight[0], tight[1], 0.0, "one dated change"),
        (np.nan, "refresh", 0.9, 3.0, 3 * tight[0], 3 * tight[1], 0.0, "host and page tests")]
    frame = pd.DataFrame(rows, columns=["period_s", "lane", "lambda_hat", "tod_n", "tod_cos",
                                        "tod_sin", "tod_off_n", "want"])
    assert list(study_run.untimed_reason(frame, params)) == list(frame["want"])
    assert set(frame["want"]) == set(study_run.UNTIMED_REASONS)
    # A state without the sums (older state) reads as no evidence.
    bare = frame[["period_s", "lane", "lambda_hat"]].iloc[1:3]
    assert list(study_run.untimed_reason(bare, params)) == ["fast lane", "no dated change"]


def test_rhythm_table_splits_each_kinds_gain_by_reason_and_evidence():
    params = timing_params(load_config(None, []))
    pages = pd.DataFrame({
        "kind": ["daily", "daily", "daily", "weekly", "poisson"],
        "period_s": [86400.0, np.nan, np.nan, np.nan, np.nan],
        "lane": "refresh", "lambda_hat": 0.8, "tod_n": [6.0, 0.0, 0.0, 0.0, 0.0],
        "cls": ["lm", "none", "none", "lm", "lm"], "importance": [1.0, 2.0, 1.0, 1.0, 5.0],
        "F": [0.6, 0.2, 0.3, 0.5, 0.1], "F_oracle": [0.4, 0.3, 0.3, 0.5, 0.2],
        "f": [1.0, 0.2, 0.3, 0.1, 0.4], "f_oracle": [0.5, 0.4, 0.3, 0.1, 0.4]})
    t = study_run.rhythm_table(pages, params)
    total = 0.4 + 0.6 + 0.3                                # the daily kind's Σ w F_oracle
    timed, untimed = t.loc[("daily", "timed", "lm")], t.loc[("daily", "no dated change", "none")]
    assert untimed["pages"] == 2 and untimed["share"] == pytest.approx(0.9 / total)
    assert untimed["ratio"] == pytest.approx(0.7 / 0.9)
    assert untimed["points"] == pytest.approx(-0.2 / total)
    assert timed["points"] == pytest.approx(0.2 / total) and timed["ratio"] == pytest.approx(1.5)
    assert untimed["visits"] == pytest.approx(0.5) and untimed["visits_oracle"] == pytest.approx(0.7)
    # the groups' points add up to the kind's ratio less one; Poisson pages are not in it
    daily = t.loc["daily"]
    assert daily["points"].sum() == pytest.approx((0.6 + 0.7) / total - 1)
    assert daily["share"].sum() == pytest.approx(1.0)
    assert t.loc[("weekly", "no dated change", "lm"), "ratio"] == pytest.approx(1.0)
    assert "poisson" not in t.index.get_level_values("kind")
