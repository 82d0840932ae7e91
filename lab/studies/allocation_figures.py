"""Figures for docs/allocation.md on a seeded synthetic instance.

Run: ``python -m lab.studies.allocation_figures`` (about 10 s on one core).
Prints (1) importance-weighted mean freshness and age against budget for each
policy, (2) accuracy of the demand-curve path against the exact solver.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from jobs.core.allocation_reference import (
    allocate, host_demand_curve, multiplier_bounds, multiplier_grid, objective_value,
    refine_grid, solve_host, solve_multiplier)
from jobs.core.allocation_hosts import caps_for, encode_hosts, floor_demand
from jobs.core.policies import get_policy, policy_rates

F_MIN, F_MAX = 1.0 / 90.0, 24.0
SEED, N_PAGES, N_HOSTS = 20240601, 2000, 20


def synthetic_pages(seed=SEED, n=N_PAGES, n_hosts=N_HOSTS):
    """Log-normal change rates (median 0.3/day, sigma 1.5) and importances; Zipf-ish hosts."""
    rng = np.random.default_rng(seed)
    host_p = 1.0 / np.arange(1, n_hosts + 1)
    return pd.DataFrame({
        "host": rng.choice(n_hosts, size=n, p=host_p / host_p.sum()),
        "lambda_hat": np.exp(rng.normal(np.log(0.3), 1.5, n)),
        "importance": rng.lognormal(0.0, 1.0, n),
        "interval_s": 86400.0,
    })


def budget_table(pages, caps, per_page_budgets=(0.05, 0.1, 0.3, 1.0, 3.0)):
    """Weighted mean freshness / age (hours) of each policy at each budget."""
    lam, w = pages.lambda_hat.to_numpy(), pages.importance.to_numpy()
    policies = {"uniform": get_policy("uniform"), "proportional": get_policy("proportional"),
                "optimal": get_policy("optimal"), "optimal-age": get_policy("optimal", objective="age")}
    rows = []
    for per_page in per_page_budgets:
        budget = per_page * len(pages)
        row = {"budget/page/day": per_page}
        for label, policy in policies.items():
            rates = policy_rates(policy, pages, "host", caps, budget).rates.to_numpy()
            row[f"F {label}"] = objective_value(lam, w, rates) / w.sum()
            row[f"A(h) {label}"] = 24 * objective_value(lam, w, rates, "age") / w.sum()
        rows.append(row)
    return pd.DataFrame(rows)


def grid_path(lam, w, host, caps, budget, objective, n_grid, refine):
    """Spark-equivalent path; returns (rates, passes over the page table)."""
    labels, codes, counts = encode_hosts(host)
    cap = caps_for(labels, caps)
    lo, hi = multiplier_bounds(lam, w, max(F_MIN, budget / lam.size), min(F_MAX, budget), objective)
    grid = multiplier_grid(lo, hi, n_grid)

    def total(levels):
        return sum(host_demand_curve(lam[codes == h], w[codes == h], cap[h], levels,
                                     F_MIN, F_MAX, objective) for h in range(labels.size))

    sol = solve_multiplier(grid, total(grid), budget, floor_demand(counts, cap, F_MIN))
    if refine:
        grid = refine_grid(sol, n_grid)
        sol = solve_multiplier(grid, total(grid), budget)
    rates = np.zeros(lam.size)
    for h in range(labels.size):
        rates[codes == h] = solve_host(lam[codes == h], w[codes == h], cap[h], sol,
                                       F_MIN, F_MAX, objective)[0]
    return rates, 3 if refine else 2


def accuracy_table(pages, caps, per_page_budgets=(0.1, 1.0)):
    """Relative objective gap and budget slack of the grid path against ``allocate``."""
    lam, w, host = (pages[c].to_numpy() for c in ("lambda_hat", "importance", "host"))
    rows = []
    for objective in ("freshness", "age"):
        for per_page in per_page_budgets:
            budget = per_page * len(pages)
            exact = allocate(lam, w, host, caps, budget, F_MIN, F_MAX, objective)
            for n_grid, refine in ((64, False), (256, False), (256, True)):
                rates, passes = grid_path(lam, w, host, caps, budget, objective, n_grid, refine)
                gap = abs(objective_value(lam, w, rates, objective) - exact.objective)
                rows.append({"objective": objective, "budget/page/day": per_page, "grid": n_grid,
                             "passes": passes, "rel. objective gap": gap / abs(exact.objective),
                             "slack/B": 1.0 - rates.sum() / budget,
                             "over budget": bool(rates.sum() > budget)})
    return pd.DataFrame(rows)


def main():
    pages = synthetic_pages()
    # The three largest hosts are capped at 2 visits/day per 100 pages they hold.
    sizes = pages.host.value_counts()
    caps = {int(h): round(0.02 * float(sizes[h]), 2) for h in sizes.index[:3]}
    pd.set_option("display.width", 200)
    print(f"seed={SEED} pages={N_PAGES} hosts={N_HOSTS} f_min=1/90 f_max=24 caps={caps}")
    print(budget_table(pages, caps).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print()
    print(accuracy_table(pages, caps).to_string(index=False, float_format=lambda x: f"{x:.1e}"))


if __name__ == "__main__":
    main()
