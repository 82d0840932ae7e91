"""Threshold alerts on a day's figures (pure: dicts in, alert dicts out).

The DAG's ``report`` task (:func:`jobs.dag_tasks.run_report`) reads the day's ``metrics``
row, the rows of the days before it and the day's unused budget, and sends each alert this
returns through the notifier (:mod:`jobs.notify`). Thresholds: ``[alerts]`` in the config.
"""
from __future__ import annotations

import math
import statistics

CHECKS = ("audit_freshness_floor", "audit_freshness_drop", "quarantine_share",
          "unused_budget", "hosts_blocked")
MIN_MEDIAN_DAYS = 3  # audited days a median needs before a drop from it is judged


def _number(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def threshold_alerts(run_date: str, today: dict, earlier: list, unused: float | None,
                     limits) -> list[dict]:
    """The alerts the day's figures raise, in :data:`CHECKS` order.

    Parameters
    ----------
    run_date : str
        D.
    today : dict
        ``metrics/dt=D`` (``audit_freshness``, ``quarantined_rows``, ``log_rows``,
        ``budget``, ``hosts_blocked``).
    earlier : list of dict
        ``metrics`` rows of the ``limits.median_days`` days before D (missing days left out).
    unused : float or None
        Visits of the day's budget no lane (backfill included) planned.
    limits
        The ``[alerts]`` config (:class:`jobs.config.AlertsConfig`).

    Returns
    -------
    list of dict
        ``kind`` "threshold", ``check`` (one of :data:`CHECKS`), ``run_date``, ``value``,
        ``threshold`` and a one-line ``message``.
    """
    out = []

    def alert(check, value, threshold, message):
        out.append({"kind": "threshold", "check": check, "run_date": run_date,
                    "value": value, "threshold": threshold,
                    "message": f"recrawl {run_date}: {message}"})

    fresh = _number(today.get("audit_freshness"))
    if fresh is not None and limits.freshness_floor > 0 and fresh < limits.freshness_floor:
        alert("audit_freshness_floor", fresh, limits.freshness_floor,
              f"audit freshness {fresh:.3f} is below the floor {limits.freshness_floor:g}")
    past = [v for v in (_number(r.get("audit_freshness")) for r in earlier) if v is not None]
    if fresh is not None and len(past) >= MIN_MEDIAN_DAYS and limits.freshness_drop < 1:
        median = statistics.median(past)
        if median - fresh > limits.freshness_drop:
            alert("audit_freshness_drop", fresh, median - limits.freshness_drop,
                  f"audit freshness {fresh:.3f} is {median - fresh:.3f} below its median "
                  f"{median:.3f} of the {len(past)} audited days before (limit "
                  f"{limits.freshness_drop:g})")
    quarantined, rows = _number(today.get("quarantined_rows")), _number(today.get("log_rows"))
    if quarantined and rows and limits.quarantine_share_max < 1:
        share = quarantined / rows
        if share > limits.quarantine_share_max:
            alert("quarantine_share", share, limits.quarantine_share_max,
                  f"{int(quarantined):,} input rows quarantined, {share:.2%} of "
                  f"{int(rows):,} fetch-log rows (limit {limits.quarantine_share_max:.2%})")
    budget = _number(today.get("budget"))
    if unused is not None and budget and limits.unused_budget_share_max < 1:
        share = unused / budget
        if share > limits.unused_budget_share_max:
            alert("unused_budget", share, limits.unused_budget_share_max,
                  f"{int(unused):,} of {int(budget):,} budgeted visits unused, backfill "
                  f"included ({share:.1%}; limit {limits.unused_budget_share_max:.1%})")
    blocked = _number(today.get("hosts_blocked"))
    if blocked is not None and limits.hosts_blocked_max >= 0 and blocked > limits.hosts_blocked_max:
        alert("hosts_blocked", blocked, limits.hosts_blocked_max,
              f"{int(blocked)} hosts blocked by a Retry-After (limit {limits.hosts_blocked_max})")
    return out
