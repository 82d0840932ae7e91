"""Side-by-side timing of the KKT root: bracketed Newton against the table-seeded root.

Usage::

    python -m lab.studies.bench_kkt --pages 600000 --repeats 7

Both solve g(r) = μλ/w for the same pages (λ log-normal around 0.37/day, σ 1.5; weights
log-normal) at 16 levels spread over the demand grid's range; prints the median ns per
page-level of each method, their ratio and the largest relative difference of the roots.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from jobs.core import allocation_kkt as kkt


def bracketed_newton(target):
    """The pre-table solver: Newton from the right inside h(r)'s bracket, to convergence."""
    y = -np.log1p(-target)
    hi, lo = kkt._bracket_freshness(y)
    return kkt._newton_from_right(kkt._h, kkt._dh, y, hi, lo)[0]


def table_seeded(target):
    return kkt.stationary_ratio(target, "freshness")[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=600_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    lam = np.exp(rng.normal(-1.0, 1.5, args.pages))
    weight = np.exp(rng.normal(0.0, 1.0, args.pages))
    targets = [t[(t > 0) & (t < 1)] for t in (mu * lam / weight for mu in np.geomspace(1e-4, 10, 16))]
    n = sum(t.size for t in targets)
    times = {"bracketed_newton": [], "table_seeded": []}
    for _ in range(args.repeats):  # alternate, so drift in machine load hits both alike
        for name, fn in (("bracketed_newton", bracketed_newton), ("table_seeded", table_seeded)):
            t0 = time.perf_counter()
            for t in targets:
                fn(t)
            times[name].append((time.perf_counter() - t0) / n * 1e9)
    diff = max(float(np.max(np.abs(table_seeded(t) / bracketed_newton(t) - 1))) for t in targets)
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(json.dumps({"page_levels": n, "repeats": args.repeats,
                      **{f"{k}_ns": round(v, 1) for k, v in med.items()},
                      "speedup": round(med["bracketed_newton"] / med["table_seeded"], 2),
                      "max_rel_diff": diff}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
