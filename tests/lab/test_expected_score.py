"""The expected-freshness score of Poisson pages (lab.tools.expected_score)."""
import numpy as np
import pytest

from lab.tools.expected_score import DAY_S, expected_fresh_days


def test_known_answers():
    # fetched a day before the window and half-way through it, λ = 1 a day
    got = expected_fresh_days([0.5 * DAY_S, -DAY_S], 1.0, 0.0, DAY_S)
    want = (np.exp(-1.0) - np.exp(-1.5)) + (1.0 - np.exp(-0.5))
    assert got == pytest.approx(want, rel=1e-12)
    assert expected_fresh_days([-DAY_S, 0.25 * DAY_S], 0.0, 0.0, DAY_S) == pytest.approx(1.0)
    # fetches after the window do not count; none before it: unknown
    assert expected_fresh_days([-DAY_S, 3 * DAY_S], 2.0, 0.0, DAY_S) == pytest.approx(
        (np.exp(-2.0) - np.exp(-4.0)) / 2.0, rel=1e-12)
    assert np.isnan(expected_fresh_days([0.5 * DAY_S], 1.0, 0.0, DAY_S))


def test_it_is_the_mean_of_the_realised_fresh_time_over_poisson_changes():
    rng = np.random.default_rng(7)
    lam, start, end = 3.0, 0.0, 4 * DAY_S
    fetches = np.array([-0.3, 0.2, 0.9, 1.0, 2.5, 3.1]) * DAY_S
    want = expected_fresh_days(fetches, lam, start, end)
    n, t = 20000, np.linspace(start, end, 4001)[:-1] + 0.5 * (end - start) / 4000
    last = fetches[np.searchsorted(fetches, t, side="right") - 1]  # the copy's fetch at t
    fresh = np.zeros(len(t))
    for _ in range(n):
        changes = np.cumsum(rng.exponential(DAY_S / lam, 40)) - 0.5 * DAY_S
        first_after = changes[np.searchsorted(changes, last)]
        fresh += first_after > t
    realised = fresh.mean() / n * (end - start) / DAY_S
    # 20000 independent Poisson paths: the mean's sd is below 0.01 day here
    assert realised == pytest.approx(want, abs=0.02)


def test_a_missing_run_is_one_line_and_exit_2(tmp_path, capsys):
    from lab.tools.expected_score import main

    for argv in (["--oracle", str(tmp_path), "--run", f"x={tmp_path}"],
                 ["--oracle", str(tmp_path), "--run", str(tmp_path)]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        # one line naming the cause (argparse's usage line before a usage error)
        assert err[-1].startswith(("expected_score: ", "python -m lab.tools.expected_score: "
                                   "error: --run takes LABEL=DIR")), err
        assert "Traceback" not in "\n".join(err)


def test_the_days_of_a_window_add_up_to_the_window():
    fetches = np.array([-0.3, 0.2, 0.9, 1.0, 2.5, 3.1]) * DAY_S
    for lam in (0.0, 0.4, 3.0, 40.0):
        whole = expected_fresh_days(fetches, lam, 0.0, 4 * DAY_S)
        days = [expected_fresh_days(fetches, lam, d * DAY_S, (d + 1) * DAY_S) for d in range(4)]
        assert sum(days) == pytest.approx(whole, rel=1e-12)
        assert all(0.0 <= x <= 1.0 + 1e-12 for x in days)


def test_day_ratios_weigh_each_kinds_pages_by_importance():
    import pandas as pd

    from lab.tools.expected_score import day_ratios

    base = {"url": ["a", "b", "c", "d"], "importance": [1.0, 3.0, 2.0, 5.0],
            "kind": [0, 0, 0, 0], "front": [False, False, True, False]}
    mine = pd.DataFrame({**base, "day1": [0.5, 0.2, 0.9, np.nan], "day2": [0.4, 0.1, 0.8, 0.3]})
    oracle = pd.DataFrame({**base, "day1": [0.25, 0.4, 0.6, 0.7], "day2": [0.2, 0.2, 0.4, 0.9]})
    got = day_ratios(mine, oracle)
    # page d has no expectation in this run (NaN): it counts in neither run, on any day
    assert list(got.columns) == [1, 2]
    assert got.loc["poisson", 1] == pytest.approx((0.5 + 3 * 0.2) / (0.25 + 3 * 0.4), rel=1e-12)
    assert got.loc["front", 2] == pytest.approx(0.8 / 0.4, rel=1e-12)
    assert got.loc["poisson and front", 2] == pytest.approx(
        (0.4 + 0.3 + 1.6) / (0.2 + 0.6 + 0.8), rel=1e-12)
