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
