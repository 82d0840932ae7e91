"""lab.tools.family_table: a run of optimal alone scored against another run's oracle."""
import numpy as np
import pytest
import pandas as pd

from lab.tools.family_table import family, table


def _report(path, policies, fresh, daily=None):
    data = path / "data"
    data.mkdir(parents=True)
    rows, mets = [], []
    daily = daily or {p: [0.5] * 10 for p in policies}
    pd.DataFrame([{"policy": p, "seed": 0, "day": f"2026-01-{d + 1:02d}", "freshness_weighted": v}
                  for p, vals in daily.items() for d, v in enumerate(vals)]
                 ).to_parquet(data / "daily.parquet")
    for pol, f in zip(policies, fresh):
        rows.append(pd.DataFrame({
            "policy": pol, "seed": 0, "kind": np.array([0, 0, 1, 1]),
            "front": np.array([False, True, False, False]), "importance": np.ones(4),
            "obs_days": np.full(4, 10.0), "fresh_days": np.array(f, float),
            "visits_per_day": np.full(4, 0.5)}))
        mets.append({"policy": pol, "seed": 0, "politeness_gap_violations": 0,
                     "politeness_cap_violations": 0, "budget_overrun": 0})
    pd.concat(rows).to_parquet(data / "pages.parquet")
    pd.DataFrame(mets).to_parquet(data / "metrics.parquet")
    return str(path)


def test_ratios_per_kind_against_the_other_runs_oracle(tmp_path):
    base = _report(tmp_path / "base", ["optimal", "oracle"], [[5, 5, 5, 5], [5, 5, 4, 4]])
    after = _report(tmp_path / "after", ["optimal"], [[5, 5, 6, 6]])
    t = table(base, [("before", base), ("after", after)]).set_index("run")
    assert t.loc["before", "daily"] == 1.25 and t.loc["after", "daily"] == 1.5
    assert t.loc["after", "poisson"] == 1.0 and t.loc["after", "front"] == 1.0
    assert t.loc["after", "all"] == round(22 / 18, 3)
    assert t.loc["after", "visits/day"] == 2.0 and t.loc["after", "budget_overrun"] == 0
    assert t.loc["after", "v/day daily"] == 1.0 and t.loc["oracle", "v/day front"] == 0.5


def test_late_days_ratio_skips_the_learning_days(tmp_path):
    base = _report(tmp_path / "base", ["optimal", "oracle"], [[5, 5, 5, 5], [5, 5, 4, 4]],
                   daily={"optimal": [0.4] * 5 + [0.6] * 5, "oracle": [0.5] * 10})
    t = table(base, [("x", base)]).set_index("run")
    assert t.loc["x", "all, days 6-"] == 1.2


def test_family_means_each_webs_seeds_against_their_own_oracles(tmp_path):
    for seed, f in ((0, 6), (1, 4)):
        _report(tmp_path / f"base_jitter_s{seed}", ["optimal", "oracle"],
                [[5, 5, 5, 5], [5, 5, 5, 5]])
        _report(tmp_path / f"lag_jitter_s{seed}", ["optimal"], [[5, 5, f, f]])
    _report(tmp_path / "lag_movers_s0", ["optimal"], [[5, 5, 5, 5]])  # no base: skipped
    t = family(str(tmp_path), ["base", "lag"])
    lag = t[t["run"] == "lag"].set_index("web")
    assert list(lag.index) == ["jitter"] and lag.loc["jitter", "seeds"] == 2
    assert lag.loc["jitter", "daily"] == 1.0          # (1.2 + 0.8) / 2
    assert lag.loc["jitter", "all, worst seed"] == round(18 / 20, 3)
    oracle = t[t["run"] == "oracle"].set_index("web")
    assert oracle.loc["jitter", "seeds"] == 2 and oracle.loc["jitter", "v/day front"] == 0.5



def test_family_rounds_the_mean_not_each_seed(tmp_path):
    """Seeds at 1.0122, 1.0102 and 1.0063 overall: their mean 1.00957 shows as 1.010, where
    rounding each seed first (1.012, 1.010, 1.006) would show 1.009."""
    for seed, extra in enumerate((0.244, 0.204, 0.126)):
        _report(tmp_path / f"base_jitter_s{seed}", ["optimal", "oracle"],
                [[5, 5, 5, 5], [5, 5, 5, 5]])
        _report(tmp_path / f"x_jitter_s{seed}", ["optimal"], [[5, 5, 5, 5 + extra]])
    t = family(str(tmp_path), ["x"]).set_index("web")
    assert t.loc["jitter", "all"] == 1.010 and t.loc["jitter", "all, worst seed"] == 1.006


def test_shares_weigh_each_kinds_ratio_into_the_overall_one(tmp_path):
    """The oracle's fresh days: 5 on a Poisson page, 5 on a front page, 4 and 4 on two daily
    publishers, so shares 5/18, 5/18 and 8/18; the overall ratio is the sum of the kinds'
    ratios weighed by their shares."""
    base = _report(tmp_path / "base", ["optimal", "oracle"], [[5, 5, 5, 5], [5, 5, 4, 4]])
    after = _report(tmp_path / "after", ["optimal"], [[5, 4, 6, 7]])
    t = table(base, [("after", after)], ndigits=None, with_shares=True).set_index("run")
    row = t.loc["after"]
    assert row["share front"] == pytest.approx(5 / 18, rel=1e-12)
    assert row["share poisson"] == pytest.approx(5 / 18, rel=1e-12)
    assert row["share daily"] == pytest.approx(8 / 18, rel=1e-12)
    assert row["share bursty"] == row["share weekly"] == 0.0
    kinds = ("front", "poisson", "daily")
    assert sum(row[f"share {k}"] * row[k] for k in kinds) == pytest.approx(row["all"], rel=1e-12)
    assert row["all"] == pytest.approx(22 / 18, rel=1e-12)
    assert "share front" not in table(base, [("after", after)]).columns  # only when asked
    fam_root = tmp_path / "fam"
    _report(fam_root / "base_jitter_s0", ["optimal", "oracle"], [[5, 5, 5, 5], [5, 5, 4, 4]])
    fam = family(str(fam_root), ["base"], with_shares=True).set_index("run")
    assert fam.loc["base", "share daily"] == round(8 / 18, 3)


def test_a_missing_run_is_one_line_and_exit_2(tmp_path, capsys):
    from lab.tools.family_table import main

    base = _report(tmp_path / "base", ["optimal", "oracle"], [[5, 5, 5, 5], [5, 5, 4, 4]])
    with pytest.raises(SystemExit) as exc:
        main(["--oracle", base, "--run", f"x={tmp_path / 'nowhere'}", "--shares"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("family_table: ") and "nowhere" in err and len(err.splitlines()) == 1
    assert main(["--oracle", base, "--run", f"x={base}", "--shares"]) == 0
    assert "share daily" in capsys.readouterr().out


def test_kind_from_takes_one_kinds_ratio_from_another_run(tmp_path, capsys):
    """Oracle fresh days 5, 5, 4, 4 (a Poisson page, a front page, two daily publishers):
    shares 5/18, 5/18, 8/18. ``informed`` scores 4, 5, 4, 4 (Poisson 0.8, front 1.0, daily
    1.0); ``optimal`` of the base run 5, 5, 6, 6 (daily 1.5). With the daily publishers from ``optimal``:
    5/18 + 5/18 × 0.8 + 8/18 × 1.5 = 21/18; from ``informed`` itself, its overall 17/18."""
    from lab.tools.family_table import composite, main

    base = _report(tmp_path / "base", ["optimal", "oracle"], [[5, 5, 6, 6], [5, 5, 4, 4]])
    informed = _report(tmp_path / "inf", ["informed"], [[4, 5, 4, 4]])
    assert composite(base, informed, "informed", "daily", base, "optimal") == pytest.approx(
        21 / 18, rel=1e-12)
    assert composite(base, informed, "informed", "daily", informed, "informed") == pytest.approx(
        17 / 18, rel=1e-12)
    t = table(base, [("informed", informed)], "informed", ndigits=None,
              kind_from=("daily", base, "optimal")).set_index("run")
    assert t.loc["informed", "all, daily from optimal"] == pytest.approx(21 / 18, rel=1e-12)
    assert t.loc["informed", "all"] == pytest.approx(17 / 18, rel=1e-12)
    with pytest.raises(KeyError):
        composite(base, informed, "informed", "nightly", base, "optimal")
    assert main(["--oracle", base, "--run", f"i={informed}", "--policy", "informed",
                 "--kind-from", f"daily={base}:optimal"]) == 0
    assert "all, daily from optimal" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["--oracle", base, "--run", f"i={informed}", "--kind-from", "daily"])
    assert exc.value.code == 2
    capsys.readouterr()
    for bad in ("nightly=" + base + ":optimal", "daily=" + base + ":nosuch"):  # one line, exit 2
        with pytest.raises(SystemExit) as exc:
            main(["--oracle", base, "--run", f"i={informed}", "--kind-from", bad])
        assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2
    with pytest.raises(SystemExit) as exc:  # a family table has no one run to take it from
        main(["--family", str(tmp_path), "--kind-from", f"daily={base}:optimal"])
    assert exc.value.code == 2


def test_family_cli_reads_another_oracle_label_and_refuses_an_empty_match(tmp_path, capsys):
    from lab.tools.family_table import main

    _report(tmp_path / "h21d14_jitter_s0", ["optimal", "oracle"], [[5, 5, 5, 6], [5, 5, 5, 5]])
    with pytest.raises(SystemExit) as exc:  # its oracle is not in base_jitter_s0
        main(["--family", str(tmp_path), "--label", "h21d14"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("family_table: no run under") and "--oracle-label" in err
    assert len(err.splitlines()) == 1
    assert main(["--family", str(tmp_path), "--label", "h21d14",
                 "--oracle-label", "h21d14"]) == 0
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:]]
    assert [r[:3] for r in rows] == [["h21d14", "jitter", "1"], ["oracle", "jitter", "1"]]
