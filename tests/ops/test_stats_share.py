"""``recrawl stats --host``: the host's share of the day's plan value, known answers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobs.stats import host_share, plan_value
from tests import tiny_web
from tests.conftest import make_config

D = "2026-11-02"


def _plan_rows():
    rows = []
    for i, (host, lam, rate, w, lane) in enumerate([
            ("a.example", 1.0, 1.0, 2.0, "refresh"), ("a.example", 0.0, 0.5, 1.0, "refresh"),
            ("b.example", 2.0, 1.0, 1.0, "fast"), ("b.example", 0.5, 0.0, 3.0, "refresh"),
            ("b.example", 0.0, 1.0, 5.0, "discovery")]):
        rows.append({"url": f"https://{host}/p{i}", "host": host, "lane": lane,
                     "reason": "multiplier", "planned_rate": rate, "visits": int(np.ceil(rate)),
                     "audit": False, "cap_binds": False, "host_cap": 10, "importance": w,
                     "lambda_hat": lam, "marginal_value": 0.0, "last_success_at": None,
                     "p_stale_now": 0.0})
    return rows


def test_plan_value_is_importance_times_the_poisson_freshness():
    plan = pd.DataFrame(_plan_rows())
    # F(1, 1) = 1 - 1/e; F(0, f) = 1; F(2, 1) = (1 - e^-2)/2; F(0.5, 0) = 0; discovery: no copy
    want = 2.0 * (1 - np.exp(-1.0)) + 1.0 + (1 - np.exp(-2.0)) / 2
    assert plan_value(plan) == pytest.approx(want, rel=1e-12)


def test_host_share_streams_the_committed_plan(tmp_path):
    tiny_web.write_committed(str(tmp_path), "plan", _plan_rows(), D)
    cfg = make_config(str(tmp_path))
    a, b = host_share(cfg, D, "a.example"), host_share(cfg, D, "b.example")
    total = 2.0 * (1 - np.exp(-1.0)) + 1.0 + (1 - np.exp(-2.0)) / 2
    assert a["value"] == pytest.approx(2.0 * (1 - np.exp(-1.0)) + 1.0, rel=1e-12)
    assert a["value_share"] + b["value_share"] == pytest.approx(1.0, rel=1e-12)
    assert a["value_total"] == pytest.approx(total, rel=1e-12)
    assert a["visits_share"] == pytest.approx(2 / 4) and b["visits_share"] == pytest.approx(2 / 4)
