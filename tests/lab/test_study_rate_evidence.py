"""The what-if of lab.studies.study_rate_evidence: its Bayes allocation and its mixture fit,
against known answers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobs.core.allocation_reference import allocate
from jobs.core.freshness import freshness
from lab.studies.study_rate_evidence import (TAU2_MIN, bayes_allocate, fit_mixture,
                                          value_of_information)


def _pages(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal(np.log(0.5), 1.5, n)), np.exp(rng.normal(0.0, 1.0, n))


def test_one_point_per_url_is_the_plug_in_optimum():
    lam, w = _pages()
    budget = 0.3 * len(lam)
    ours = bayes_allocate(lam[:, None], np.ones((len(lam), 1)), w, budget)
    ref = allocate(lam, w, budget=budget, f_min=1 / 90, f_max=24).rates
    assert ours.sum() == pytest.approx(budget, rel=1e-6)
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-6)


def test_the_bayes_allocation_beats_any_plug_in_under_the_posterior():
    """Under the posterior it was solved for, the expected freshness of the Bayes
    allocation is at least that of the plug-in allocations of its mode and its mean."""
    rng = np.random.default_rng(1)
    lam, w = _pages(seed=1)
    points = lam[:, None] * np.exp(rng.normal(0.0, 0.8, (len(lam), 32)))
    mass = np.full(points.shape, 1 / 32)
    budget = 0.3 * len(lam)
    one = np.ones((len(lam), 1))

    def expected(f):
        return float(np.sum(w[:, None] * mass * freshness(points, f[:, None])))

    bayes = expected(bayes_allocate(points, mass, w, budget))
    for point in (np.median(points, axis=1), points.mean(axis=1)):
        assert bayes >= expected(bayes_allocate(point[:, None], one, w, budget)) - 1e-9
    assert bayes > expected(bayes_allocate(points.mean(axis=1)[:, None], one, w, budget))


def test_a_page_that_never_changes_is_left_at_the_floor():
    lam = np.array([0.0, 1.0, 2.0])
    f = bayes_allocate(lam[:, None], np.ones((3, 1)), np.ones(3), budget=2.0)
    assert f[0] == pytest.approx(1 / 90, rel=1e-6) and f.sum() == pytest.approx(2.0, rel=1e-6)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="N x K"):
        bayes_allocate(np.ones((3, 2)), np.ones((3, 1)), np.ones(3), 1.0)
    with pytest.raises(ValueError, match="budget"):
        bayes_allocate(np.ones((3, 1)), np.ones((3, 1)), np.ones(3), 100.0)


def test_the_mixture_recovers_two_separated_components():
    """URLs observed precisely (a narrow likelihood at their log λ) from 0.3 × N(log 0.1, 0.3²)
    + 0.7 × N(log 10, 0.3²): the fit finds both centres within 0.1 and the weights within
    0.06."""
    rng = np.random.default_rng(2)
    grid = np.linspace(np.log(1e-4), np.log(1e3), 96)
    slow = rng.random(300) < 0.3
    u = np.where(slow, rng.normal(np.log(0.1), 0.3, 300), rng.normal(np.log(10), 0.3, 300))
    lik = np.exp(-0.5 * (grid[None, :] - u[:, None]) ** 2 / 0.05 ** 2)
    lik /= lik.max(axis=1, keepdims=True)
    pi, mu, tau2 = fit_mixture(lik, grid, mu0=float(u.mean()), tau20=float(u.var()))
    order = np.argsort(mu)
    assert mu[order] == pytest.approx([np.log(0.1), np.log(10)], abs=0.1)
    assert pi[order] == pytest.approx([0.3, 0.7], abs=0.06)
    assert (tau2 >= TAU2_MIN).all()


def _posteriors(rng, n, grid, centres, sds):
    post = np.exp(-0.5 * (grid[None, :] - centres[:, None]) ** 2 / sds[:, None] ** 2)
    return post / post.sum(axis=1, keepdims=True)


def test_a_probe_is_worth_nothing_when_lambda_is_known_and_at_most_perfect_information():
    """0 for a point-mass posterior; otherwise between 0 and the expected value of perfect
    information E_λ[max_f V(f | λ)] − max_f E[V(f)], computed here point by point."""
    grid = np.linspace(np.log(1e-3), np.log(1e3), 121)
    rng = np.random.default_rng(3)
    n = 40
    centres = rng.uniform(np.log(0.05), np.log(50), n)
    w = np.exp(rng.normal(1.0, 1.0, n))
    level = 2.0
    point = np.zeros((n, len(grid)))
    point[np.arange(n), np.argmin(np.abs(grid[None, :] - centres[:, None]), axis=1)] = 1.0
    gain, _ = value_of_information(point, grid, w, level, np.zeros(n, bool))
    assert np.allclose(gain, 0.0, atol=1e-9)

    post = _posteriors(rng, n, grid, centres, np.full(n, 0.8))
    gain, bundle = value_of_information(post, grid, w, level, rng.random(n) < 0.5)
    fk = np.exp(np.linspace(np.log(1 / 90), np.log(24.0), 64))
    value = w[:, None, None] * freshness(np.exp(grid)[None, :, None], fk[None, None, :]) \
        - level * fk[None, None, :]  # page x grid x rate
    evpi = (post * value.max(axis=2)).sum(axis=1) - (post[:, :, None] * value).sum(axis=1).max(axis=1)
    assert (gain >= 0).all() and (gain <= evpi + 1e-9).all()
    assert (gain > 0).any() and set(np.unique(bundle)) <= {1, 2, 4, 8, 16}


def test_last_modified_dates_never_make_a_probe_worth_less():
    """A trusted page's outcomes refine an untrusted one's (a change and its age, not just a
    change), so its probe is worth at least as much (Blackwell)."""
    grid = np.linspace(np.log(1e-3), np.log(1e3), 121)
    rng = np.random.default_rng(4)
    n = 30
    centres = rng.uniform(np.log(0.1), np.log(30), n)
    post = _posteriors(rng, n, grid, centres, rng.uniform(0.3, 1.5, n))
    w = np.exp(rng.normal(1.5, 0.7, n))
    plain, _ = value_of_information(post, grid, w, 3.0, np.zeros(n, bool))
    dated, _ = value_of_information(post, grid, w, 3.0, np.ones(n, bool))
    assert (dated >= plain - 1e-12).all() and (dated > plain + 1e-6).any()


def test_a_page_at_the_cliff_is_worth_probing_more_than_one_far_from_it():
    """Same weight and posterior width; λ̂ at the cliff (w/λ̂ = μ: the optimum switches
    between f_min and visits within the posterior) against λ̂ where w/λ̂ = 20 μ (visited
    whatever λ is within it)."""
    grid = np.linspace(np.log(1e-3), np.log(1e3), 161)
    w, level = np.array([50.0, 50.0]), 5.0
    centres = np.log(np.array([w[0] / level, w[1] / (20 * level)]))
    post = _posteriors(None, 2, grid, centres, np.array([0.5, 0.5]))
    gain, _ = value_of_information(post, grid, w, level, np.zeros(2, bool))
    assert gain[0] > 3 * gain[1]


def test_a_missing_run_or_day_is_one_line_and_exit_2(tmp_path, capsys):
    from jobs.cli import guarded
    from lab.studies.study_rate_evidence import main

    args = ["--workdir", str(tmp_path), "--seed", "0", "--dates", "2026-01-28"]
    assert guarded(main, args, prog="study_rate_evidence") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MissingPartitionError" in err[0] and "_truth/pages" in err[0]
    (tmp_path / "seed0" / "optimal" / "data" / "_truth" / "pages").mkdir(parents=True)
    pd.DataFrame({"url": ["u"], "kind": ["poisson"]}).to_parquet(
        tmp_path / "seed0" / "optimal" / "data" / "_truth" / "pages" / "p.parquet")
    assert guarded(main, args, prog="study_rate_evidence") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[state]" in err[0] and "dt=2026-01-28" in err[0]
