"""Tests of the pluggable rate policies (jobs.core.policies)."""
import numpy as np
import pandas as pd
import pytest

from jobs.core.allocation_reference import allocate, multiplier_grid, objective_value, refine_grid
from jobs.core.freshness import freshness
from jobs.core.policies import SECONDS_PER_DAY, get_policy, policy_rates

F_MIN, F_MAX = 1.0 / 90.0, 24.0


def pages_frame(seed, n=120, n_hosts=6):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "host": rng.integers(0, n_hosts, n).astype(str),
        "lambda_hat": np.exp(rng.normal(np.log(0.3), 1.5, n)),
        "importance": rng.lognormal(0.0, 1.0, n),
        "interval_s": rng.uniform(3600.0, 30 * SECONDS_PER_DAY, n),
    })


def grid_path_rates(policy, pages, caps, budget, n_grid=256):
    """Per-host path: curves on a shared grid, driver solve, refinement, final per-host pass."""
    groups = list(pages.groupby("host"))
    cap = {h: caps.get(h, np.inf) for h, _ in groups}
    f_low, f_high = max(policy.f_min, budget / len(pages)), min(policy.f_max, budget)
    bounds = [policy.level_bounds(g, f_low, f_high) for _, g in groups]
    grid = multiplier_grid(min(b[0] for b in bounds), max(b[1] for b in bounds), n_grid)
    floor = sum(policy.host_floor(g, cap[h]) for h, g in groups)
    sol = policy.solve_level(grid, sum(policy.host_demand(g, cap[h], grid) for h, g in groups),
                             budget, floor_demand=floor)
    fine = refine_grid(sol, n_grid)
    sol = policy.solve_level(fine, sum(policy.host_demand(g, cap[h], fine) for h, g in groups), budget)
    rates = pd.Series(0.0, index=pages.index)
    for h, g in groups:
        rates[g.index] = policy.host_rates(g, cap[h], sol)
    return rates


def test_registry_and_validation():
    assert get_policy("optimal", objective="age").objective == "age"
    assert not get_policy("adaptive").budget_aware and get_policy("uniform").budget_aware
    with pytest.raises(ValueError, match="unknown policy"):
        get_policy("random")
    with pytest.raises(ValueError, match="objective"):
        get_policy("optimal", objective="speed")
    with pytest.raises(ValueError, match="f_max"):
        get_policy("uniform", f_min=2.0, f_max=1.0)
    with pytest.raises(ValueError, match="lambda_hat"):
        policy_rates(get_policy("proportional"), pd.DataFrame({"host": ["a"]}), "host", 1.0, 1.0)
    with pytest.raises(ValueError, match="host column"):
        policy_rates(get_policy("uniform"), pages_frame(0), "site", 1.0, 1.0)


def test_uniform_shares_budget_and_caps_equally():
    pages = pages_frame(1)
    caps = {"0": 1.0}
    out = policy_rates(get_policy("uniform", f_min=F_MIN, f_max=F_MAX), pages, "host", caps, 60.0)
    on_capped = pages["host"] == "0"
    np.testing.assert_allclose(out.rates[on_capped], 1.0 / on_capped.sum(), rtol=1e-9)
    free = out.rates[~on_capped]
    np.testing.assert_allclose(free, free.iloc[0], rtol=1e-9)
    assert out.budget_used == pytest.approx(60.0, rel=1e-9) and out.budget_used <= 60.0
    assert out.level == pytest.approx(1.0 / free.iloc[0], rel=1e-9)  # level = interval (days)


def test_proportional_is_proportional_and_seed_numbers():
    pages = pd.DataFrame({"host": ["a", "b"], "lambda_hat": [9.0, 1.0], "importance": [1.0, 1.0],
                          "interval_s": [3600.0, 3600.0]})
    prop = policy_rates(get_policy("proportional", f_min=0.0, f_max=np.inf), pages, "host", None, 10.0)
    np.testing.assert_allclose(prop.rates, [9.0, 1.0], rtol=1e-9)
    assert freshness(pages.lambda_hat, prop.rates).mean() == pytest.approx(0.632, abs=5e-3)
    uni = policy_rates(get_policy("uniform", f_min=0.0, f_max=np.inf), pages, "host", None, 10.0)
    assert freshness(pages.lambda_hat, uni.rates).mean() == pytest.approx(0.685, abs=5e-3)
    opt = policy_rates(get_policy("optimal", f_min=0.0, f_max=np.inf), pages, "host", None, 10.0)
    assert freshness(pages.lambda_hat, opt.rates).mean() == pytest.approx(0.707, abs=5e-3)


def test_optimal_policy_equals_allocate():
    pages = pages_frame(2)
    caps = {"1": 2.0, "3": 1.5}
    for objective in ("freshness", "age"):
        out = policy_rates(get_policy("optimal", objective=objective), pages, "host", caps, 40.0)
        ref = allocate(pages.lambda_hat, pages.importance, pages.host, caps, 40.0, F_MIN, F_MAX, objective)
        np.testing.assert_allclose(out.rates.to_numpy(), ref.rates, rtol=1e-9)


def test_adaptive_follows_intervals_and_caps_but_not_budget():
    pages = pd.DataFrame({"host": ["a", "a", "b"], "lambda_hat": [1.0, 1.0, 1.0],
                          "importance": [1.0, 1.0, 1.0], "interval_s": [3600.0, 7200.0, 43200.0]})
    out = policy_rates(get_policy("adaptive"), pages, "host", {"a": 6.0}, budget=1.0)
    np.testing.assert_allclose(out.rates, [4.0, 2.0, 2.0], rtol=1e-9)  # a: 24+12 squeezed x1/6
    assert out.budget_used > 1.0 and out.level == 1.0
    with pytest.raises(ValueError, match="not budget-aware"):
        get_policy("adaptive").solve_level(np.array([1.0, 2.0]), np.array([1.0, 0.5]), 1.0)


@pytest.mark.parametrize("name,params", [("uniform", {}), ("proportional", {}),
                                         ("optimal", {}), ("optimal", {"objective": "age"})])
def test_grid_path_equals_in_memory(name, params):
    pages = pages_frame(3, n=90)
    caps = {"0": 0.8, "2": 1.2}
    policy = get_policy(name, **params)
    budget = 25.0
    exact = policy_rates(policy, pages, "host", caps, budget)
    rates = grid_path_rates(policy, pages, caps, budget)
    assert rates.sum() <= budget
    assert rates.sum() == pytest.approx(budget, rel=1e-4)
    if name == "optimal":  # near-indifferent pages may split visits differently: compare value
        objective = params.get("objective", "freshness")
        got = objective_value(pages.lambda_hat, pages.importance, rates, objective)
        want = objective_value(pages.lambda_hat, pages.importance, exact.rates, objective)
        assert got == pytest.approx(want, rel=1e-6)
        np.testing.assert_allclose(rates, exact.rates, atol=1e-3)
    else:
        np.testing.assert_allclose(rates, exact.rates, rtol=1e-6, atol=1e-9)
    per_host = rates.groupby(pages["host"]).sum()
    assert per_host["0"] <= 0.8 * (1 + 1e-12) and per_host["2"] <= 1.2 * (1 + 1e-12)


def test_unaffordable_floors_drop_floor():
    pages = pages_frame(4, n=200)
    out = policy_rates(get_policy("uniform"), pages, "host", None, budget=1.0)  # floors need 2.2
    assert not out.feasible and out.budget_used <= 1.0
    np.testing.assert_allclose(out.rates, 1.0 / 200, rtol=1e-9)


def test_rate_floor_column_is_a_lower_bound_inside_the_cap():
    pages = pd.DataFrame({"lambda_hat": [30.0, 0.5, 0.2], "importance": [1.0, 1.0, 1.0],
                          "interval_s": 86400.0, "rate_floor": [2.0, 0.0, 0.0]})
    pol = get_policy("optimal", f_min=1 / 90, f_max=24)
    grid = multiplier_grid(1e-3, 10.0, 64)
    plain = pol.host_rates(pages.drop(columns="rate_floor"), 100.0, 0.5)
    floored = pol.host_rates(pages, 100.0, 0.5)
    assert plain[0] < 2.0 and floored[0] == pytest.approx(2.0)  # the optimum starves it
    assert np.allclose(floored[1:], plain[1:])
    demand = pol.host_demand(pages, 3.0, grid)
    assert np.all(np.diff(demand) <= 1e-12) and demand.max() <= 3.0 + 1e-9
    assert demand.min() >= 2.0 - 1e-9  # the floor is always paid


@pytest.mark.parametrize("objective", ["freshness", "age"])
def test_demand_from_the_pairs_inside_each_price_range_equals_every_pair_priced(objective):
    # The optimal policy's demand curves price only the (page, level) pairs inside each
    # page's price range; pricing all of them must give the same curves, with floors,
    # ceilings, binding caps, a host squeezed by its floors, a closed host and useless pages.
    from jobs.core.allocation_grid import BoxedRates, capped_demand_curves
    pages = pages_frame(7, n=3000, n_hosts=9)
    rng = np.random.default_rng(7)
    pages.loc[rng.random(len(pages)) < 0.05, "lambda_hat"] = 0.0
    pages.loc[rng.random(len(pages)) < 0.05, "importance"] = 0.0
    pages["rate_floor"] = np.where(rng.random(len(pages)) < 0.2, rng.uniform(0.5, 3, len(pages)), 0.0)
    pages["rate_ceiling"] = np.where(rng.random(len(pages)) < 0.3, rng.uniform(0.05, 2, len(pages)), np.inf)
    codes = pages["host"].astype(int).to_numpy()
    order = np.argsort(codes, kind="stable")
    pages, codes = pages.iloc[order].reset_index(drop=True), codes[order]
    counts = np.bincount(codes, minlength=9)
    caps = counts * np.array([50, 0.5, 2, 0.0, 5, 1, 0.001, 8, 3.0])  # 3 closed, 6 squeezed
    pol = get_policy("optimal", f_min=F_MIN, f_max=F_MAX, objective=objective)
    fn = pol.floored_rate_fn(pages)
    assert isinstance(fn, BoxedRates)
    grid = multiplier_grid(1e-6, 1e4, 256)
    pairs = capped_demand_curves(fn, codes, counts, caps, grid)
    every = capped_demand_curves(fn.dense, codes, counts, caps, grid)
    np.testing.assert_allclose(pairs, every, rtol=1e-12, atol=1e-9)
    assert np.all(np.diff(pairs, axis=1) <= 0)
    assert (pairs[3] == 0).all() and (pairs[6] == caps[6]).all()
    assert pairs[0, 0] > pairs[0, -1] > 0  # a curve that moves, down to its floors


def test_a_stale_visit_is_worth_its_price_only_under_the_freshness_optimum():
    """What a visit to a page known changed buys (jobs.core.allocation_kkt.stale_visit_value)
    against the day's price: the lower end of a solved bracket, or the level itself."""
    from jobs.core.allocation_grid import MultiplierSolution
    from jobs.core.allocation_kkt import stale_visit_value

    pages = pages_frame(4)
    rate = np.full(len(pages), 0.5)
    value = stale_visit_value(pages.lambda_hat, pages.importance, 2.0)
    optimal = get_policy("optimal", f_min=F_MIN, f_max=F_MAX)
    np.testing.assert_allclose(optimal.stale_visit_values(pages, rate), value, rtol=1e-12)
    mu = float(np.median(value))
    worth = optimal.stale_visit_worth(pages, rate, mu)
    assert worth.tolist() == (value >= mu).tolist() and 0 < worth.sum() < len(pages)
    bracket = MultiplierSolution(2 * mu, mu, 0.4, 0.0, 0.0, mu, (mu, 2 * mu), True, True, "")
    assert optimal.stale_visit_worth(pages, rate, bracket).tolist() == worth.tolist()
    assert optimal.stale_visit_worth(pages, rate, None).all()  # no level: nothing to price
    # A timed page's weight carries its timing gain, as in the rates.
    timed = pages.assign(timing_gain=2.0)
    np.testing.assert_allclose(optimal.stale_visit_values(timed, rate), 2 * value, rtol=1e-12)
    # The age objective and the policies that do not price visits take every such visit.
    age = get_policy("optimal", f_min=F_MIN, f_max=F_MAX, objective="age")
    assert age.stale_visit_values(pages, rate) is None
    for policy in (age, get_policy("uniform"), get_policy("proportional"),
                   get_policy("adaptive")):
        assert policy.stale_visit_worth(pages, rate, 1e9).all()
