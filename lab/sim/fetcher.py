"""Simulated fetcher: issues requests against the synthetic web's servers.

Servers answer per their host's validator behaviour (see
``lab.sim.params.VALIDATOR_CLASSES``) and capacity: a request closer than
``crawl_delay_s`` to the previous request to the host, or beyond its
``max_fetches_per_day``, gets a 503. Hidden health (``lab.sim.population.make_health``):
a quota host answers 503 (no Retry-After) beyond its daily quota and slows down as the
day's count nears it; a throttle host answers 429 with ``Retry-After: <seconds>`` to a
request sooner than its interval after the previous one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from jobs.fleet.fingerprint import FINGERPRINT_VERSION
from lab.sim.contract import FETCH_LOG_SCHEMA
from lab.sim.httpdate import format_http_dates
from lab.sim.population import FROZEN_LM, HONEST, LM_ONLY, VOLATILE_ETAG
from lab.sim.rand import hex_strings, mix64, uniform
from lab.sim.truth import FULL, GONE, NO_EFFECT, NOT_MODIFIED

_US_PER_DAY = 86_400_000_000


@dataclass
class Requests:
    """A batch of requests, one day's worth, as parallel arrays.

    ``page`` is -1 for URLs the web does not know, ``host`` -1 for unknown
    hosts. ``inm``/``ims`` are the parsed If-None-Match ETag value and
    If-Modified-Since Unix seconds, meaningful where ``*_present``.
    """

    page: np.ndarray
    host: np.ndarray
    url: np.ndarray
    t: np.ndarray
    inm: np.ndarray
    inm_present: np.ndarray
    ims: np.ndarray
    ims_present: np.ndarray
    lane: pa.Array

    def __len__(self) -> int:
        return len(self.page)

    def take(self, idx: np.ndarray) -> "Requests":
        """Subset/reorder."""
        return Requests(self.page[idx], self.host[idx], self.url[idx], self.t[idx], self.inm[idx],
                        self.inm_present[idx], self.ims[idx], self.ims_present[idx],
                        self.lane.take(pa.array(idx, pa.int64())))


@dataclass
class Admission:
    """How each request of a batch fared against its server's capacity and health."""

    gap_violation: np.ndarray    # sooner than crawl_delay_s after the previous request
    cap_violation: np.ndarray    # beyond max_fetches_per_day
    over_quota: np.ndarray       # beyond the hidden daily quota (503)
    throttled: np.ndarray        # sooner than the hidden throttle interval (429)
    retry_after_s: np.ndarray    # the 429's Retry-After seconds (0 elsewhere)
    quota_load: np.ndarray       # the day's count / quota before the request (0: no quota)

    @classmethod
    def empty(cls, n: int) -> "Admission":
        false = np.zeros(n, bool)
        return cls(false, false.copy(), false.copy(), false.copy(), np.zeros(n, np.int64),
                   np.zeros(n))


class HostLoad:
    """What each server remembers of recent traffic: last request time, today's count."""

    def __init__(self, n_hosts: int):
        self.last_t = np.full(n_hosts, -np.inf)
        self.count = np.zeros(n_hosts, np.int64)
        self.day = None

    def admit(self, web, host: np.ndarray, t: np.ndarray, day: int) -> Admission:
        """Judge requests (sorted by time) against capacity and hidden health, and record
        them (every request counts towards the day's count and the last request time)."""
        if self.day != day:
            self.count[:] = 0
            self.day = day
        out = Admission.empty(len(host))
        ok = np.flatnonzero(host >= 0)
        if not len(ok):
            return out
        order = ok[np.lexsort((t[ok], host[ok]))]
        h, tt = host[order], t[order]
        same = np.append(False, h[1:] == h[:-1])
        prev = np.where(same, np.append(-np.inf, tt[:-1]), self.last_t[h])
        hs = web.hosts
        gap_s = (tt - prev) * 86400.0
        out.gap_violation[order] = gap_s < hs.crawl_delay_s[h] - 1e-3
        idx = np.arange(len(h))
        rank = idx - np.maximum.accumulate(np.where(~same, idx, 0))
        seen = rank + self.count[h]  # requests to the host earlier today
        cap = hs.max_fetches[h]
        out.cap_violation[order] = (cap >= 0) & (seen >= cap)
        quota = np.where(day < hs.quota_until[h], hs.quota[h], -1)
        out.over_quota[order] = (quota >= 0) & (seen >= quota)
        out.quota_load[order] = np.where(quota > 0, seen / np.maximum(quota, 1), 0.0)
        throttle = hs.throttle_s[h]
        throttled = (throttle > 0) & (gap_s < throttle - 1e-3)
        out.throttled[order] = throttled
        out.retry_after_s[order] = np.where(throttled, np.ceil(np.round(throttle - gap_s, 3)), 0).astype(np.int64)
        last = np.append(h[1:] != h[:-1], True)
        self.last_t[h[last]] = tt[last]
        np.add.at(self.count, h, 1)
        return out


def respond(web, load: HostLoad, req: Requests, day: int) -> dict:
    """Answer a day's requests (sorted by time). Returns response arrays.

    Keys: ``status``, ``version`` (-1 when no body), ``etag``/``etag_ok``,
    ``lm``/``lm_ok`` (Unix s), ``hash``/``hash_ok``, ``bytes``,
    ``elapsed``/``elapsed_ok``, ``conditional``, ``outcome`` (for truth
    accounting), ``gap_violation``, ``cap_violation``, ``over_quota``, ``throttled``,
    ``retry_after`` (seconds, meaningful where ``throttled``).
    """
    p = web.params
    n = len(req)
    t = req.t
    if n and (t.min() < day or t.max() >= day + 1):
        raise ValueError(f"request times must fall inside day {day}")
    web.advance_to(day)
    pg, hs = web.pages, web.hosts
    known = req.page >= 0
    pid = np.where(known, req.page, 0)
    key = np.where(known, pg.url_key[pid], np.uint64(0))
    t_us = np.round(t * _US_PER_DAY).astype(np.int64)
    adm = load.admit(web, req.host, t, day)
    u_err = uniform(key, t_us, 0xE1)
    u_noise = uniform(key, t_us, 0xB1)
    cls = np.where(req.host >= 0, hs.validator[np.maximum(req.host, 0)], -1)

    alive = known & (pg.born[pid] <= t) & (t < pg.dies[pid])
    dead = known & (t >= pg.dies[pid])
    status = np.full(n, 200, np.int32)
    status[alive] = 200
    status[~alive] = 404
    status[dead & pg.gone[pid]] = 410
    err = u_err < p.error_rate
    status[err] = np.where(u_err[err] < 0.6 * p.error_rate, 0,
                           np.where(u_err[err] < 0.9 * p.error_rate, 500, 502))
    status[adm.gap_violation | adm.cap_violation | adm.over_quota] = 503
    status[adm.throttled] = 429
    status[req.host < 0] = 0

    body = status == 200
    version = np.full(n, -1, np.int64)
    lc = np.zeros(n)
    if body.any():
        version[body] = web.version_at(pid[body], t[body])
        lc[body] = web.last_change(pid[body], t[body])
    start_s = p.start_epoch_s
    honest_lm = np.floor(start_s + lc * 86400.0).astype(np.int64)
    now_s = np.floor(start_s + t * 86400.0).astype(np.int64)
    frozen_s = np.floor(start_s + hs.frozen_lm_day[np.maximum(req.host, 0)] * 86400.0).astype(np.int64)
    lm = np.select([cls == FROZEN_LM, cls == VOLATILE_ETAG], [frozen_s, now_s], honest_lm)
    lm_ok = body & np.isin(cls, [HONEST, LM_ONLY, FROZEN_LM, VOLATILE_ETAG])
    etag = np.where(cls == VOLATILE_ETAG, mix64(key, t_us, 0xE7),
                    mix64(key, version, 0xE7A6)) | np.uint64(1)
    etag_ok = body & np.isin(cls, [HONEST, VOLATILE_ETAG])

    conditional = req.inm_present | req.ims_present
    by_etag = req.inm_present & (cls == HONEST)
    not_mod = np.where(by_etag, req.inm == etag,
                       req.ims_present & np.isin(cls, [HONEST, LM_ONLY, FROZEN_LM]) & (lm <= req.ims))
    not_mod &= body
    status[not_mod] = 304
    full = body & ~not_mod

    base = pg.base_bytes[pid].astype(float)
    size = base * (1.0 + 0.1 * (uniform(key, version, 0xB2) - 0.5))
    size = np.where(cls == VOLATILE_ETAG, size * (1.0 + 0.04 * (u_noise - 0.5)), size)
    nbytes = np.select([full, status == 304, status == 0], [size, 250 + 100 * u_noise, 0.0],
                       400 + 200 * u_noise).astype(np.int64)
    # A quota host slows down as the day's count nears its quota (x4 at the quota).
    slow = 1.0 + 3.0 * np.minimum(adm.quota_load, 1.0) ** 2
    elapsed = ((30 + nbytes / 2000.0 + 300 * u_noise ** 3) * slow).astype(np.int32)
    outcome = np.select([full, status == 304, (status == 404) | (status == 410)],
                        [FULL, NOT_MODIFIED, np.where(dead, GONE, NO_EFFECT)], NO_EFFECT)
    return {
        "status": status, "version": np.where(full, version, -1),
        "etag": etag, "etag_ok": etag_ok & (full | not_mod),
        "lm": lm, "lm_ok": lm_ok & (full | not_mod),
        "hash": web.content_hash_u64(pid, version), "hash_ok": full,
        "bytes": nbytes, "elapsed": elapsed, "elapsed_ok": status != 0,
        "conditional": conditional, "outcome": outcome.astype(np.int8),
        "gap_violation": adm.gap_violation, "cap_violation": adm.cap_violation,
        "over_quota": adm.over_quota, "throttled": adm.throttled & (status == 429),
        "retry_after": adm.retry_after_s,
    }


def fetch_log_table(web, req: Requests, resp: dict) -> pa.Table:
    """Contract-format ``fetch_logs`` rows for answered requests."""
    p = web.params
    host_names = np.where(req.host >= 0, web.hosts.name[np.maximum(req.host, 0)], None)
    fetched = pa.array(p.start_epoch_s * 1_000_000 + np.round(req.t * _US_PER_DAY).astype(np.int64),
                       pa.int64()).cast(FETCH_LOG_SCHEMA.field("fetched_at").type)
    return pa.table({
        "url": pa.array(req.url, pa.string()),
        "host": pa.array(host_names, pa.string()),
        "fetched_at": fetched,
        "status": pa.array(resp["status"], pa.int32()),
        "conditional": pa.array(resp["conditional"], pa.bool_()),
        "etag": hex_strings(resp["etag"], quote=True, valid=resp["etag_ok"]),
        "last_modified": format_http_dates(resp["lm"], valid=resp["lm_ok"]),
        "content_hash": hex_strings(resp["hash"], valid=resp["hash_ok"]),
        "bytes": pa.array(resp["bytes"], pa.int64()),
        "elapsed_ms": pa.array(resp["elapsed"], pa.int32(), mask=~resp["elapsed_ok"]),
        "lane": req.lane.cast(pa.string()),
        "fingerprint_version": pa.array(np.full(len(req.url), FINGERPRINT_VERSION), pa.int32()),
        "retry_after": pa.array(resp["retry_after"].astype(str).astype(object), pa.string(),
                                mask=~resp["throttled"]),
    }, schema=FETCH_LOG_SCHEMA)
