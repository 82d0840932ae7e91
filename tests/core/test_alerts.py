"""Threshold alerts on a day's figures (jobs.core.alert_rules), their config and delivery."""
from __future__ import annotations

import pytest

from jobs.config import AlertsConfig, ConfigError, load_config
from jobs.core.alert_rules import CHECKS, threshold_alerts

D = "2026-11-29"


def _day(**kw):
    row = {"audit_freshness": 0.8, "quarantined_rows": 0, "log_rows": 10_000, "budget": 5000,
           "hosts_blocked": 0}
    row.update(kw)
    return row


def _checks(alerts):
    return [a["check"] for a in alerts]


def test_a_healthy_day_raises_nothing():
    assert threshold_alerts(D, _day(), [_day()] * 7, 0, AlertsConfig()) == []


def test_each_threshold_fires_alone_and_says_value_and_limit():
    limits = AlertsConfig(freshness_floor=0.5, freshness_drop=0.1, quarantine_share_max=0.01,
                          unused_budget_share_max=0.05, hosts_blocked_max=20)
    week = [_day(audit_freshness=f) for f in (0.80, 0.82, 0.78, 0.81, 0.79)]
    cases = {
        "audit_freshness_floor": (_day(audit_freshness=0.45), [], 0),
        "audit_freshness_drop": (_day(audit_freshness=0.65), week, 0),
        "quarantine_share": (_day(quarantined_rows=200), [], 0),
        "unused_budget": (_day(), [], 400),
        "hosts_blocked": (_day(hosts_blocked=21), [], 0),
    }
    for check, (today, earlier, unused) in cases.items():
        alerts = threshold_alerts(D, today, earlier, unused, limits)
        assert _checks(alerts) == [check], check
        a = alerts[0]
        assert a["kind"] == "threshold" and a["run_date"] == D and "\n" not in a["message"]
        assert a["message"].startswith(f"recrawl {D}: ")
    # at the limits themselves nothing fires (strictly above / below)
    edge = threshold_alerts(D, _day(audit_freshness=0.5, quarantined_rows=100, hosts_blocked=20),
                            [], 250, limits)
    assert edge == []
    # all at once, in CHECKS order
    everything = threshold_alerts(D, _day(audit_freshness=0.4, quarantined_rows=500,
                                          hosts_blocked=50), week, 1000, limits)
    assert _checks(everything) == list(CHECKS)


def test_the_drop_needs_three_audited_days_and_ignores_days_without_audit():
    limits = AlertsConfig(freshness_floor=0.0, freshness_drop=0.1)
    two = [_day(audit_freshness=0.9), _day(audit_freshness=0.9), _day(audit_freshness=None),
           _day(audit_freshness=float("nan"))]
    assert threshold_alerts(D, _day(audit_freshness=0.5), two, 0, limits) == []
    three = two + [_day(audit_freshness=0.7)]  # median of 0.9, 0.9, 0.7 = 0.9
    alerts = threshold_alerts(D, _day(audit_freshness=0.75), three, 0, limits)
    assert _checks(alerts) == ["audit_freshness_drop"]
    assert alerts[0]["threshold"] == pytest.approx(0.8)


def test_missing_figures_raise_no_alert_and_limits_can_switch_checks_off():
    empty = {"audit_freshness": None, "quarantined_rows": None, "log_rows": None,
             "budget": None, "hosts_blocked": None}
    assert threshold_alerts(D, empty, [], None, AlertsConfig()) == []
    off = AlertsConfig(freshness_floor=0.0, freshness_drop=1.0, quarantine_share_max=1.0,
                       unused_budget_share_max=1.0, hosts_blocked_max=-1)
    bad = _day(audit_freshness=0.01, quarantined_rows=9_999, hosts_blocked=200)
    assert threshold_alerts(D, bad, [_day()] * 7, 5000, off) == []


@pytest.mark.parametrize("setting", ["alerts.freshness_floor=1.5", "alerts.median_days=0",
                                     "alerts.hosts_blocked_max=-2",
                                     "alerts.unused_budget_share_max=-0.1"])
def test_bad_thresholds_are_config_errors(setting):
    with pytest.raises(ConfigError, match="alerts"):
        load_config(None, [setting])


def test_thresholds_come_from_the_config():
    cfg = load_config(None, ["alerts.freshness_floor=0.7", "alerts.hosts_blocked_max=3"])
    assert cfg.alerts.freshness_floor == 0.7 and cfg.alerts.hosts_blocked_max == 3
    alerts = threshold_alerts(D, _day(audit_freshness=0.69, hosts_blocked=4), [], 0, cfg.alerts)
    assert _checks(alerts) == ["audit_freshness_floor", "hosts_blocked"]
