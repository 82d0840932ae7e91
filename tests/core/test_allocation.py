"""Tests of the budgeted allocation core (jobs.core.allocation*)."""
import contextlib
import ctypes
import glob
import os

import numpy as np
import pytest
import scipy
from scipy.optimize import minimize

from jobs.core.allocation_reference import (
    allocate, host_demand_curve, marginal_value, multiplier_bounds, multiplier_grid,
    objective_value, optimal_rates, refine_grid, solve_host, solve_multiplier)
from jobs.core.allocation_hosts import caps_for, encode_hosts, floor_demand
from jobs.core.freshness import age, freshness

F_MIN, F_MAX = 1.0 / 90.0, 24.0


def random_instance(seed, n=200, n_hosts=8, cap_fraction=0.6):
    """Log-normal change rates/weights, hosts, half the hosts capped below their fair share."""
    rng = np.random.default_rng(seed)
    lam = np.exp(rng.normal(np.log(0.3), 1.5, n))
    weight = rng.lognormal(0.0, 1.0, n)
    host = rng.integers(0, n_hosts, n)
    budget = n * rng.uniform(0.05, 3.0)
    caps = {h: cap_fraction * budget / n_hosts for h in range(0, n_hosts, 2)}
    return lam, weight, host, caps, budget


def uniform_under_caps(host, caps, budget):
    """Equal rates, a capped host's pages sharing its cap equally, total = budget (waterfill)."""
    labels, codes, counts = encode_hosts(host)
    cap = caps_for(labels, caps)
    lo, hi = 0.0, budget
    for _ in range(200):
        rate = 0.5 * (lo + hi)
        used = np.minimum(cap, counts * rate).sum()
        lo, hi = (rate, hi) if used < budget else (lo, rate)
    per_host = np.minimum(cap / counts, lo)
    return per_host[codes]


# ---- known answers (seed 002, Cho & Garcia-Molina 2000) -------------------------

def test_two_pages_budget_10():
    res = allocate([9.0, 1.0], [1.0, 1.0], budget=10.0)
    np.testing.assert_allclose(res.rates, [6.89, 3.11], atol=5e-3)
    assert res.objective / 2 == pytest.approx(0.707, abs=5e-3)
    assert freshness([9, 1], [5, 5]).mean() == pytest.approx(0.685, abs=5e-3)
    assert freshness([9, 1], [9, 1]).mean() == pytest.approx(0.632, abs=5e-3)
    assert res.mu == pytest.approx(0.0417, abs=5e-4)  # equal marginal values
    assert res.converged and res.feasible


def test_two_pages_budget_1_goes_to_slow_page():
    res = allocate([9.0, 1.0], [1.0, 1.0], budget=1.0)
    np.testing.assert_allclose(res.rates, [0.0, 1.0], atol=5e-3)
    assert res.objective / 2 == pytest.approx(0.316, abs=5e-3)


def test_five_pages():
    lam = np.arange(1.0, 6.0)
    res = allocate(lam, np.ones(5), budget=5.0)
    np.testing.assert_allclose(res.rates, [1.15, 1.36, 1.35, 1.14, 0.00], atol=5e-3)
    assert res.objective / 5 == pytest.approx(0.374, abs=5e-3)
    assert res.budget_used == pytest.approx(5.0, rel=1e-9)


def test_five_pages_age_objective_favours_fast_pages():
    lam = np.arange(1.0, 6.0)
    res = allocate(lam, np.ones(5), budget=5.0, objective="age")
    # Seed: 0.84 (slowest) .. 1.09 (fastest). Our optimum, confirmed by SLSQP
    # below, gives 0.8349 for the slowest page (the seed's 0.84 is 0.005 high).
    assert res.rates[-1] == pytest.approx(1.09, abs=5e-3)
    assert res.rates[0] == pytest.approx(0.84, abs=6e-3)
    assert np.all(np.diff(res.rates) > 0)
    slsqp = minimize(lambda f: age(lam, f).sum(), np.ones(5), method="SLSQP",
                     bounds=[(1e-6, None)] * 5, options={"ftol": 1e-14, "maxiter": 500},
                     constraints=[{"type": "eq", "fun": lambda f: f.sum() - 5.0}])
    np.testing.assert_allclose(res.rates, slsqp.x, atol=1e-4)
    fresh = allocate(lam, np.ones(5), budget=5.0)
    assert res.rates[-1] > fresh.rates[-1] + 1.0  # age revisits the page freshness abandons


# ---- per-page KKT ----------------------------------------------------------------

@pytest.mark.parametrize("objective", ["freshness", "age"])
def test_optimal_rates_solve_stationarity(objective):
    rng = np.random.default_rng(1)
    lam = 10 ** rng.uniform(-3, 3, 2000)
    weight = 10 ** rng.uniform(-2, 2, 2000)
    mu = 10 ** rng.uniform(-4, 1, 2000)
    rates = optimal_rates(lam, weight, mu, objective=objective)
    interior = rates > 0
    assert interior.sum() > 500
    np.testing.assert_allclose(marginal_value(lam, weight, rates, objective)[interior],
                               mu[interior], rtol=1e-8)
    if objective == "freshness":  # not worth a visit <=> mu >= w / lambda
        np.testing.assert_array_equal(~interior, mu >= weight / lam)


def test_optimal_rates_edge_cases():
    lam = np.array([0.0, 2.0, 1e300, 1e-300, 3.0])
    weight = np.array([1.0, 0.0, 1.0, 1.0, 1.0])
    fresh = optimal_rates(lam, weight, 0.1, 0.01, 24.0)
    np.testing.assert_array_equal(fresh[:3], [0.01, 0.01, 0.01])  # never changes / no weight / hopeless
    assert fresh[3] == 0.01 and 0.01 < fresh[4] < 24.0  # tiny lambda: one visit lasts forever, floor
    aged = optimal_rates(lam, weight, 0.1, 0.0, np.inf, objective="age")
    assert aged[2] == pytest.approx(1.0 / np.sqrt(0.2), rel=1e-12)  # f -> sqrt(w / 2 mu)
    np.testing.assert_array_equal(optimal_rates([1.0, 0.0], 1.0, 0.0, 0.0, 24.0), [24.0, 0.0])
    assert np.all(optimal_rates([1.0], 1.0, np.inf, 0.5, 24.0) == 0.5)


@pytest.mark.parametrize("objective", ["freshness", "age"])
@pytest.mark.parametrize("f_min,f_max", [(F_MIN, F_MAX), (0.0, F_MAX), (F_MIN, np.inf)])
def test_box_prices_skip_only_pages_on_their_bounds(objective, f_min, f_max):
    """Given box_prices, a page outside (lo, hi) gets its box bound without a root: the
    same rates as the plain path, to round-off, on a grid of levels and at the edges."""
    from jobs.core.allocation_prices import box_prices
    rng = np.random.default_rng(11)
    lam = np.r_[np.exp(rng.normal(np.log(0.3), 2.5, 3000)), 0.0, 2.0, 1e300, 1e-300, 3.0]
    weight = np.r_[rng.lognormal(0.0, 1.5, 3000), 1.0, 0.0, 1.0, 1.0, 1.0]
    levels = np.r_[0.0, np.geomspace(1e-10, 1e6, 97), np.inf][:, None]
    bounds = box_prices(lam, weight, f_min, f_max, objective)
    plain = optimal_rates(lam, weight, levels, f_min, f_max, objective)
    fast = optimal_rates(lam, weight, levels, f_min, f_max, objective, bounds=bounds)
    np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=0)
    inner = (levels > bounds[0]) & (levels < bounds[1])
    assert 0.05 < inner.mean() < 0.9  # both paths are exercised


def test_input_validation():
    with pytest.raises(ValueError, match="lam"):
        allocate([-1.0], [1.0], budget=1.0)
    with pytest.raises(ValueError, match="objective"):
        allocate([1.0], [1.0], budget=1.0, objective="speed")
    with pytest.raises(ValueError, match="f_max"):
        allocate([1.0], [1.0], budget=1.0, f_min=2.0, f_max=1.0)
    with pytest.raises(ValueError, match="budget"):
        allocate([1.0], [1.0], budget=-1.0)
    with pytest.raises(ValueError, match="host"):
        allocate([1.0, 2.0], [1.0, 1.0], host=[0], budget=1.0)
    with pytest.raises(ValueError, match="mu"):
        optimal_rates([1.0], [1.0], -0.5)


# ---- host caps, infeasibility ----------------------------------------------------

def test_solve_host_cap_binding_and_not():
    lam, weight = np.array([0.5, 1.0, 4.0]), np.ones(3)
    free, free_mu = solve_host(lam, weight, np.inf, 0.05, F_MIN, F_MAX)
    capped, capped_mu = solve_host(lam, weight, 1.0, 0.05, F_MIN, F_MAX)
    assert free_mu == 0.05 and free.sum() > 1.0
    assert capped.sum() == pytest.approx(1.0, rel=1e-9) and capped.sum() <= 1.0
    assert capped_mu > 0.05
    interior = capped > F_MIN  # the fast page sits on its floor: its marginal value is below
    np.testing.assert_allclose(marginal_value(lam, weight, capped)[interior], capped_mu, rtol=1e-8)
    assert marginal_value(lam, weight, capped)[~interior] < capped_mu


def test_host_cap_beats_floor():
    rates, host_mu = solve_host(np.ones(10), np.ones(10), 0.05, 0.01, F_MIN, F_MAX)
    assert np.isinf(host_mu)
    np.testing.assert_allclose(rates, 0.005)  # n * f_min = 0.11 > cap: equal share of the cap


def test_unaffordable_floors_drop_to_zero():
    lam = np.geomspace(0.01, 10, 100)
    res = allocate(lam, np.ones(100), budget=0.5, f_min=F_MIN, f_max=F_MAX)
    assert not res.feasible and res.f_min_used == 0.0
    assert res.budget_used <= 0.5 and res.budget_used == pytest.approx(0.5, rel=1e-9)
    assert "f_min=0" in res.message and (res.rates == 0).any()


def test_budget_not_binding():
    res = allocate([1.0, 2.0], [1.0, 1.0], budget=100.0, f_min=F_MIN, f_max=2.0)
    assert res.mu == 0.0 and res.budget_used == pytest.approx(4.0)
    np.testing.assert_array_equal(res.rates, [2.0, 2.0])


# ---- properties on random instances ---------------------------------------------

@pytest.mark.parametrize("objective", ["freshness", "age"])
def test_random_instances_respect_constraints_and_beat_uniform(objective):
    for seed in range(6):
        lam, weight, host, caps, budget = random_instance(seed, n=150)
        res = allocate(lam, weight, host, caps, budget, F_MIN, F_MAX, objective)
        assert res.converged and res.feasible
        assert res.budget_used <= budget
        if np.any(res.rates < F_MAX):
            assert res.budget_used == pytest.approx(budget, rel=1e-9)
        per_host = np.bincount(host, weights=res.rates)
        for h, cap in caps.items():
            assert per_host[h] <= cap * (1 + 1e-12)
        assert np.all(res.rates >= F_MIN) and np.all(res.rates <= F_MAX)
        uniform = objective_value(lam, weight, uniform_under_caps(host, caps, budget), objective)
        better = res.objective >= uniform if objective == "freshness" else res.objective <= uniform
        assert better


@contextlib.contextmanager
def single_threaded_scipy_blas():
    """SLSQP's LAPACK calls thrash on a loaded 2-core box with threaded OpenBLAS (0.6 s -> 10 s)."""
    libs = glob.glob(os.path.join(os.path.dirname(scipy.__file__) + ".libs", "libscipy_openblas*.so"))
    try:
        lib = ctypes.CDLL(libs[0]) if libs else None
        getter, setter = lib.scipy_openblas_get_num_threads, lib.scipy_openblas_set_num_threads
    except (OSError, AttributeError):
        yield
        return
    before = getter()
    setter(1)
    try:
        yield
    finally:
        setter(before)


def _scipy_solution(lam, weight, host, caps, budget, objective):
    sign = -1.0 if objective == "freshness" else 1.0
    per_page = freshness if objective == "freshness" else age

    def fun(f):
        return sign * np.sum(weight * per_page(lam, f))

    def jac(f):  # both objectives: d(fun)/df = -(marginal value of a visit)
        return -marginal_value(lam, weight, f, objective)

    constraints = [{"type": "ineq", "fun": lambda f: budget - f.sum(), "jac": lambda f: -np.ones_like(f)}]
    for h, cap in caps.items():
        mask = (host == h).astype(float)
        constraints.append({"type": "ineq", "fun": lambda f, m=mask, c=cap: c - m @ f,
                            "jac": lambda f, m=mask: -m})
    start = uniform_under_caps(host, caps, budget) * 0.999
    with single_threaded_scipy_blas():
        out = minimize(fun, np.clip(start, F_MIN, F_MAX), jac=jac, method="SLSQP",
                       bounds=[(F_MIN, F_MAX)] * lam.size, constraints=constraints,
                       options={"ftol": 1e-14, "maxiter": 1000})
    tol = 1e-9 * budget
    feasible = out.x.sum() <= budget + tol and all(
        (host == h) @ out.x <= cap + tol for h, cap in caps.items())
    return sign * out.fun, feasible


@pytest.mark.parametrize("objective,seed,n", [("freshness", 10, 200), ("freshness", 11, 60),
                                              ("age", 12, 200), ("age", 13, 60)])
def test_matches_scipy_slsqp(objective, seed, n):
    lam, weight, host, caps, budget = random_instance(seed, n=n)
    res = allocate(lam, weight, host, caps, budget, F_MIN, F_MAX, objective)
    assert any(np.bincount(host, weights=res.rates)[h] > 0.999 * c for h, c in caps.items())
    reference, scipy_feasible = _scipy_solution(lam, weight, host, caps, budget, objective)
    assert abs(res.objective - reference) <= 1e-4 * abs(reference)
    if scipy_feasible:  # then scipy cannot beat the exact KKT point
        better = res.objective - reference if objective == "freshness" else reference - res.objective
        assert better >= -1e-8 * abs(reference)


# ---- grid / demand-curve path ----------------------------------------------------

def grid_path(lam, weight, host, caps, budget, objective, refine=True, n_grid=256):
    """What the Spark job does: per-host curves, driver solve, optional refinement, final pass."""
    labels, codes, counts = encode_hosts(host)
    cap = caps_for(labels, caps)
    n = lam.size
    lo, hi = multiplier_bounds(lam, weight, max(F_MIN, budget / n), min(F_MAX, budget), objective)
    grid = multiplier_grid(lo, hi, n_grid)

    def total(levels):
        return sum(host_demand_curve(lam[codes == h], weight[codes == h], cap[h], levels,
                                     F_MIN, F_MAX, objective) for h in range(labels.size))

    sol = solve_multiplier(grid, total(grid), budget, floor_demand=floor_demand(counts, cap, F_MIN))
    if refine:
        fine = refine_grid(sol, n_grid)
        sol = solve_multiplier(fine, total(fine), budget)
    rates = np.zeros(n)
    for h in range(labels.size):
        rates[codes == h] = solve_host(lam[codes == h], weight[codes == h], cap[h], sol,
                                       F_MIN, F_MAX, objective)[0]
    return rates, sol


@pytest.mark.parametrize("objective,seed", [("freshness", 20), ("freshness", 21), ("age", 22)])
def test_grid_path_matches_allocate(objective, seed):
    lam, weight, host, caps, budget = random_instance(seed, n=120)
    exact = allocate(lam, weight, host, caps, budget, F_MIN, F_MAX, objective)
    rates, sol = grid_path(lam, weight, host, caps, budget, objective)
    assert rates.sum() <= budget and sol.slack >= 0
    assert rates.sum() == pytest.approx(sol.demand, rel=1e-9)  # curve predicts the final pass
    got = objective_value(lam, weight, rates, objective)
    assert abs(got - exact.objective) <= 1e-4 * abs(exact.objective)
    two_pass, _ = grid_path(lam, weight, host, caps, budget, objective, refine=False)
    got = objective_value(lam, weight, two_pass, objective)
    assert abs(got - exact.objective) <= 1e-4 * abs(exact.objective) and two_pass.sum() <= budget
    coarse, _ = grid_path(lam, weight, host, caps, budget, objective, refine=False, n_grid=64)
    assert coarse.sum() <= budget


def test_demand_curve_is_monotone_and_matches_host_solve():
    lam, weight, _, _, _ = random_instance(3, n=40)
    grid = multiplier_grid(1e-4, 10.0, 32)
    curve = host_demand_curve(lam, weight, 3.0, grid, F_MIN, F_MAX)
    assert np.all(np.diff(curve) <= 1e-12) and curve.max() <= 3.0
    for k in (0, 10, 31):
        assert solve_host(lam, weight, 3.0, grid[k], F_MIN, F_MAX)[0].sum() == pytest.approx(curve[k], rel=1e-9)


def test_solve_multiplier_diagnostics():
    grid = np.array([0.1, 1.0, 10.0])
    sol = solve_multiplier(grid, np.array([30.0, 20.0, 5.0]), budget=12.0)
    assert sol.mu == 10.0 and sol.mu_lower == 1.0 and sol.bracket == (1.0, 10.0)
    assert sol.lower_share == pytest.approx(7.0 / 15.0, rel=1e-8)  # 12 = 5 + theta * (20 - 5)
    assert 0.0 <= sol.slack <= 1e-8 and sol.demand <= 12.0
    assert 1.0 < sol.mu_interp < 10.0 and sol.covered and sol.feasible
    assert not solve_multiplier(grid, np.array([30.0, 20.0, 5.0]), 4.0, floor_demand=5.0).feasible
    assert not solve_multiplier(grid, np.array([30.0, 20.0, 5.0]), 4.0).covered
    with pytest.raises(ValueError, match="non-increasing"):
        solve_multiplier(grid, np.array([1.0, 2.0, 0.5]), 1.0)


@pytest.mark.parametrize("objective", ["freshness", "age"])
def test_stationary_ratio_solves_its_equation_to_round_off(objective):
    """The table-seeded Newton root satisfies h(r) = -log(1-c) (freshness) or q(r) = Y (age)
    to 1e-12 relative across the whole range of targets, tiny ones below the table included."""
    from jobs.core.allocation_kkt import _h, _q, stationary_ratio
    rng = np.random.default_rng(7)
    if objective == "freshness":
        target = np.concatenate([np.exp(rng.uniform(-60, 0, 20000)),
                                 -np.expm1(-np.exp(rng.uniform(-3, np.log(36), 5000)))])
        target = target[(target > 0) & (target < 1)]
        y, phi = -np.log1p(-target), _h
    else:
        target = np.exp(rng.uniform(-60, np.log(1e3), 20000))
        y, phi = target, _q
    r, iterations, converged = stationary_ratio(target, objective)
    assert converged and iterations == 1
    np.testing.assert_allclose(phi(r), y, rtol=1e-12)
    assert np.all(np.diff(r[np.argsort(target)]) >= 0)  # monotone in the target


def test_stale_visit_value_is_the_expected_fresh_time_until_the_next_change_or_visit():
    from jobs.core.allocation_kkt import stale_visit_value
    lam = np.array([2.0, 40.0, 0.05, 0.0, 3.0, 1e-12])
    w = np.array([3.0, 1.0, 1.0, 2.0, 0.0, 1.0])
    horizon = np.array([0.5, np.inf, 10.0, 4.0, 1.0, 2.0])
    v = stale_visit_value(lam, w, horizon)
    want = [3.0 * (1 - np.exp(-1.0)) / 2.0, 1.0 / 40.0, (1 - np.exp(-0.5)) / 0.05,
            2.0 * 4.0, 0.0, 2.0 - 2e-12]  # λ → 0: T - λT²/2; λ = 0: T; w = 0: nothing
    np.testing.assert_allclose(v, want, rtol=1e-12)
    # A Monte Carlo check of E[w min(Exp(λ), T)] at λ = 2, T = 0.5.
    x = np.random.default_rng(0).exponential(1 / 2.0, 400_000)
    np.testing.assert_allclose(v[0], 3.0 * np.minimum(x, 0.5).mean(), rtol=5e-3)
    # Never above w/λ, the marginal value at f = 0 (a page priced at its floor, w/λ < μ,
    # is not worth a visit even known stale).
    assert np.all(v[:3] <= w[:3] / lam[:3] + 1e-15)
    np.testing.assert_allclose(v[1], marginal_value(40.0, 1.0, 0.0), rtol=1e-12)
    with pytest.raises(ValueError, match="horizon_days"):
        stale_visit_value([1.0], [1.0], [0.0])
    with pytest.raises(ValueError, match="lam"):
        stale_visit_value([-1.0], [1.0], [1.0])
