"""Replay many days of fetch logs through the daily fold, one bucket of hosts at a time
(pure pandas; ``jobs.rebuild_state`` calls :func:`replay` once per host-hash bucket).

Why a bucket of hosts can be replayed on its own: the daily update (``jobs.update_state``)
of day d folds each URL with :func:`jobs.core.state_update.fold_day` from

* the URL's row of day d-1,
* the day's clean log and signal rows of the URL,
* each row's host trust flags (``trust_etag``, ``trust_lm``, ``signal_trusted``) from the
  hosts table of day d-1,

and the hosts table of day d is :func:`jobs.core.trust.update_hosts` of the hosts of d-1
and the day's per-host sums (:func:`host_today`: the folded rows' ``EVIDENCE_COLUMNS``,
``urls_known`` and the health counts of the day's clean logs). Every dependence between
URLs before the group priors is therefore within one host, and the group priors only set
λ̂, λ_lo, λ_hi, λ_prior and the chosen prior, which no later fold reads. So the hosts of a
bucket, replayed day by day on their own, reach exactly the rows the daily runs reach;
the priors are fitted once, after the last day, over all buckets (by the caller).

Per day, in the daily run's order:

1. **stale rows**: log rows older than their URL's ``last_fetch_at`` of day d-1 are left
   out and reported (:func:`split_stale`, the rule's one home, which update_state's fold
   calls too; ``ingest.split_stale_rows`` quarantines them as ``stale_fetched_at``);
2. each remaining row and signal gets its host's trust flags from the hosts of day d-1
   (hosts not yet known: not trusted);
3. one :func:`fold_day` call over every URL of the bucket (vectorised over URLs);
4. the bucket's hosts are updated with :func:`host_today` of the folded rows and clean logs.

Only the last day's state is kept; the hosts of every day, the per-day figures of the run
record and the stale rows are returned beside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from jobs.core import host_health, observations, state_update, trust
from jobs.core.state_update import UpdateParams
from jobs.core.times import epoch_seconds
from jobs.core.trust import TrustParams

EVIDENCE = list(observations.EVIDENCE_COLUMNS)
TRUST_FLAGS = ("trust_etag", "trust_lm", "signal_trusted")
#: Per-host log counts of a day (``update_state``'s health aggregate; jobs.core.host_health).
HEALTH_SUMS = ("fetches", "timeouts", "errors_5xx", "throttled_429", "throttled",
               "latency_sum_ms", "latency_n")
#: Per-host politeness carried by every log row (``rebuild_state`` joins host_policy in).
POLITENESS = ("crawl_delay_s", "max_fetches_per_day")
#: Per-day figures of the bucket, summed over buckets into each day's run record.
FIGURES = ("urls_known", "urls_gone", "urls_pending_signal", "audit_n", "audit_fresh",
           "stale_rows", *observations.FETCH_FIGURES)


@dataclass
class Replay:
    """What :func:`replay` returns for one bucket.

    Attributes
    ----------
    state : DataFrame
        The folded rows of the last day (as :func:`fold_day` returns them: state columns
        plus ``EVIDENCE_COLUMNS``), before the group priors: their ``lambda_*`` columns are
        not estimates to keep.
    hosts : DataFrame
        Every day's hosts rows (``trust.HOST_COLUMNS``) with a ``dt`` column.
    figures : DataFrame
        One row per day: ``dt`` and :data:`FIGURES`.
    stale : DataFrame
        One row per (day, URL) with stale rows: ``dt``, ``url``, ``last_fetch_at`` (the
        URL's last fetch of the day before, which the stale rows are older than) and
        ``rows``.
    """

    state: pd.DataFrame
    hosts: pd.DataFrame
    figures: pd.DataFrame
    stale: pd.DataFrame


def _micros(col) -> np.ndarray:
    """Timestamps as datetime64[us] in UTC (NaT where missing), for exact comparisons."""
    ts = pd.to_datetime(pd.Series(col), utc=True).dt.tz_convert(None)
    return ts.to_numpy(dtype="datetime64[us]")


def split_stale(logs: pd.DataFrame, state: pd.DataFrame):
    """``(clean, stale)``: log rows older than their URL's ``last_fetch_at`` in ``state``
    (the day before's rows) are stale; ``stale`` is one row per such URL with that
    ``last_fetch_at`` and the number of its stale ``rows``."""
    none = pd.DataFrame({"url": pd.Series(dtype=object), "last_fetch_at": pd.Series(
        dtype="datetime64[us, UTC]"), "rows": pd.Series(dtype=np.int64)})
    if not len(logs) or not len(state):
        return logs, none
    prev = pd.Series(_micros(state["last_fetch_at"]), index=state["url"].to_numpy())
    prev = prev[~pd.isna(prev.to_numpy())]
    before = prev.reindex(logs["url"].to_numpy()).to_numpy(dtype="datetime64[us]")
    # NaT compares False: a URL without a previous fetch has no stale rows.
    stale = _micros(logs["fetched_at"]) < before
    if not stale.any():
        return logs, none
    urls = logs["url"].to_numpy(dtype=object)[stale]
    counts = pd.Series(urls).value_counts(sort=False)
    at = pd.to_datetime(prev.loc[counts.index.to_numpy()].to_numpy()).tz_localize("UTC")
    return logs[~stale], pd.DataFrame({"url": counts.index.to_numpy(dtype=object),
                                       "last_fetch_at": at,
                                       "rows": counts.to_numpy(dtype=np.int64)})


def with_trust(rows: pd.DataFrame, hosts: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with their host's ``TRUST_FLAGS`` from ``hosts`` (missing: unknown host)."""
    rows = rows.copy()
    flags = hosts.set_index("host") if len(hosts) else None
    for c in TRUST_FLAGS:
        rows[c] = (rows["host"].map(flags[c]).astype(object) if flags is not None
                   else pd.Series(None, index=rows.index, dtype=object))
    return rows


def host_today(folded: pd.DataFrame, logs: pd.DataFrame, max_block_s: float) -> pd.DataFrame:
    """One row per host seen today, as ``update_state`` sums them for
    :func:`jobs.core.trust.update_hosts`: the folded rows' evidence sums (float) and
    ``urls_known``, outer-joined with the health counts of the day's clean logs
    (:data:`HEALTH_SUMS`), the host's politeness (:data:`POLITENESS`, from its rows) and the
    latest Retry-After wait its 429/503 rows asked for and the spacing its 429s asked for
    (:func:`jobs.core.host_health.retry_after_columns`). A host with only one side has NaN in the
    other's columns."""
    ev = folded.groupby("host", sort=True)[EVIDENCE].sum().astype(float)
    ev["urls_known"] = folded.groupby("host", sort=True).size().astype(np.int64)
    st = pd.to_numeric(logs["status"]).to_numpy(dtype=float)
    elapsed = (pd.to_numeric(logs["elapsed_ms"]).to_numpy(dtype=float) if "elapsed_ms" in logs
               else np.full(len(logs), np.nan))
    counts = pd.DataFrame({
        "host": logs["host"].to_numpy(dtype=object), "fetches": np.ones(len(logs), np.int64),
        "timeouts": (st == 0).astype(np.int64), "errors_5xx": (st >= 500).astype(np.int64),
        "throttled_429": (st == 429).astype(np.int64),
        "throttled": ((st == 429) | (st == 503)).astype(np.int64), "latency_sum_ms": elapsed,
        "latency_n": (~np.isnan(elapsed)).astype(np.int64)})
    for c in POLITENESS:
        counts[c] = (pd.to_numeric(logs[c]).to_numpy(dtype=float) if c in logs
                     else np.full(len(logs), np.nan))
    by_host = counts.groupby("host", sort=True)
    health = by_host[[c for c in HEALTH_SUMS if c != "latency_sum_ms"]].sum()
    health["latency_sum_ms"] = by_host["latency_sum_ms"].sum(min_count=1)  # all null: null
    health = health.join(by_host[list(POLITENESS)].first())
    if "retry_after" in logs and len(logs):
        health = health.join(host_health.retry_after_columns(
            logs["host"].to_numpy(dtype=object), st, logs["retry_after"].to_numpy(dtype=object),
            epoch_seconds(logs["fetched_at"]), max_block_s=max_block_s))
    today = ev.join(health[[c for c in health.columns]], how="outer")
    return today.rename_axis("host").reset_index()


def _figures(day: str, folded: pd.DataFrame, stale_rows: int) -> dict:
    return {"dt": day, "urls_known": len(folded),
            "urls_gone": int(folded["gone"].astype(bool).sum()) if len(folded) else 0,
            "urls_pending_signal": int(folded["pending_signal_at"].notna().sum()),
            "audit_n": int(folded["ev_audit_n"].sum()),
            "audit_fresh": int(folded["ev_audit_fresh"].sum()), "stale_rows": stale_rows,
            **{k: int(folded[ev].sum()) for k, ev in observations.FETCH_FIGURES.items()}}


def _outage_figures(day: str, state: pd.DataFrame) -> dict:
    """An outage day's figures: the carried state's counts, nothing fetched or audited."""
    return {"dt": day, "urls_known": len(state),
            "urls_gone": int(state["gone"].astype(bool).sum()) if len(state) else 0,
            "urls_pending_signal": int(state["pending_signal_at"].notna().sum()),
            "audit_n": 0, "audit_fresh": 0, "stale_rows": 0}


def _empty_folded() -> pd.DataFrame:
    return pd.DataFrame(columns=state_update.STATE_COLUMNS + EVIDENCE)


def replay(logs: pd.DataFrame, signals: Optional[pd.DataFrame], days: Sequence[str],
           update: UpdateParams, trust_params: TrustParams,
           state: Optional[pd.DataFrame] = None, hosts: Optional[pd.DataFrame] = None,
           outage_days: Sequence[str] = ()) -> Replay:
    """Fold ``days`` (in order) into one bucket of hosts, as the daily runs would.

    Parameters
    ----------
    logs : DataFrame
        The clean fetch-log rows of all ``days`` of the bucket's hosts, with ``dt`` (the
        day, YYYY-MM-DD): url, host, fetched_at, status, etag, last_modified,
        content_hash, and optionally conditional, lane, elapsed_ms.
    signals : DataFrame, optional
        Their clean push signals: dt, url, host, signaled_at.
    days : sequence of str
        Every day to fold, in order; a day without rows still decays and rewrites the
        bucket's rows, as the daily run does.
    state, hosts : DataFrame, optional
        The rows before the first day (default: none; ``jobs.rebuild_state`` starts from
        nothing).
    outage_days : sequence of str
        Days the fleet did not fetch (``jobs.outage``): not folded; the state and hosts of
        the day before are carried forward unchanged, as the daily run carries them.
    """
    state = (state_update.empty_state() if state is None
             else state.reindex(columns=state_update.STATE_COLUMNS))
    hosts = pd.DataFrame(columns=list(trust.HOST_COLUMNS)) if hosts is None else hosts
    logs_by_day = dict(tuple(logs.groupby("dt", sort=False))) if len(logs) else {}
    sig_by_day = (dict(tuple(signals.groupby("dt", sort=False)))
                  if signals is not None and len(signals) else {})
    no_logs = logs.iloc[0:0]
    folded = _empty_folded()
    hosts_out, figures, stale_out = [], [], []
    outage = set(outage_days)
    for day in days:
        if day in outage:
            hosts_out.append(hosts.assign(dt=day))
            figures.append(_outage_figures(day, state))
            continue
        day_logs, stale = split_stale(logs_by_day.get(day, no_logs), state)
        if len(stale):
            stale_out.append(stale.assign(dt=day))
        day_logs = with_trust(day_logs, hosts)
        sig = sig_by_day.get(day)
        if len(day_logs) or len(state):
            # No λ estimate: no later fold reads λ, and the caller estimates the last
            # day's with the group priors.
            folded = state_update.fold_day(
                state, day_logs, day, update,
                signals=None if sig is None else with_trust(sig, hosts), estimate=False)
        else:  # nothing known and nothing fetched: the daily fold writes no rows either
            folded = _empty_folded()
        today = host_today(folded, day_logs, trust_params.health.max_retry_after_s)
        if len(hosts) or len(today):
            hosts = trust.update_hosts(hosts, today, day, trust_params)
        hosts_out.append(hosts.assign(dt=day))
        figures.append(_figures(day, folded, int(stale["rows"].sum())))
        state = folded.reindex(columns=state_update.STATE_COLUMNS)
    stale_cols = ["dt", "url", "last_fetch_at", "rows"]
    return Replay(
        state=folded,
        hosts=(pd.concat(hosts_out, ignore_index=True) if hosts_out
               else pd.DataFrame(columns=list(trust.HOST_COLUMNS) + ["dt"])),
        figures=pd.DataFrame(figures, columns=["dt", *FIGURES]),
        stale=(pd.concat(stale_out, ignore_index=True)[stale_cols] if stale_out
               else pd.DataFrame(columns=stale_cols)))
