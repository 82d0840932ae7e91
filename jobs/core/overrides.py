"""The operator's overrides (the ``overrides/`` table): checked, and in force on a run date.

Pure pandas. :func:`check` splits the table's rows into the valid ones and the quarantined
ones with a reason; :func:`in_force` keeps the valid rows that apply to the run planning the
day ``window_day`` (D+1). Actions:

==========  =====================================================================
pin         the URL's visits/day (``visits_per_day``), capped at its host's daily cap
pause_host  no visit to ``host`` in a window that starts before ``until``
force       one visit to the URL at the start of the next planned window, unless the
            URL was fetched after ``created_at``
forget      the URL is not planned (its state row stays, so removing the row restores it)
==========  =====================================================================

``until`` (a date) ends pin, force and forget too: they apply to the windows that start
before it. Two valid rows with the same action and target are both quarantined
(``duplicate_override``): which one the operator meant is theirs to say.
"""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd

from jobs.core import hosts as hostlib
from jobs.core.urls import canonical_url

ACTIONS = ("pin", "pause_host", "force", "forget")
URL_ACTIONS = ("pin", "force", "forget")
MAX_VISITS_PER_DAY = 1440.0  # one a minute: no host's politeness allows more
COLUMNS = ("action", "url", "host", "visits_per_day", "until", "created_at", "note")


def _row_json(row: dict) -> str:
    return json.dumps({k: (None if v is None or (isinstance(v, float) and np.isnan(v))
                           else str(v) if not isinstance(v, (int, float, str, bool)) else v)
                       for k, v in row.items()}, sort_keys=True)


def _missing(v) -> bool:
    return v is None or v is pd.NaT or (isinstance(v, float) and np.isnan(v)) or (
        not isinstance(v, str) and pd.isna(v))


def row_problem(row: dict, max_url_length: int) -> str | None:
    """The quarantine reason of one override row, or None when it is valid."""
    action = row.get("action")
    if action not in ACTIONS:
        return "bad_action"
    if action in URL_ACTIONS:
        if _missing(row.get("url")):
            return "missing_url"
        problem = hostlib.url_problem(row["url"], max_url_length)
        if problem:
            return problem
    if action == "pause_host":
        if _missing(row.get("host")):
            return "missing_host"
        if hostlib.normalize_host(row["host"]) is None:
            return "bad_host"
        if _missing(row.get("until")):
            return "missing_until"
    if action == "pin":
        v = row.get("visits_per_day")
        if _missing(v) or not 0 < float(v) <= MAX_VISITS_PER_DAY:
            return "bad_visits_per_day"
    if action == "force" and _missing(row.get("created_at")):
        return "missing_created_at"
    return None


def check(table: pd.DataFrame, max_url_length: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(valid rows, quarantined rows) of the overrides table.

    The valid rows get ``target`` (the URL, or the normalised host of a pause) and
    ``host`` (a URL's normalised host); the quarantined ones are ``reason``, ``url`` and
    ``row_json`` (the quarantine contract, without ``source``).
    """
    table = table.reindex(columns=list(COLUMNS))
    rows = table.to_dict("records")
    reasons = [row_problem(r, max_url_length) for r in rows]
    ok = np.array([r is None for r in reasons], dtype=bool)
    valid = table[ok].copy()
    valid["url"] = [canonical_url(r["url"]) if r["action"] in URL_ACTIONS else r["url"]
                    for r in valid.to_dict("records")]  # any spelling names the page
    valid["target"] = [r["url"] if r["action"] in URL_ACTIONS else
                       hostlib.normalize_host(r["host"]) for r in valid.to_dict("records")]
    valid["host"] = [hostlib.url_host(r["url"]) if r["action"] in URL_ACTIONS else r["target"]
                     for r in valid.to_dict("records")]
    dup = valid.duplicated(["action", "target"], keep=False).to_numpy()
    bad_rows = [(reason, r) for reason, r in zip(reasons, rows) if reason is not None]
    bad_rows += [("duplicate_override", r) for r in table[ok][dup].to_dict("records")]
    quarantined = pd.DataFrame({
        "reason": [reason for reason, _ in bad_rows],
        "url": [None if _missing(r.get("url")) else str(r["url"]) for _, r in bad_rows],
        "row_json": [_row_json(r) for _, r in bad_rows]}, columns=["reason", "url", "row_json"])
    return valid[~dup].reset_index(drop=True), quarantined


def _as_date(v) -> dt.date | None:
    if _missing(v):
        return None
    return pd.Timestamp(v).date()


def in_force(valid: pd.DataFrame, window_day: str) -> pd.DataFrame:
    """The valid overrides that apply to the window starting ``window_day`` (D+1): those
    whose ``until`` is null or after it (a pause: after it, i.e. the host may not be
    fetched that day)."""
    day = dt.date.fromisoformat(window_day)
    until = [_as_date(v) for v in valid["until"]] if len(valid) else []
    keep = np.array([u is None or u > day for u in until], dtype=bool)
    return valid[keep].reset_index(drop=True)


def page_columns(active: pd.DataFrame) -> pd.DataFrame:
    """Per overridden URL: ``pin_rate`` (visits/day or NaN), ``force_after`` (epoch seconds
    or NaN: visit unless fetched after it) and ``forget`` (bool), one row per URL."""
    urls = active[active["action"].isin(URL_ACTIONS)]
    if urls.empty:
        return pd.DataFrame({"url": pd.Series(dtype=object), "pin_rate": pd.Series(dtype=float),
                             "force_after": pd.Series(dtype=float),
                             "forget": pd.Series(dtype=bool)})
    created = pd.to_datetime(urls["created_at"], utc=True, errors="coerce")
    frame = pd.DataFrame({
        "url": urls["target"].to_numpy(object),
        "pin_rate": np.where(urls["action"] == "pin",
                             pd.to_numeric(urls["visits_per_day"], errors="coerce"), np.nan),
        "force_after": np.where(urls["action"] == "force",
                                created.map(lambda t: t.timestamp() if pd.notna(t) else np.nan)
                                .to_numpy(float), np.nan),
        "forget": (urls["action"] == "forget").to_numpy(bool)})
    return (frame.groupby("url", as_index=False)
            .agg(pin_rate=("pin_rate", "max"), force_after=("force_after", "max"),
                 forget=("forget", "max")))


def paused_hosts(active: pd.DataFrame) -> list[str]:
    """The hosts paused for the window (sorted)."""
    return sorted(set(active.loc[active["action"] == "pause_host", "target"]))


def describe(row: dict) -> str:
    """One line for people: what the override does (explain, the report)."""
    note = f" ({row['note']})" if not _missing(row.get("note")) else ""
    until = _as_date(row.get("until"))
    upto = f" until {until}" if until else ""
    a = row["action"]
    if a == "pin":
        text = f"pin {row['target']} at {float(row['visits_per_day']):g} visits/day{upto}"
    elif a == "pause_host":
        text = f"pause host {row['target']}: no fetch before {until}"
    elif a == "force":
        text = (f"force a fetch of {row['target']} on the next schedule (asked "
                f"{pd.Timestamp(row['created_at']).isoformat()}){upto}")
    else:
        text = f"forget {row['target']}: not planned{upto}"
    return text + note
