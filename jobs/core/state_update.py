"""Fold one day's fetch-log rows into the per-URL state (pure pandas, no Spark).

Called by ``jobs.update_state`` once per URL-hash bucket, with yesterday's state rows
and today's clean log rows of the same URLs. Fetches of one URL within the day are
applied in time order; the loop is over "k-th fetch of the day", vectorised over URLs,
so its length is the largest number of fetches of any one URL that day.

Observation rules (the seed's rules; see docs/contract.md):

* 2xx: changed iff ``content_hash`` differs from the stored one. The first success
  only sets the baseline.
* 304: unchanged.
* 404/410: counts towards ``gone`` after ``gone_after`` in a row; a 2xx/304 resets it.
* 0, 429, 5xx: an error, no observation.
* 3xx other than 304 (redirects) and other 4xx: no observation; the fleet is expected
  to log the final URL of a redirect chain as its own row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobs.core import adaptive
from jobs.core.times import epoch_seconds as _to_seconds
from jobs.core.times import from_epoch_seconds as _from_seconds

DAY_S = 86400.0
STATE_COLUMNS = [
    "url", "host", "first_seen", "last_fetch_at", "last_status", "last_success_at",
    "last_change_at", "etag", "last_modified", "content_hash", "interval_s", "lambda_hat",
    "lambda_lo", "lambda_hi", "n_fetches", "n_observations", "n_changes", "exposure_days",
    "n_errors", "consecutive_gone", "gone", "importance", "lane", "updated_dt",
]
_TS_COLS = ["first_seen", "last_fetch_at", "last_success_at", "last_change_at"]


@dataclass(frozen=True)
class UpdateParams:
    floor_s: float = 3600.0
    cap_s: float = 90 * DAY_S
    initial_s: float = DAY_S
    gone_after: int = 2


def empty_state() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in STATE_COLUMNS})


def fold_day(state: pd.DataFrame, logs: pd.DataFrame, run_date: str,
             params: UpdateParams = UpdateParams()) -> pd.DataFrame:
    """Return the new state for every URL present in ``state`` or ``logs``.

    Parameters
    ----------
    state : DataFrame
        Yesterday's rows (``STATE_COLUMNS``); may be empty.
    logs : DataFrame
        Today's clean log rows: url, host, fetched_at, status, etag, last_modified,
        content_hash.
    run_date : str
        The logical date D (YYYY-MM-DD) written to ``updated_dt``.
    """
    state = state.reset_index(drop=True)
    new_urls = pd.Index(logs["url"].unique()).difference(pd.Index(state["url"]))
    if len(new_urls):
        # Reindexing adds all-missing rows for new URLs without concat's dtype pitfalls.
        host_of = logs.drop_duplicates("url").set_index("url")["host"]
        state = state.set_index("url").reindex(pd.Index(state["url"]).append(new_urls))
        state.loc[new_urls, "host"] = host_of.loc[new_urls].to_numpy()
        state = state.rename_axis("url").reset_index()
    n = len(state)
    pos = pd.Series(np.arange(n), index=state["url"].to_numpy())

    last_fetch = _to_seconds(state["last_fetch_at"])
    last_success = _to_seconds(state["last_success_at"])
    last_change = _to_seconds(state["last_change_at"])
    first_seen = _to_seconds(state["first_seen"])
    last_status = pd.to_numeric(state["last_status"]).to_numpy(dtype=float)
    etag = state["etag"].to_numpy(dtype=object)
    lastmod = state["last_modified"].to_numpy(dtype=object)
    chash = state["content_hash"].to_numpy(dtype=object)
    interval = pd.to_numeric(state["interval_s"]).to_numpy(dtype=float)
    interval = np.where(np.isnan(interval), params.initial_s, interval)

    def counter(name, dtype=np.int64):
        return pd.to_numeric(state[name]).fillna(0).to_numpy(dtype=dtype)

    n_fetches, n_obs, n_chg = counter("n_fetches"), counter("n_observations"), counter("n_changes")
    n_err, gone_run = counter("n_errors"), counter("consecutive_gone")
    exposure = counter("exposure_days", float)

    logs = logs.sort_values(["url", "fetched_at", "status"], kind="mergesort")
    idx = pos.loc[logs["url"].to_numpy()].to_numpy()
    rank = logs.groupby("url", sort=False).cumcount().to_numpy()
    t_fetch = _to_seconds(logs["fetched_at"])
    status = logs["status"].to_numpy(dtype=np.int64)
    l_etag = logs["etag"].to_numpy(dtype=object)
    l_lm = logs["last_modified"].to_numpy(dtype=object)
    l_hash = logs["content_hash"].to_numpy(dtype=object)

    for k in range(int(rank.max()) + 1 if len(rank) else 0):
        sel = rank == k
        i, t, st = idx[sel], t_fetch[sel], status[sel]
        n_fetches[i] += 1
        last_fetch[i] = t
        last_status[i] = st
        first_seen[i] = np.where(np.isnan(first_seen[i]), t, first_seen[i])

        ok = (st >= 200) & (st < 300)
        not_mod = st == 304
        success = ok | not_mod
        new_hash = l_hash[sel]
        had_baseline = ~pd.isna(chash[i]) & ~np.isnan(last_success[i])
        observed = success & had_baseline & (ok & ~pd.isna(new_hash) | not_mod)
        changed = observed & ok & (new_hash != chash[i])
        elapsed_days = np.where(observed, (t - last_success[i]) / DAY_S, 0.0)

        n_obs[i] += observed
        n_chg[i] += changed
        exposure[i] += np.clip(elapsed_days, 0.0, None)
        interval[i] = adaptive.next_interval(interval[i], observed, changed,
                                             params.floor_s, params.cap_s)
        last_change[i] = np.where(changed, t, last_change[i])
        last_success[i] = np.where(success, t, last_success[i])
        gone_run[i] = np.where(success, 0, np.where((st == 404) | (st == 410),
                                                    gone_run[i] + 1, gone_run[i]))
        n_err[i] += (st == 0) | (st == 429) | (st >= 500)
        # A 2xx replaces the stored validators and hash; a 304 keeps them unless it
        # carries fresh ones (RFC 9110 lets a 304 repeat ETag/Last-Modified).
        upd_ok = i[ok]
        etag[upd_ok], lastmod[upd_ok] = l_etag[sel][ok], l_lm[sel][ok]
        chash[upd_ok] = np.where(pd.isna(new_hash[ok]), chash[upd_ok], new_hash[ok])
        nm = i[not_mod]
        etag[nm] = np.where(pd.isna(l_etag[sel][not_mod]), etag[nm], l_etag[sel][not_mod])
        lastmod[nm] = np.where(pd.isna(l_lm[sel][not_mod]), lastmod[nm], l_lm[sel][not_mod])

    out = pd.DataFrame({
        "url": state["url"].to_numpy(), "host": state["host"].to_numpy(),
        "first_seen": _from_seconds(first_seen), "last_fetch_at": _from_seconds(last_fetch),
        "last_status": pd.array(np.where(np.isnan(last_status), None, last_status), dtype="Int32"),
        "last_success_at": _from_seconds(last_success),
        "last_change_at": _from_seconds(last_change),
        "etag": etag, "last_modified": lastmod, "content_hash": chash,
        "interval_s": interval, "n_fetches": n_fetches, "n_observations": n_obs,
        "n_changes": n_chg, "exposure_days": exposure, "n_errors": n_err,
        "consecutive_gone": gone_run.astype(np.int32),
        "gone": gone_run >= params.gone_after,
        "importance": pd.to_numeric(state["importance"]).to_numpy(dtype=float),
        "lane": state["lane"].fillna("refresh").to_numpy(dtype=object),
        "updated_dt": pd.Timestamp(run_date).date(),
    })
    lam, lo, hi = estimate_rate(out)
    out["lambda_hat"], out["lambda_lo"], out["lambda_hi"] = lam, lo, hi
    return out[STATE_COLUMNS]


def estimate_rate(state: pd.DataFrame):
    """Change rate from the counters: a smoothed censored estimate with a 90% interval.

    With n observations of mean interval I of which X found a change, the equal-interval
    estimator of Cho & Garcia-Molina (2003) is λ = −ln(1 − (X + 0.5)/(n + 1)) / I; the
    +0.5/+1 smoothing keeps "always changed" and "never changed" finite. The interval
    uses the same formula at the Wilson bounds of the change fraction.
    """
    n = state["n_observations"].to_numpy(dtype=float)
    x = state["n_changes"].to_numpy(dtype=float)
    expo = state["exposure_days"].to_numpy(dtype=float)
    mean_i = np.where(n > 0, expo / np.maximum(n, 1), 1.0)
    mean_i = np.maximum(mean_i, 1.0 / 24)

    def lam_at(p):
        return -np.log1p(-np.clip(p, 0.0, 1 - 1e-9)) / mean_i

    p_hat = (x + 0.5) / (n + 1.0)
    z = 1.645
    m = n + 1.0
    centre = (p_hat + z * z / (2 * m)) / (1 + z * z / m)
    half = z * np.sqrt(p_hat * (1 - p_hat) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    return lam_at(p_hat), lam_at(centre - half), lam_at(centre + half)
