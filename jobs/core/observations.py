"""What one fetch tells us: a change observation, validator evidence, a scored signal claim.

Pure numpy/pandas. ``jobs.core.state_update.fold_day`` calls these once per "k-th fetch of
the day" step, vectorised over URLs, with each URL's stored copy (hash, ETag,
Last-Modified) from before the fetch.

Observation rules (docs/contract.md, "Observations"):

* 200 (any 2xx) with a stored baseline hash: **changed** iff ``content_hash`` differs.
  Same hash is unchanged even when the bytes, the ETag or the Last-Modified differ.
* 304: unchanged, **only** where the host's validator that could have produced it is
  trusted (``trust_etag`` with a stored ETag, or ``trust_lm`` with a stored
  Last-Modified). Otherwise no observation: a lying 304 must not look like evidence.
* 2xx whose ``fingerprint_version`` differs from the stored hash's (the fleet upgraded its
  fingerprint, docs/fingerprint.md): the hashes are not comparable, so the fetch *re-bases*
  the stored hash (``rebased``) and is neither a change nor a no-change, unless a trusted
  validator (``trust_etag`` with an ETag stored and received, ``trust_lm`` likewise) can
  compare the two copies: then it is observed, changed iff a trusted validator moved (what
  trust means: it moved with every change it was checked against).
* 0, 429, 5xx: no observation (host health counts them).
* 404/410: no observation; counts towards ``gone``.
* other 3xx (redirects) and other 4xx: no observation. The fleet follows redirects and
  logs the final URL as its own row, which is observed like any other fetch.

Validator evidence (per host, summed by ``jobs.core.trust``) comes from every 2xx full
fetch with a stored baseline, comparing how the content and each validator moved:

============  =================  =================
              validator moved    validator same
============  =================  =================
hash changed  ``agree_chg``      ``frozen`` (lie)
hash same     ``volatile``       ``agree_same``
============  =================  =================

A frozen validator is what makes a server answer 304 while the content changed, so a
full fetch (an *audit*) that sees it is how lying 304s are caught.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: Per-URL evidence produced by one day's fold (summed per host in Spark).
EVIDENCE_COLUMNS = (
    "ev_fetches", "ev_200", "ev_304", "ev_304_ignored", "ev_compared",
    "ev_etag_seen", "ev_lm_seen",
    "ev_etag_agree_chg", "ev_etag_agree_same", "ev_etag_frozen", "ev_etag_volatile",
    "ev_lm_agree_chg", "ev_lm_agree_same", "ev_lm_frozen", "ev_lm_volatile",
    "ev_sig_received", "ev_sig_correct", "ev_sig_wrong",
    "ev_audit_n", "ev_audit_fresh",
    # What the day's fetches bought: those that found the page unchanged (a 2xx with the
    # stored hash, a trusted 304), and the bytes 304s saved against the stored copy's size.
    "ev_unchanged", "ev_bytes_saved",
    # 2xx fetches whose fingerprint version differed from the stored hash's: re-based.
    "ev_rebased",
)
#: The day's fetch figures (run records and metrics) -> the evidence column summed for each.
FETCH_FIGURES = {"fetches_folded": "ev_fetches", "fetches_304": "ev_304",
                 "fetches_unchanged": "ev_unchanged", "bytes_saved_304": "ev_bytes_saved",
                 "fetches_rebased": "ev_rebased"}

def is_error(status) -> np.ndarray:
    """Status 0 (network error/timeout), 429 or 5xx: no observation, counted for health."""
    st = np.asarray(status)
    return (st == 0) | (st == 429) | (st >= 500)


def classify_fetch(status, new_hash, stored_hash, has_baseline, stored_etag, stored_lm,
                   trust_etag, trust_lm, same_version=None, new_etag=None, new_lm=None):
    """Change observation of one fetch per URL.

    Parameters
    ----------
    status : array of int
    new_hash, stored_hash : arrays of object (None/NaN where missing)
    has_baseline : array of bool
        A stored content hash exists and was confirmed by an earlier fetch.
    stored_etag, stored_lm : arrays of object
        Validators stored before this fetch (what a conditional request would send).
    trust_etag, trust_lm : arrays of bool
        The host's trust (from yesterday's hosts table).
    same_version : array of bool, optional
        The fetch's ``fingerprint_version`` equals the stored hash's (default: all true).
    new_etag, new_lm : arrays of object, optional
        The fetch's validators: what a re-based fetch is compared by (default: none).

    Returns
    -------
    dict of bool arrays
        ``ok`` (2xx), ``not_mod`` (304), ``observed``, ``changed``, ``ignored_304``,
        ``full_obs`` (hashes compared), ``rebased`` (a 2xx with a hash of another version).
    """
    st = np.asarray(status)
    ok = (st >= 200) & (st < 300)
    not_mod = st == 304
    has_hash = ~pd.isna(new_hash)
    same = np.ones(st.shape, bool) if same_version is None else np.asarray(same_version, bool)
    t_etag, t_lm = np.asarray(trust_etag, bool), np.asarray(trust_lm, bool)
    full_obs = ok & has_baseline & has_hash & same
    rebased = ok & has_baseline & has_hash & ~same
    trusted_304 = not_mod & has_baseline & (
        (t_etag & ~pd.isna(stored_etag)) | (t_lm & ~pd.isna(stored_lm)))
    changed = full_obs & (np.asarray(new_hash, dtype=object) != np.asarray(stored_hash, dtype=object))
    observed = full_obs | trusted_304
    if rebased.any():
        none = np.full(st.shape, None, dtype=object)
        new_etag = none if new_etag is None else np.asarray(new_etag, dtype=object)
        new_lm = none if new_lm is None else np.asarray(new_lm, dtype=object)
        by_etag = rebased & t_etag & ~pd.isna(stored_etag) & ~pd.isna(new_etag)
        by_lm = rebased & t_lm & ~pd.isna(stored_lm) & ~pd.isna(new_lm)
        moved = ((by_etag & (new_etag != np.asarray(stored_etag, dtype=object)))
                 | (by_lm & (new_lm != np.asarray(stored_lm, dtype=object))))
        observed = observed | by_etag | by_lm
        changed = changed | moved
    return {"ok": ok, "not_mod": not_mod, "observed": observed, "changed": changed,
            "ignored_304": not_mod & ~trusted_304, "full_obs": full_obs, "rebased": rebased}


def validator_evidence(full_obs, changed, new_val, stored_val):
    """The 2×2 table above for one validator: (agree_chg, agree_same, frozen, volatile).

    Only fetches where both the stored and the new value exist are compared; values are
    compared as raw header strings.
    """
    both = np.asarray(full_obs, bool) & ~pd.isna(new_val) & ~pd.isna(stored_val)
    moved = np.asarray(new_val, dtype=object) != np.asarray(stored_val, dtype=object)
    chg = np.asarray(changed, bool)
    return (both & chg & moved, both & ~chg & ~moved, both & chg & ~moved, both & ~chg & moved)


def score_claims(observed, interval_start_s, t_s, claim_s):
    """Score armed push-signal claims against the observation that covers them.

    A claim "the page changed at c" is scored by the first observation whose interval
    ``(p, t]`` contains ``c``: correct iff that observation found a change. A claim
    with ``c <= p`` (already covered by an earlier fetch) or no claim is not scored.

    Returns
    -------
    scored, covered_earlier : arrays of bool
        Claims scored now, and claims dropped unscored because ``c <= p``.
    """
    armed = np.isfinite(claim_s) & np.asarray(observed, bool)
    scored = armed & (claim_s > interval_start_s) & (claim_s <= t_s)
    dropped = armed & (claim_s <= interval_start_s)
    return scored, dropped


def wilson_lower(successes, n, level: float):
    """The lower end of :func:`wilson_interval`, vectorised (0 where ``n == 0``); ``level``
    0 gives the plain share."""
    from scipy.stats import norm

    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    z = float(norm.ppf(0.5 + level / 2.0)) if level > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, k / n, 0.0)
        nn = np.where(n > 0, n, 1.0)
        denom = 1.0 + z * z / nn
        centre = (p + z * z / (2 * nn)) / denom
        half = z * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / denom
    return np.where(n > 0, np.clip(centre - half, 0.0, 1.0), 0.0)


def wilson_interval(successes: float, n: float, level: float = 0.95):
    """Wilson score interval for a binomial share (Wilson 1927, JASA 22:209-212).

    .. math:: \\frac{\\hat p + z^2/2n \\pm z\\sqrt{\\hat p(1-\\hat p)/n + z^2/4n^2}}{1 + z^2/n}

    Returns ``(p_hat, lo, hi)``; all NaN when ``n == 0``.
    """
    from scipy.stats import norm

    if n <= 0:
        return float("nan"), float("nan"), float("nan")
    z = float(norm.ppf(0.5 + level / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)
