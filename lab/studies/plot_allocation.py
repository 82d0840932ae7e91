"""Figure for docs/allocation.md: weighted freshness against budget, per policy.

Run: ``python -m lab.studies.plot_allocation docs/freshness_vs_budget.png`` (about 20 s).
Same seeded instance as :mod:`lab.studies.allocation_figures` (2000 pages, 20 Zipf-sized
hosts, the three largest capped at 0.02 visits/page/day, f_min = 1/90, f_max = 24).
"""
from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.studies.allocation_figures import synthetic_pages  # noqa: E402
from jobs.core.allocation_kkt import objective_value  # noqa: E402
from jobs.core.policies import get_policy, policy_rates  # noqa: E402

BUDGETS = np.geomspace(0.02, 5.0, 14)  # visits per page per day


def curves(pages, caps):
    lam, w = pages.lambda_hat.to_numpy(), pages.importance.to_numpy()
    out = {}
    for label, policy in (("uniform", get_policy("uniform")),
                          ("proportional", get_policy("proportional")),
                          ("optimal (freshness)", get_policy("optimal")),
                          ("optimal (age)", get_policy("optimal", objective="age"))):
        out[label] = [objective_value(lam, w, policy_rates(policy, pages, "host", caps,
                                                           b * len(pages)).rates.to_numpy())
                      / w.sum() for b in BUDGETS]
    return out


def main(argv=None) -> int:
    path = (argv or sys.argv[1:] or ["docs/freshness_vs_budget.png"])[0]
    pages = synthetic_pages()
    sizes = pages.host.value_counts()
    caps = {int(h): round(0.02 * float(sizes[h]), 2) for h in sizes.index[:3]}
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, ys in curves(pages, caps).items():
        ax.plot(BUDGETS, ys, marker="o", ms=3, label=label)
    ax.axvline(0.25, color="grey", lw=0.8, ls=":")
    ax.text(0.26, 0.12, "25% of URLs/day", color="grey", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("budget (visits per page per day)")
    ax.set_ylabel("importance-weighted mean freshness")
    ax.set_title("Freshness against budget (2000 pages, 3 capped hosts)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
