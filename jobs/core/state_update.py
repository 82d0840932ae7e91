"""Fold one day's fetch-log rows (and push signals) into the per-URL state (pure pandas).

Called by ``jobs.update_state`` once per URL-hash bucket, with yesterday's state rows
and today's clean log and signal rows of the same URLs. Fetches of one URL within the
day are applied in time order; the loop is over "k-th fetch of the day", vectorised over
URLs, so its length is the largest number of fetches of any one URL that day.

What a fetch means is decided in :mod:`jobs.core.observations` (the observation rules,
validator evidence, signal scoring). Observations are folded into the decayable
sufficient statistics of :mod:`jobs.core.estimators_stats` (``STATS_COLUMNS``): the
statistics are first decayed by ``2^(-Δ/h)`` for the Δ days since the row was last
written, then the day's observations are added, so a day's update needs only
yesterday's row and today's logs and replaying days one by one (``jobs.rebuild_state``)
gives the same result as the daily runs. λ is estimated afterwards (with the group
priors of the day, see :func:`estimate_with_priors`).

Every row also carries the day's per-URL evidence (``EVIDENCE_COLUMNS``) that Spark sums
per host for the hosts table; those columns are not part of the state contract.

Fingerprint versions: each row stores the ``fingerprint_version`` of its hash (a state
written before the column reads as :data:`LEGACY_FINGERPRINT_VERSION` where it holds a hash).
A 2xx whose version differs from the stored one re-bases the hash: it stores the new hash and
version and confirms the copy (``last_known_at``), but counts neither a change nor a
no-change, unless a trusted validator compares the two copies
(:func:`jobs.core.observations.classify_fetch`): the day the fleet upgrades its fingerprint
is not a day on which every fetched page changed. An audit fetch of another version is not
scored.

Freshness audit: fetch-log rows with ``lane == 'audit'`` are measurement-only.
Each one (status 200 with a content hash, for a URL with a stored hash) is scored fresh iff
its hash equals the stored hash *as of its fetch time* (rows are taken in ``fetched_at``
order, so a policy fetch earlier the same day has already replaced the stored hash); it
changes nothing else: not the stored hash or validators, last fetch, interval, estimator
statistics or validator evidence. Rows of any other lane are never scored as audits (the
policy times its own fetches when a change is likely, which would bias the estimate).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobs.core import adaptive, estimators_stats as es, http_fields, observations as ob
from jobs.core import signal_evidence, timing
from jobs.core.estimators import estimate_rate
from jobs.core.estimators_shrinkage import GROUP_PRIOR_FAMILY
from jobs.core.times import epoch_seconds as _to_seconds
from jobs.core.times import DAY_S
from jobs.core.times import from_epoch_seconds as _from_seconds

BASE_COLUMNS = [
    "url", "host", "first_seen", "last_fetch_at", "last_status", "last_success_at",
    "last_change_at", "last_known_at", "etag", "last_modified", "content_hash", "interval_s",
    "lambda_hat", "lambda_lo", "lambda_hi", "lambda_prior", "n_fetches", "n_observations",
    "n_changes", "exposure_days", "n_errors", "consecutive_gone", "gone", "signal_claim_at",
    "pending_signal_at", "importance", "lane", "updated_dt",
]
#: A Last-Modified this close to its response is the server's clock, not a modification:
#: dynamic pages send ``Last-Modified: <now>``, and HTTP-date counts whole seconds.
LAST_MODIFIED_NOW_S = 2.0

#: The stored copy's size (bytes of the last 2xx that carried a content hash), what a 304
#: of it saved.
SIZE_COLUMN = "content_bytes"
#: The fingerprint version of the stored ``content_hash`` (docs/fingerprint.md): hashes of
#: different versions are never compared. Null where no hash is stored.
VERSION_COLUMN = "fingerprint_version"
#: The version of a hash stored, or logged, before the version was recorded: the only one
#: there was (state and fetch logs written before the column, or a null in it).
LEGACY_FINGERPRINT_VERSION = 1
#: The start of the day a trusted push signal said the stored copy was still current
#: (jobs.core.signal_evidence); null once a later fetch confirmed the copy.
UNCHANGED_COLUMN = "signal_unchanged_at"
STATE_COLUMNS = (BASE_COLUMNS + list(es.STATS_COLUMNS) + list(timing.TIMING_COLUMNS)
                 + [SIZE_COLUMN, VERSION_COLUMN, UNCHANGED_COLUMN])


@dataclass(frozen=True)
class UpdateParams:
    """``[intervals]``, ``policy.gone_after`` and ``[estimation]`` as the fold needs them
    (built by :func:`jobs.params.update_params`; defaults only in ``jobs.config``)."""

    floor_s: float
    cap_s: float
    initial_s: float
    gone_after: int
    half_life_days: float
    level: float
    timing: timing.TimingParams
    age_at_first_fetch: bool


def empty_state() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in STATE_COLUMNS})


def importance_by_url(urls: pd.Series, weights: pd.Series) -> pd.Series:
    """One weight per URL, indexed by URL: duplicates resolve to the largest (the pandas
    twin of jobs.ingest.importance_by_url, which rebuild_state uses)."""
    return pd.Series(pd.to_numeric(weights).to_numpy(float),
                     index=urls.to_numpy(dtype=object)).groupby(level=0).max()


def _col(frame, name, default):
    return pd.array(frame[name], dtype="boolean").fillna(default).to_numpy(dtype=bool) \
        if name in frame else \
        np.full(len(frame), default, dtype=bool)


def _numbers(frame, name) -> np.ndarray:
    """``frame[name]`` as floats (NaN where null), all NaN when the column is absent (a
    state written before it, logs without it)."""
    if name not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name]).to_numpy(dtype=float, na_value=np.nan).copy()


def _add_new_urls(state: pd.DataFrame, logs: pd.DataFrame) -> pd.DataFrame:
    state = state.reset_index(drop=True)
    new_urls = pd.Index(logs["url"].unique()).difference(pd.Index(state["url"]))
    if len(new_urls):
        # Reindexing adds all-missing rows for new URLs without concat's dtype pitfalls;
        # by position, so the wide frame is copied once (not by url, renamed and reset).
        host_of = logs.drop_duplicates("url").set_index("url")["host"]
        urls = np.concatenate([state["url"].to_numpy(object), new_urls.to_numpy(object)])
        hosts = np.concatenate([state["host"].to_numpy(object),
                                host_of.loc[new_urls].to_numpy(object)])
        state = state.reindex(pd.RangeIndex(len(urls)))
        state["url"], state["host"] = urls, hosts
    return state


def _stats(state: pd.DataFrame, run_date: str, half_life_days: float):
    """Yesterday's statistics and time-of-day sums (zeros for new URLs, and for rows written
    before the sums existed), decayed to ``run_date``."""
    stats = state[list(es.STATS_COLUMNS)].apply(pd.to_numeric).fillna(0.0).astype(float)
    written = pd.to_datetime(state["updated_dt"])
    elapsed = np.clip(((pd.Timestamp(run_date) - written) / pd.Timedelta(1, "D"))
                      .fillna(0.0).to_numpy(float), 0, None)
    sums = timing.stored(state)
    return (es.decay_stats(stats.reset_index(drop=True), elapsed, half_life_days),
            timing.decayed(sums, es.decay_factor(elapsed, half_life_days)))


def fold_day(state: pd.DataFrame, logs: pd.DataFrame, run_date: str,
             params: UpdateParams, signals: pd.DataFrame | None = None,
             estimate: bool = True) -> pd.DataFrame:
    """Return the new state (plus ``EVIDENCE_COLUMNS``) for every URL in ``state`` or ``logs``.

    Parameters
    ----------
    state : DataFrame
        Yesterday's rows (``STATE_COLUMNS``); may be empty.
    logs : DataFrame
        Today's clean fetch rows: url, host, fetched_at, status, etag, last_modified,
        content_hash, optionally conditional, and the host's ``trust_etag``,
        ``trust_lm`` (default False: 304s of unknown hosts are not evidence).
    run_date : str
        The logical date D (YYYY-MM-DD) written to ``updated_dt``.
    signals : DataFrame, optional
        Today's clean push signals: url, signaled_at, ``signal_trusted`` (the host's).
        A claim newer than the confirmed copy is armed; a trusted one not newer sets
        ``signal_unchanged_at`` (:func:`jobs.core.signal_evidence.no_change_evidence`).
        Signals of URLs absent from state and logs are left to allocate, which takes them
        into discovery (``signals.discover_from``).
    estimate : bool
        Estimate λ with the default prior (the rows' ``lambda_*`` columns). Callers that
        re-estimate with group priors afterwards (update_state, rebuild) pass False and
        get NaN there: the estimate is the fold's most expensive step.
    """
    audit_row = (logs["lane"].to_numpy(dtype=object) == "audit") if "lane" in logs \
        else np.zeros(len(logs), bool)
    # An audit fetch never creates state: audit rows of URLs unknown to state are dropped.
    state = _add_new_urls(state, logs[~audit_row])
    logs = logs[~audit_row | logs["url"].isin(state["url"]).to_numpy()]
    n = len(state)
    pos = pd.Series(np.arange(n), index=state["url"].to_numpy())
    stats, tod = _stats(state, run_date, params.half_life_days)
    lam_before = pd.to_numeric(state["lambda_hat"]).to_numpy(dtype=float)
    was_timed = timing.last_modified_is_change_bit(tod, params.timing, lam_before)
    # Where each page's day rhythm says its changes come (jobs.core.timing, "Rhythm checks").
    window_phase, window_half = timing.day_window(tod, params.timing, lam_before)

    last_fetch = _to_seconds(state["last_fetch_at"])
    last_success = _to_seconds(state["last_success_at"])
    last_change = _to_seconds(state["last_change_at"])
    last_known = _to_seconds(state["last_known_at"])
    first_seen = _to_seconds(state["first_seen"])
    claim = _to_seconds(state["signal_claim_at"])
    claim_trusted = ~np.isnan(_to_seconds(state["pending_signal_at"]))
    unchanged = (_to_seconds(state[UNCHANGED_COLUMN]) if UNCHANGED_COLUMN in state
                 else np.full(n, np.nan))
    last_status = pd.to_numeric(state["last_status"]).to_numpy(dtype=float)
    etag = state["etag"].to_numpy(dtype=object)
    lastmod = state["last_modified"].to_numpy(dtype=object)
    chash = state["content_hash"].to_numpy(dtype=object)
    size = _numbers(state, SIZE_COLUMN)
    version = _numbers(state, VERSION_COLUMN)
    version = np.where(np.isnan(version) & ~pd.isna(chash), LEGACY_FINGERPRINT_VERSION, version)
    interval = pd.to_numeric(state["interval_s"]).to_numpy(dtype=float)
    interval = np.where(np.isnan(interval), params.initial_s, interval)

    def counter(name, dtype=np.int64):
        return pd.to_numeric(state[name]).fillna(0).to_numpy(dtype=dtype)

    n_fetches, n_obs, n_chg = counter("n_fetches"), counter("n_observations"), counter("n_changes")
    n_err, gone_run = counter("n_errors"), counter("consecutive_gone")
    exposure = counter("exposure_days", float)
    ev = {c: np.zeros(n, np.int64) for c in ob.EVIDENCE_COLUMNS}

    if signals is not None and len(signals):
        _timing_of_claims(signals, pos, tod)
        claim, claim_trusted = _arm_claims(signals, pos, claim, claim_trusted, last_known, ev)
        unchanged = _unchanged_evidence(signals, pos, last_known, unchanged, run_date)

    logs = logs.sort_values(["url", "fetched_at", "status"], kind="mergesort")
    idx = pos.loc[logs["url"].to_numpy()].to_numpy()
    rank = logs.groupby("url", sort=False).cumcount().to_numpy()
    t_fetch = _to_seconds(logs["fetched_at"])
    status = logs["status"].to_numpy(dtype=np.int64)
    l_etag = logs["etag"].to_numpy(dtype=object)
    # RFC 9110 accepts three HTTP-date forms but sends IMF-fixdate only: every date is kept
    # in that form (an RFC 850 year read as of the row's fetch), ready for If-Modified-Since.
    l_lm = http_fields.normalise_http_dates(logs["last_modified"].to_numpy(dtype=object), t_fetch)
    l_hash = logs["content_hash"].to_numpy(dtype=object)
    l_bytes = _numbers(logs, "bytes")
    l_version = _numbers(logs, VERSION_COLUMN)
    l_version = np.where(np.isnan(l_version), LEGACY_FINGERPRINT_VERSION, l_version)
    l_trust_etag, l_trust_lm = _col(logs, "trust_etag", False), _col(logs, "trust_lm", False)
    # Only a trusted Last-Modified is ever read as a change time: parse just those.
    l_lm_s = np.full(len(logs), np.nan)
    l_lm_s[l_trust_lm] = http_fields.parse_http_dates(l_lm[l_trust_lm])
    is_audit = (logs["lane"].to_numpy(dtype=object) == "audit") if "lane" in logs \
        else np.zeros(len(logs), bool)  # (recomputed after the sort)
    obs_rows, obs_t, obs_chg, obs_lm = [], [], [], []
    # A page's first trusted observation also reads the age its first copy had (once: a page
    # with any trusted observation, decayed or not, has had it).
    aged = stats[es.LM_COUNT].to_numpy(float) > 0
    age_rows, age_days, age_since = [], [], []

    for k in range(int(rank.max()) + 1 if len(rank) else 0):
        sel = rank == k
        # Audit rows first: scored against the stored hash as it stands at their fetch
        # time (this k-th fetch of the URL), then left out of every other update.
        aud = sel & is_audit
        if aud.any():
            ia, ha = idx[aud], l_hash[aud]
            scored = ((status[aud] == 200) & ~pd.isna(ha) & ~pd.isna(chash[ia])
                      & (l_version[aud] == version[ia]))
            same = np.array([a == b for a, b in zip(ha, chash[ia])], dtype=bool)
            ev["ev_audit_n"][ia] += scored
            ev["ev_audit_fresh"][ia] += scored & same
        sel = sel & ~is_audit
        if not sel.any():
            continue
        i, t, st = idx[sel], t_fetch[sel], status[sel]
        n_fetches[i] += 1
        ev["ev_fetches"][i] += 1
        last_fetch[i] = t
        last_status[i] = st
        first_seen[i] = np.where(np.isnan(first_seen[i]), t, first_seen[i])

        baseline = ~pd.isna(chash[i]) & ~np.isnan(last_known[i])
        c = ob.classify_fetch(st, l_hash[sel], chash[i], baseline, etag[i], lastmod[i],
                              l_trust_etag[sel], l_trust_lm[sel],
                              same_version=l_version[sel] == version[i],
                              new_etag=l_etag[sel], new_lm=l_lm[sel])
        ev["ev_rebased"][i] += c["rebased"]
        interval_days = (t - last_known[i]) / DAY_S
        # Two fetches at the same instant carry no interval: not an observation.
        observed = c["observed"] & (interval_days > 0)
        changed = c["changed"] & observed
        # Trusted Last-Modified: changed fetches reveal the modification instant, unless
        # it is the response's own clock (no age, no instant: a plain changed bit).
        lm_age_s = t - l_lm_s[sel]
        lm_usable = l_trust_lm[sel] & observed & ~(changed & (lm_age_s <= LAST_MODIFIED_NOW_S))
        lm_info = np.where(lm_usable,
                           np.where(changed, np.clip(lm_age_s / DAY_S, 0, None), 0.0),
                           np.nan)
        # The modification instant dates the change for the rhythm (before a confirmed claim
        # may date it instead: claims count when they arrive). A timed page's instant carries
        # no rate information (it is visited just after it): a plain bit for λ.
        lm_dated = changed & np.isfinite(lm_info)
        lm_change_at = t - lm_info * DAY_S
        lm_info = np.where(was_timed[i], np.nan, lm_info)
        if params.age_at_first_fetch:
            first = lm_usable & ~aged[i] & ~was_timed[i]
            # The stored copy's Last-Modified (this fetch's replaces it below): a page whose
            # copy dates from before it was found was unchanged from then to its first fetch.
            rows_f, seen_f = i[first], first_seen[i[first]]
            age_s = seen_f - http_fields.parse_http_dates(lastmod[rows_f])
            known = np.isfinite(age_s) & (age_s > LAST_MODIFIED_NOW_S)  # not the server's clock
            age_rows.append(rows_f[known])
            age_days.append(age_s[known] / DAY_S)
            age_since.append((t[first] - seen_f)[known] / DAY_S)
        aged[i[lm_usable]] = True
        scored, dropped = ob.score_claims(observed, last_known[i], t, claim[i])
        # A confirmed claim dates a change but is no modification age: a sitemap's lastmod
        # (or a feed's newest entry) is the last change *it* saw, hours before this fetch for
        # a page that changed many times since. Read as "unchanged from the claim to the
        # fetch" it made a page changing 30 times a day look like 5.
        ev["ev_sig_correct"][i] += scored & changed
        ev["ev_sig_wrong"][i] += scored & ~changed
        claim[i] = np.where(scored | dropped, np.nan, claim[i])

        # When in the day and week it changed: a trusted Last-Modified instant, else a short
        # interval. A change a trusted claim announced was dated when the claim arrived
        # (_timing_of_claims): its Last-Modified would count the same change twice.
        claimed = scored & changed & claim_trusted[i]
        dated = lm_dated & ~claimed
        timing.add_changes(tod, i[dated], lm_change_at[dated], 1.0)
        # A change between the page's phase windows refutes its day rhythm.
        start_changed = ~np.isnan(last_change[i]) & (last_change[i] == last_known[i])
        off = changed & timing.off_phase(last_known[i], t, start_changed, window_phase[i],
                                         window_half[i])
        np.add.at(tod["tod_off_n"], i[off], 1.0)
        mid, arc_w = timing.arc_evidence(last_known[i], t, params.timing.max_arc_s)
        arc = changed & ~lm_dated & ~claimed & (arc_w > 0)
        timing.add_changes(tod, i[arc], mid[arc], arc_w[arc])

        obs_rows.append(i[observed])
        obs_t.append(interval_days[observed])
        obs_chg.append(changed[observed])
        obs_lm.append(lm_info[observed])
        _count_evidence(ev, i, c, changed, l_etag[sel], etag[i], l_lm[sel], lastmod[i])
        ev["ev_unchanged"][i] += observed & ~changed
        # A 304 of a copy whose size we know saved that size less its own bytes.
        saved = np.where(c["not_mod"] & np.isfinite(size[i]) & np.isfinite(l_bytes[sel]),
                         np.clip(size[i] - l_bytes[sel], 0.0, None), 0.0)
        ev["ev_bytes_saved"][i] += np.round(saved).astype(np.int64)

        n_obs[i] += observed
        n_chg[i] += changed
        exposure[i] += np.where(observed, interval_days, 0.0)
        interval[i] = adaptive.next_interval(interval[i], observed, changed,
                                             params.floor_s, params.cap_s)
        ok, not_mod = c["ok"], c["not_mod"]
        last_change[i] = np.where(changed, t, last_change[i])
        last_success[i] = np.where(ok | not_mod, t, last_success[i])
        known_now = (ok & ~pd.isna(l_hash[sel])) | (c["not_mod"] & c["observed"])
        last_known[i] = np.where(known_now, t, last_known[i])
        gone_run[i] = np.where(ok | not_mod, 0, np.where((st == 404) | (st == 410),
                                                         gone_run[i] + 1, gone_run[i]))
        n_err[i] += ob.is_error(st)
        # A 2xx replaces the stored validators and hash; a 304 keeps them unless it
        # carries fresh ones (RFC 9110 lets a 304 repeat ETag/Last-Modified).
        upd_ok = i[ok]
        etag[upd_ok], lastmod[upd_ok] = l_etag[sel][ok], l_lm[sel][ok]
        chash[upd_ok] = np.where(pd.isna(l_hash[sel][ok]), chash[upd_ok], l_hash[sel][ok])
        version[upd_ok] = np.where(pd.isna(l_hash[sel][ok]), version[upd_ok],
                                   l_version[sel][ok])
        sized = ok & ~pd.isna(l_hash[sel]) & np.isfinite(l_bytes[sel])
        size[i[sized]] = l_bytes[sel][sized]
        nm = i[not_mod]
        etag[nm] = np.where(pd.isna(l_etag[sel][not_mod]), etag[nm], l_etag[sel][not_mod])
        lastmod[nm] = np.where(pd.isna(l_lm[sel][not_mod]), lastmod[nm], l_lm[sel][not_mod])

    if obs_rows:
        stats = es.add_observations(stats, np.concatenate(obs_rows), np.concatenate(obs_t),
                                    np.concatenate(obs_chg), np.concatenate(obs_lm))
    if age_rows:
        stats = es.add_age_at_first_fetch(stats, np.concatenate(age_rows),
                                          np.concatenate(age_days),
                                          np.clip(np.concatenate(age_since), 0, None),
                                          params.half_life_days)
    # A claim is pending while it is newer than the last confirmed copy.
    claim = np.where(claim > np.nan_to_num(last_known, nan=-np.inf), claim, np.nan)
    pending = np.where(claim_trusted, claim, np.nan)
    # "Not changed" evidence is news only while it is later than the confirmed copy.
    unchanged = np.where(unchanged > np.nan_to_num(last_known, nan=-np.inf), unchanged, np.nan)

    out = pd.DataFrame({
        "url": state["url"].to_numpy(), "host": state["host"].to_numpy(),
        "first_seen": _from_seconds(first_seen, "first_seen"),
        "last_fetch_at": _from_seconds(last_fetch, "last_fetch_at"),
        "last_status": pd.array(np.where(np.isnan(last_status), None, last_status), dtype="Int32"),
        "last_success_at": _from_seconds(last_success, "last_success_at"),
        "last_change_at": _from_seconds(last_change, "last_change_at"),
        "last_known_at": _from_seconds(last_known, "last_known_at"),
        "etag": etag, "last_modified": lastmod, "content_hash": chash,
        "interval_s": interval, "n_fetches": n_fetches, "n_observations": n_obs,
        "n_changes": n_chg, "exposure_days": exposure, "n_errors": n_err,
        "consecutive_gone": gone_run.astype(np.int32),
        "gone": gone_run >= params.gone_after,
        "signal_claim_at": _from_seconds(claim, "signal_claim_at"),
        "pending_signal_at": _from_seconds(pending, "pending_signal_at"),
        "importance": pd.to_numeric(state["importance"]).to_numpy(dtype=float),
        "lane": state["lane"].fillna("refresh").to_numpy(dtype=object),
        "updated_dt": pd.Timestamp(run_date).date(),
    })
    for name in es.STATS_COLUMNS:
        out[name] = stats[name].to_numpy(dtype=float)
    for name in timing.TIMING_COLUMNS:
        out[name] = tod[name]
    out[SIZE_COLUMN] = pd.array(np.where(np.isnan(size), None, size), dtype="Int64")
    out[VERSION_COLUMN] = pd.array(np.where(np.isnan(version), None, version), dtype="Int32")
    out[UNCHANGED_COLUMN] = _from_seconds(unchanged, UNCHANGED_COLUMN)
    if estimate:
        rates = estimate_with_priors(out, level=params.level)
        for name in ("lambda_hat", "lambda_lo", "lambda_hi", "lambda_prior"):
            out[name] = rates[name]
    else:
        for name in ("lambda_hat", "lambda_lo", "lambda_hi", "lambda_prior"):
            out[name] = np.nan
    for name in ob.EVIDENCE_COLUMNS:
        out[name] = ev[name]
    return out[STATE_COLUMNS + list(ob.EVIDENCE_COLUMNS)]


def _timing_of_claims(signals, pos, tod) -> None:
    """Each distinct change instant a trusted host's push signals claim is a dated change
    (jobs.core.timing): its accuracy was earned (jobs.core.trust), and most of a publisher's
    changes are announced while few are fetched."""
    sig = signals[signals["url"].isin(pos.index) & _col(signals, "signal_trusted", False)]
    if not len(sig):
        return
    sig = sig.drop_duplicates(["url", "signaled_at"])
    timing.add_changes(tod, pos.loc[sig["url"].to_numpy()].to_numpy(),
                       _to_seconds(sig["signaled_at"]), 1.0)


def _arm_claims(signals, pos, claim, claim_trusted, last_known, ev):
    """Arm each URL's latest claim of the day if it is newer than our confirmed copy."""
    sig = signals[signals["url"].isin(pos.index)]
    if not len(sig):
        return claim, claim_trusted
    rows = pos.loc[sig["url"].to_numpy()].to_numpy()
    np.add.at(ev["ev_sig_received"], rows, 1)
    at = _to_seconds(sig["signaled_at"])
    trusted = _col(sig, "signal_trusted", False)
    order = np.lexsort((at, rows))
    last = np.append(rows[order][1:] != rows[order][:-1], True)
    r, a, tr = rows[order][last], at[order][last], trusted[order][last]
    newer = (a > np.nan_to_num(last_known[r], nan=-np.inf)) & ~(a <= claim[r])
    claim, claim_trusted = claim.copy(), claim_trusted.copy()
    claim[r[newer]], claim_trusted[r[newer]] = a[newer], tr[newer]
    return claim, claim_trusted


def _unchanged_evidence(signals, pos, last_known, unchanged, run_date):
    """``signal_unchanged_at`` after today's signals: the later of the stored evidence and
    today's (:func:`jobs.core.signal_evidence.no_change_evidence`)."""
    sig = signals[signals["url"].isin(pos.index)]
    if not len(sig):
        return unchanged
    rows, at = signal_evidence.no_change_evidence(
        pos.loc[sig["url"].to_numpy()].to_numpy(), _to_seconds(sig["signaled_at"]),
        _col(sig, "signal_trusted", False), last_known,
        pd.Timestamp(run_date, tz="UTC").timestamp())
    out = unchanged.copy()
    out[rows] = np.fmax(out[rows], at)
    return out


def _count_evidence(ev, i, c, changed, new_etag, old_etag, new_lm, old_lm):
    ok, not_mod, full_obs = c["ok"], c["not_mod"], c["full_obs"]
    ev["ev_200"][i] += ok
    ev["ev_304"][i] += not_mod
    ev["ev_304_ignored"][i] += c["ignored_304"]
    ev["ev_compared"][i] += full_obs
    ev["ev_etag_seen"][i] += ok & ~pd.isna(new_etag)
    ev["ev_lm_seen"][i] += ok & ~pd.isna(new_lm)
    for name, new, old in (("etag", new_etag, old_etag), ("lm", new_lm, old_lm)):
        agree_chg, agree_same, frozen, volatile = ob.validator_evidence(full_obs, changed, new, old)
        ev[f"ev_{name}_agree_chg"][i] += agree_chg
        ev[f"ev_{name}_agree_same"][i] += agree_same
        ev[f"ev_{name}_frozen"][i] += frozen
        ev[f"ev_{name}_volatile"][i] += volatile


def estimate_with_priors(state: pd.DataFrame, prior_shape=None, prior_rate=None, *,
                         level: float = 0.9) -> pd.DataFrame:
    """λ̂ and its interval from the statistics, shrunk towards each row's group prior.

    ``prior_shape``/``prior_rate`` are per-row Gamma(α, β) priors (the row's group prior
    from :func:`jobs.core.estimators_shrinkage.fit_group_priors`, joined by group); NaN
    or ``None`` keeps the default smoothing prior of :func:`jobs.core.estimators.estimate_rate`.
    A group prior is applied as the normal on log λ it was fitted as
    (:data:`jobs.core.estimators_shrinkage.GROUP_PRIOR_FAMILY`). A URL without observations
    gets the prior's centre α/β, so a brand-new URL inherits its group's rate.

    Returns
    -------
    DataFrame
        ``lambda_hat``, ``lambda_lo``, ``lambda_hi``, ``lambda_prior`` (the prior mean
        used, NaN for the default prior) on ``state``'s index.
    """
    stats = state[list(es.STATS_COLUMNS)].astype(float)
    n = len(state)
    shape = np.full(n, np.nan) if prior_shape is None else np.asarray(prior_shape, float)
    rate = np.full(n, np.nan) if prior_rate is None else np.asarray(prior_rate, float)
    res = estimate_rate(stats, prior_shape=shape, prior_rate=rate, level=level,
                        prior_family=GROUP_PRIOR_FAMILY)
    with np.errstate(divide="ignore", invalid="ignore"):
        prior_mean = np.where((shape > 0) & (rate > 0), shape / rate, np.nan)
    return pd.DataFrame({"lambda_hat": res["lambda_hat"].to_numpy(),
                         "lambda_lo": res["lambda_lo"].to_numpy(),
                         "lambda_hi": res["lambda_hi"].to_numpy(),
                         "lambda_prior": prior_mean}, index=state.index)
