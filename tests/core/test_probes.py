"""A page whose every fetch changed is probed at 1/λ̂ (jobs.core.probes)."""
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.backtest.loop import BacktestSpec, planner_config
from jobs.config import Config, ConfigError, load_config
from jobs.core import host_plan, policies, probes
from jobs.params import plan_context

DAY_S = 86400.0
HOUR = 3600.0
W0 = 1_800_000_000.0


def test_a_page_whose_every_fetch_changed_is_probed_at_one_over_lambda_hat():
    last = np.full(8, W0 - HOUR)
    lam = np.array([4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 0.4, np.nan])
    rate = np.array([0.5, 0.5, 0.5, 0.5, 1 / 30, 0.5, 0.5, 0.5])
    n_obs = np.array([5.0, 5.0, 1.5, 5.0, 5.0, 5.0, 5.0, 5.0])
    n_chg = np.array([5.0, 4.9, 1.5, 5.0, 5.0, 5.0, 5.0, 5.0])
    eligible = np.array([True, True, True, False, True, True, True, True])
    at, p = probes.probe_recheck(last, lam, rate, n_obs, n_chg, eligible, 1 / 30, 1.0)
    assert at[0] == pytest.approx(last[0] + DAY_S / 4.0, abs=1e-6)
    assert p[0] == pytest.approx(1 - np.exp(-1.0), rel=1e-12)
    # One fetch unchanged, fewer than 2 observations, not eligible (trusted Last-Modified or
    # timed), at the floor rate f_min: no probe. Row 5 is the first again: probed.
    assert np.isnan(at[1:5]).all()
    assert np.isfinite(at[5])
    # Visited more often than λ̂ (its intervals are short already), no λ̂: no probe.
    assert np.isnan(at[6:]).all()
    assert np.isnan(probes.probe_recheck(last, lam, rate, n_obs, n_chg, eligible, 1 / 30, 0.0)[0]).all()


def test_the_probe_interval_scales_with_the_factor():
    at, p = probes.probe_recheck([W0], [2.0], [0.5], [3.0], [3.0], [True], 0.01, 0.5)
    assert at[0] == pytest.approx(W0 + 0.25 * DAY_S) and p[0] == pytest.approx(1 - np.exp(-0.5))
    with pytest.raises(ValueError):
        probes.probe_recheck([W0], [2.0], [0.5], [3.0], [3.0], [True], 0.01, -1.0)
    with pytest.raises(ConfigError):
        load_config(None, ["estimation.probe_factor=11"])


def _plan(trust_lm: bool, n_changes: float, factor: float = 1.0):
    ctx = plan_context(Config(), W0, W0 + DAY_S)
    ctx = dataclasses.replace(
        ctx, policy=policies.get_policy("uniform", f_min=ctx.f_min, f_max=ctx.f_max), level=5.0,
        fast_rate=1.0, audit_rate=0.0, discovery_min_bin=-8, fast_floor=False, backfill_s=0.0,
        probe_factor=factor)
    at = pd.Timestamp(W0 - 4 * HOUR, unit="s", tz="UTC")
    pages = pd.DataFrame({
        "host": ["h.example"], "url": ["https://h.example/p"], "lane": ["refresh"],
        "lambda_hat": [3.0], "importance": [1.0], "interval_s": [5 * DAY_S], "gone": [False],
        "last_fetch_at": [at], "last_success_at": [at], "pending_signal_at": [pd.NaT],
        "etag": [None], "last_modified": [None], "method_hint": ["conditional"],
        "crawl_delay_s": [10.0], "max_fetches_per_day": [np.nan], "trust_lm": [trust_lm],
        "n_observations": [6.0], "n_changes": [n_changes]})
    out = host_plan.plan_bucket(pages, ctx)
    return out[out.url.notna() & out.reason.isna()]


def test_the_planner_probes_an_all_changed_page_on_a_host_without_dates():
    v = _plan(trust_lm=False, n_changes=6.0)     # uniform: 0.2 visits a day, λ̂ = 3
    assert list(v["due_s"]) == [W0 - 4 * HOUR + DAY_S / 3.0]   # 8 h after its last success
    assert v["p_changed"].iloc[0] == pytest.approx(1 - np.exp(-1.0))
    # A trusted Last-Modified dates its changes; one unchanged fetch; probes off: the rhythm
    # (5 days after the last fetch: nothing today).
    assert _plan(trust_lm=True, n_changes=6.0).empty
    assert _plan(trust_lm=False, n_changes=5.0).empty
    assert _plan(trust_lm=False, n_changes=6.0, factor=0.0).empty


def test_the_backtests_oracle_neither_probes_nor_times():
    spec = BacktestSpec(urls=100, hosts=5, history_days=1, days=1, seed=0)
    oracle = planner_config(spec, Path("/tmp/x/data"), "oracle", None)
    optimal = planner_config(spec, Path("/tmp/x/data"), "optimal", None)
    assert oracle.estimation.probe_factor == 0 and not oracle.timing.enabled
    assert optimal.estimation.probe_factor == Config().estimation.probe_factor > 0
    assert optimal.timing.enabled
