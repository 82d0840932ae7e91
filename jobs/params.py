"""The typed config -> the functional core's small frozen params (the one adapter).

``jobs.core`` never imports ``jobs.config`` and never sees the whole ``Config``: the stages
build its parameters here. Defaults live only in :mod:`jobs.config`; the params dataclasses
(defined in ``jobs.core``) have none of their own, so every value below comes from a config
key. ``budget.daily_fetches`` is read here and nowhere else; the rest of the code gets it
as :attr:`jobs.core.lanes.BudgetParams.daily_fetches`.
"""
from __future__ import annotations

from jobs.config import Config
from jobs.core import host_health, host_plan, lanes, state_update, timing, trust
from jobs.core.policies import get_policy
from jobs.paths import DAY_S


def budget_params(cfg: Config) -> lanes.BudgetParams:
    b = cfg.budget
    return lanes.BudgetParams(daily_fetches=b.daily_fetches, fast_share=b.fast_share,
                              audit_share=b.audit_share, discovery_share=b.discovery_share,
                              split=b.split, discovery_value_days=cfg.lanes.discovery_value_days)


def plan_context(cfg: Config, window_start: float, window_end: float) -> host_plan.PlanContext:
    """The per-host context before the driver's solve (fast rate f_max, no discovery
    threshold, no level yet: :func:`jobs.policy_rates.solve_levels` fills those)."""
    iv, ln = cfg.intervals, cfg.lanes
    f_min, f_max = DAY_S / iv.cap_s, DAY_S / iv.floor_s
    params = {"objective": cfg.policy.objective} if cfg.policy.name == "optimal" else {}
    policy = get_policy(cfg.policy.name, f_min=f_min, f_max=f_max, **params)
    return host_plan.PlanContext(
        window_start=window_start, window_end=window_end, f_min=f_min, f_max=f_max,
        initial_s=iv.initial_s, gone_rate=1.0 / cfg.policy.gone_recheck_days,
        default_importance=cfg.policy.default_importance,
        fast_min_lambda=ln.fast_min_lambda, fast_min_importance=ln.fast_min_importance,
        fast_patterns=ln.fast_patterns, fast_rate=f_max,
        fast_enabled=lanes.share_targets(budget_params(cfg))["fast"] >= 1,
        audit_rate=cfg.audit.sample_rate, audit_cadence_days=ln.audit_cadence_days,
        policy=policy, fast_floor=bool(ln.fast_as_floor and policy.budget_aware),
        timing=timing_params(cfg), backfill_s=ln.backfill_horizon_days * DAY_S,
        probe_factor=cfg.estimation.probe_factor,
        max_defer_s=cfg.signals.max_defer_days * DAY_S)


def timing_params(cfg: Config) -> timing.TimingParams:
    t = cfg.timing
    return timing.TimingParams(enabled=t.enabled, min_dated_changes=t.min_dated_changes,
                               min_concentration=t.min_concentration, visit_lag_s=t.visit_lag_s,
                               max_arc_s=t.max_arc_s,
                               max_changes_per_period=t.max_changes_per_period,
                               host_min_dated_changes=t.host_min_dated_changes,
                               host_min_log_odds=t.host_min_log_odds,
                               host_min_spread_s=t.host_min_spread_s,
                               few_dates_max_changes_per_week=t.few_dates_max_changes_per_week,
                               tight_min_dated_changes=t.tight_min_dated_changes,
                               tight_spread_s=t.tight_spread_s,
                               week_min_dated_changes=t.week_min_dated_changes,
                               burst_max_poisson_prob=t.burst_max_poisson_prob,
                               burst_recheck_s=t.burst_recheck_s)


def update_params(cfg: Config) -> state_update.UpdateParams:
    return state_update.UpdateParams(
        floor_s=cfg.intervals.floor_s, cap_s=cfg.intervals.cap_s,
        initial_s=cfg.intervals.initial_s, gone_after=cfg.policy.gone_after,
        half_life_days=cfg.estimation.half_life_days, level=cfg.estimation.level,
        timing=timing_params(cfg), age_at_first_fetch=cfg.estimation.age_at_first_fetch)


def rate_limit_params(cfg: Config) -> host_health.RateLimitParams:
    h = cfg.health
    return host_health.RateLimitParams(
        max_error_rate=h.max_error_rate, max_throttle_rate=h.max_throttle_rate,
        max_latency_ms=h.max_latency_ms, latency_rise=h.latency_rise,
        latency_min_rise_ms=h.latency_min_rise_ms,
        latency_half_life_days=h.latency_half_life_days, decrease=h.rate_decrease,
        return_step=h.rate_return_step, probe_step=h.rate_probe_step, floor=h.rate_floor,
        min_utilisation=h.rate_min_utilisation, min_fetches=h.min_fetches,
        max_retry_after_s=h.max_retry_after_s, error_confidence=h.error_confidence,
        probe_ceiling_step=h.rate_probe_ceiling_step, probe_growth=h.rate_probe_growth)


def trust_params(cfg: Config) -> trust.TrustParams:
    t, s = cfg.trust, cfg.signals
    return trust.TrustParams(
        half_life_days=t.half_life_days, min_confirmations=t.min_confirmations,
        max_lie_share=t.max_lie_share, max_volatile_share=t.max_volatile_share,
        signal_half_life_days=s.half_life_days, signal_min_scored=s.min_scored,
        signal_min_accuracy=s.min_accuracy, health=rate_limit_params(cfg),
        trust_new=t.new_hosts_conditional)
