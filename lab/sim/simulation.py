"""A steppable simulation: the web, the crawler's copies and server load, day by day.

Each :meth:`Simulation.step` executes one day's schedule against the web,
accounts freshness exactly, and (given a root) writes that day's
``fetch_logs``, ``signals`` and ``frontier`` partitions in contract format.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lab.sim import truth
from lab.sim.contract import (FETCH_LOG_SCHEMA, FRONTIER_SCHEMA, SIGNALS_SCHEMA, partition_dir,
                               write_table)
from lab.sim.fetcher import HostLoad, Requests, fetch_log_table, respond
from lab.sim.httpdate import parse_http_dates
from lab.sim.params import WebParams
from lab.sim.rand import parse_hex
from lab.sim.web import SyntheticWeb

_US_PER_DAY = 86_400_000_000


@dataclass
class StepResult:
    """One simulated day: contract tables and the day's truth record."""

    day: int
    fetch_log: pa.Table
    signals: pa.Table
    frontier: pa.Table
    record: dict
    not_issued: int = 0


class Simulation:
    """Web + crawler copies + server load, stepped one day at a time.

    Parameters
    ----------
    params : WebParams
    root : path, optional
        Where :meth:`step` writes partitions; nothing is written if None.
    shards : iterable of int, optional
        Host shards to simulate (default all).
    """

    def __init__(self, params: WebParams, root: str | Path | None = None, shards=None):
        self.params = params
        self.web = SyntheticWeb(params, shards)
        self.copies = truth.CopyState()
        self.load = HostLoad(params.n_hosts)
        self.root = Path(root) if root is not None else None
        self.records: list[dict] = []
        self.next_day = 0
        # Per page, days observed and days fresh so far (truth), for per-class figures.
        self.page_obs_days = np.zeros(0)
        self.page_fresh_days = np.zeros(0)

    # ------------------------------------------------------------- stepping
    def step(self, day, schedule: pd.DataFrame) -> StepResult:
        """Execute ``schedule`` (planner ``schedules`` rows) on ``day`` (int, date or ISO string).

        Rows are issued at ``max(not_before, day start)``; rows at or after the
        day's end are not issued (counted in ``not_issued``). Rows of lane ``audit`` are
        issued as full GETs and logged with lane ``audit``, but are measurement-only: they do
        not update the crawler's copy (production semantics of the freshness audit).
        """
        d = self.params.day_index(day)
        req, dropped = requests_from_schedule(self.web, schedule, d, self.next_day)
        log, record = self.run_requests(req, d)
        result = StepResult(d, log, self.signals_table(d), self.frontier_table(d), record, dropped)
        if self.root is not None:
            date = self.params.date_of(d)
            write_table(log, partition_dir(self.root, "fetch_logs", date) / "part-00000.parquet",
                        FETCH_LOG_SCHEMA)
            write_table(result.signals, partition_dir(self.root, "signals", date) / "part-00000.parquet",
                        SIGNALS_SCHEMA)
            write_table(result.frontier, partition_dir(self.root, "frontier", date) / "part-00000.parquet",
                        FRONTIER_SCHEMA)
        return result

    def run_requests(self, req: Requests, day: int, resp_out: list | None = None):
        """Answer ``req`` on ``day``, account the day; returns (fetch_log table, record).

        Days skipped since the last call are accounted with no fetches.
        ``resp_out``, if given, receives the raw response dict.
        """
        if day < self.next_day:
            raise ValueError(f"day {day} already simulated; next is {self.next_day}")
        while self.next_day < day:
            self._account(self.next_day, Requests(*_empty_requests()), None)
        resp = respond(self.web, self.load, req, day)
        if resp_out is not None:
            resp_out.append(resp)
        record = self._account(day, req, resp)
        return fetch_log_table(self.web, req, resp), record

    def _account(self, day: int, req: Requests, resp: dict | None) -> dict:
        self.web.advance_to(day)
        if resp is None:
            resp = {"status": np.empty(0, np.int32), "outcome": np.empty(0, np.int8),
                    "version": np.empty(0, np.int64), "bytes": np.empty(0, np.int64),
                    "gap_violation": np.empty(0, bool), "cap_violation": np.empty(0, bool),
                    "over_quota": np.empty(0, bool)}
        # Lane ``audit`` rows are measurement-only (the contract): answered by the server and
        # logged, but they neither replace the crawler's copy nor count as its visits.
        audit = (np.asarray(pc.fill_null(pc.equal(req.lane, "audit"), False), dtype=bool)
                 if len(req) else np.zeros(0, bool))
        on_page = (req.page >= 0) & ~audit
        sums = truth.account_day(self.web, self.copies, day, req.page[on_page], req.t[on_page],
                                 resp["outcome"][on_page], resp["version"][on_page])
        status = resp["status"]
        self.page_obs_days = _add_grown(self.page_obs_days, sums["page_obs"])
        self.page_fresh_days = _add_grown(self.page_fresh_days, sums["page_fresh"])
        record = {k: v for k, v in sums.items() if not k.startswith("page_")}
        record.update(day=day, fetches=len(status), bytes=int(resp["bytes"].sum()),
                      status_200=int((status == 200).sum()), status_304=int((status == 304).sum()),
                      status_404=int(np.isin(status, (404, 410)).sum()),
                      status_503=int((status == 503).sum()), status_429=int((status == 429).sum()),
                      over_quota=int(resp["over_quota"].sum()),
                      status_error=int(((status == 0) | (status >= 500) & (status != 503)).sum()),
                      gap_violations=int(resp["gap_violation"].sum()),
                      cap_violations=int(resp["cap_violation"].sum()))
        self.records.append(record)
        self.next_day = day + 1
        return record

    # -------------------------------------------------------------- outputs
    def signals_table(self, day: int) -> pa.Table:
        """Contract ``signals`` rows visible during ``day``."""
        df = self.web.signals.for_day(day, self.web.pages)
        return pa.table({"url": pa.array(df["url"].to_numpy(object), pa.string()),
                         "signaled_at": self._ts(df["signaled_at"].to_numpy()),
                         "source": pa.array(df["source"].to_numpy(object), pa.string())},
                        schema=SIGNALS_SCHEMA)

    def frontier_table(self, day: int) -> pa.Table:
        """Contract ``frontier`` rows: pages discovered during ``day``."""
        df = self.web.frontier_for_day(day)
        imp = df["importance"].to_numpy()
        return pa.table({"url": pa.array(df["url"].to_numpy(object), pa.string()),
                         "discovered_at": self._ts(df["discovered_at"].to_numpy()),
                         "importance": pa.array(imp, pa.float64(), mask=np.isnan(imp))},
                        schema=FRONTIER_SCHEMA)

    def _ts(self, days: np.ndarray) -> pa.Array:
        us = self.params.start_epoch_s * 1_000_000 + np.round(days * _US_PER_DAY).astype(np.int64)
        return pa.array(us, pa.int64()).cast(FETCH_LOG_SCHEMA.field("fetched_at").type)

    def daily(self) -> pd.DataFrame:
        """Daily truth records so far."""
        return pd.DataFrame(self.records)

    def metrics(self, first_day=None, last_day=None, budget: float | None = None) -> dict:
        """Window truth metrics (see :func:`lab.sim.truth.summarize`); bounds inclusive."""
        days = self.daily()
        lo = self.params.day_index(first_day) if first_day is not None else days["day"].min()
        hi = self.params.day_index(last_day) if last_day is not None else days["day"].max()
        window = days[(days["day"] >= lo) & (days["day"] <= hi)]
        end = self.next_day
        pg = self.web.pages
        alive = (pg.born < end) & (pg.dies > end) & (pg.discovered < end)
        self.copies.grow(pg.born)
        return truth.summarize(window, budget, self.copies, alive)


def _add_grown(total: np.ndarray, day: np.ndarray) -> np.ndarray:
    """``total + day`` per page, where pages born since are appended (zeros before)."""
    out = np.zeros(max(len(total), len(day)))
    out[:len(total)] += total
    out[:len(day)] += day
    return out


def _empty_requests():
    return (np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, object), np.empty(0),
            np.empty(0, np.uint64), np.empty(0, bool), np.empty(0, np.int64), np.empty(0, bool),
            pa.nulls(0, pa.string()))


def requests_from_schedule(web: SyntheticWeb, schedule: pd.DataFrame, day: int,
                           first_allowed_day: int = 0) -> tuple[Requests, int]:
    """Turn planner ``schedules`` rows into a sorted request batch for ``day``.

    Returns the batch and the number of rows not issued (``not_before`` at or
    after the end of the day).
    """
    missing = {"url", "not_before", "method"} - set(schedule.columns)
    if missing:
        raise ValueError(f"schedule lacks columns {sorted(missing)}")
    if day < first_allowed_day:
        raise ValueError(f"day {day} already simulated")
    methods = schedule["method"].astype(object)
    bad = ~methods.isin(["conditional", "full"])
    if bad.any():
        raise ValueError(f"unknown method values: {sorted(set(methods[bad].astype(str)))[:5]}")
    p = web.params
    web.advance_to(day)
    nb = pd.to_datetime(schedule["not_before"], utc=True)
    # Unit-agnostic: a schedule read from Parquet arrives in µs, one built in pandas in ns.
    us = ((nb - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(1, "us")).to_numpy(np.int64)
    t = (us - p.start_epoch_s * 1_000_000) / _US_PER_DAY
    t = np.maximum(t, float(day))
    keep = t < day + 1
    sched = schedule[keep]
    t = t[keep]
    urls = sched["url"].to_numpy(object)
    page = web.page_ids(urls)
    host_names = sched["host"] if "host" in sched else pd.Series(urls).str.split("/").str[2]
    host_idx = pd.Index(web.hosts.name).get_indexer(pd.Index(host_names.to_numpy(object)))
    host = np.where(page >= 0, web.pages.host[np.maximum(page, 0)], host_idx).astype(np.int32)
    cond = (sched["method"] == "conditional").to_numpy()
    n = len(sched)
    if "if_none_match" in sched:
        inm, inm_present = parse_hex(pa.array(sched["if_none_match"].to_numpy(object), pa.string()),
                                     quote=True)
    else:
        inm, inm_present = np.zeros(n, np.uint64), np.zeros(n, bool)
    if "if_modified_since" in sched:
        ims, ims_ok = parse_http_dates(pa.array(sched["if_modified_since"].to_numpy(object),
                                                pa.string()))
    else:
        ims, ims_ok = np.zeros(n, np.int64), np.zeros(n, bool)
    lane = (pa.array(sched["lane"].to_numpy(object), pa.string()) if "lane" in sched
            else pa.nulls(n, pa.string()))
    req = Requests(page, host, urls, t, inm, inm_present & cond, ims, ims_ok & cond, lane)
    return req.take(np.argsort(t, kind="stable")), int((~keep).sum())
