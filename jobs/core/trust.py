"""Validator trust and push-signal accuracy per host, earned from decayed evidence.

Input: yesterday's hosts rows and today's per-host sums of the per-URL evidence of
:mod:`jobs.core.observations` (``ev_*``). Every evidence column is a decayed count,
``x_D = 2^{-Δ/h} x_{D-1} + today``, so a lie seen long ago fades and trust is re-earned
(and lost) from recent behaviour.

For each validator v ∈ {ETag, Last-Modified}, from full fetches compared with the stored
copy (see the 2×2 table in :mod:`jobs.core.observations`):

* frozen share  ``φ_v = frozen / (agree_chg + frozen)`` — content changed, validator did not;
* volatile share ``ψ_v = volatile / (agree_same + volatile)`` — validator moved, content did not.

``trust_v`` ⇔ ``agree_chg ≥ min_confirmations`` ∧ ``φ_v ≤ max_lie_share`` ∧ ``ψ_v ≤
max_volatile_share``. Trust needs positive evidence (changes the validator did report):
a host is never trusted by default, so an unknown host's 304s are not evidence and the
allocator fetches it in full until it has shown its validators move with its content.
Classes, first match wins:

1. ``volatile_etag``: ETags seen and ``ψ_etag > max_volatile_share`` (ETag churns; never 304s);
2. ``frozen_etag``: ``φ_etag > max_lie_share`` (a 304 by ETag would hide changes);
3. ``frozen_lm``: ``φ_lm > max_lie_share`` (304 to If-Modified-Since although changed);
4. ``honest_etag``: ``trust_etag``;
5. ``honest_lm``: ``trust_lm`` (Last-Modified only);
6. ``no_validators``: fewer than half of the 2xx carry an ETag, and fewer than half a
   Last-Modified;
7. ``unverified``: validators present, not enough evidence yet.

With ``trust_new`` (``trust.new_hosts_conditional``) a validator of an ``unverified`` host
is trusted provisionally: sent on at least half of the host's 2xx and not (yet) caught
frozen or volatile. Its 304s count as "unchanged" and its visits go out conditional from
the first day, instead of full until ``min_confirmations`` changes were confirmed; the
conversion audits below are what catch a validator that lies, which then loses the trust
by the same frozen/volatile rules as any other (docs/allocation.md, "Conditional GET for
new hosts").

``audit_wanted`` ⇔ ``trust_etag ∨ trust_lm``: exactly the hosts whose 304s we count as
"unchanged", so the only ones where a lie could go unseen; a share of their fetches must
be full (audits) so trust keeps being re-earned. Untrusted hosts are fetched in full
anyway, which is an audit on every fetch.

Signals: a claim is scored correct/wrong by the observation covering it
(:func:`jobs.core.observations.score_claims`); ``signal_accuracy = (correct + 1) /
(scored + 2)`` (Laplace's rule of succession) and ``signal_trusted`` ⇔ ``scored ≥
min_scored`` ∧ ``signal_accuracy ≥ min_accuracy``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobs.core import host_health
from jobs.core.estimators_stats import decay_factor
from jobs.core.observations import EVIDENCE_COLUMNS
from jobs.core.times import epoch_seconds, from_epoch_seconds

#: Decayed validator evidence kept per host (``ev_*`` names of the per-URL columns).
VALIDATOR_EVIDENCE = tuple(c for c in EVIDENCE_COLUMNS
                           if c not in ("ev_fetches", "ev_audit_n", "ev_audit_fresh",
                                        "ev_unchanged", "ev_bytes_saved", "ev_rebased")
                           and not c.startswith("ev_sig_"))
SIGNAL_EVIDENCE = ("ev_sig_received", "ev_sig_correct", "ev_sig_wrong")
CLASSES = ("honest_etag", "honest_lm", "no_validators", "frozen_lm", "volatile_etag",
           "frozen_etag", "unverified")
HOST_COLUMNS = (("host", "validator_class", "trust_etag", "trust_lm", "audit_wanted")
                + VALIDATOR_EVIDENCE + SIGNAL_EVIDENCE
                + ("signal_accuracy", "signal_trusted") + host_health.HEALTH_COLUMNS
                + ("urls_known", "updated_dt"))


@dataclass(frozen=True)
class TrustParams:
    """``[trust]``, ``[signals]`` and ``[health]`` as the host update needs them (built by
    :func:`jobs.params.trust_params`; defaults only in ``jobs.config``)."""

    half_life_days: float          # validator evidence
    min_confirmations: float
    max_lie_share: float
    max_volatile_share: float
    signal_half_life_days: float
    signal_min_scored: float
    signal_min_accuracy: float
    health: host_health.RateLimitParams
    trust_new: bool = False        # trust.new_hosts_conditional


def _share(num, other):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num + other > 0, num / (num + other), 0.0)


def classify(ev: pd.DataFrame, *, min_confirmations=2.0, max_lie_share=0.1,
             max_volatile_share=0.2, trust_new=False) -> pd.DataFrame:
    """Validator class, trust flags and ``audit_wanted`` from (decayed) evidence counts.

    Parameters
    ----------
    ev : DataFrame
        The decayed ``VALIDATOR_EVIDENCE`` counts, one row per host.
    min_confirmations, max_lie_share, max_volatile_share : float
        ``[trust]``: the rules of the module docstring.
    trust_new : bool
        Trust an ``unverified`` host's validators provisionally (module docstring): its
        class stays ``unverified``, its flags (and so ``audit_wanted``) are set.

    Returns
    -------
    DataFrame
        On ``ev``'s index: ``validator_class``, ``trust_etag``, ``trust_lm``,
        ``audit_wanted``.
    """
    g = {c: ev[c].fillna(0.0).to_numpy(float) for c in VALIDATOR_EVIDENCE}
    trust, frozen, volatile = {}, {}, {}
    for v in ("etag", "lm"):
        phi = _share(g[f"ev_{v}_frozen"], g[f"ev_{v}_agree_chg"])
        psi = _share(g[f"ev_{v}_volatile"], g[f"ev_{v}_agree_same"])
        frozen[v] = (phi > max_lie_share) & (g[f"ev_{v}_frozen"] > 0)
        volatile[v] = (psi > max_volatile_share) & (g[f"ev_{v}_volatile"] > 0)
        trust[v] = ((g[f"ev_{v}_agree_chg"] >= min_confirmations) & (phi <= max_lie_share)
                    & (psi <= max_volatile_share))
    full = g["ev_200"]
    no_val = (full > 0) & (g["ev_etag_seen"] < 0.5 * full) & (g["ev_lm_seen"] < 0.5 * full)
    cls = np.select([volatile["etag"], frozen["etag"], frozen["lm"], trust["etag"], trust["lm"],
                     no_val], list(CLASSES[4:6]) + ["frozen_lm", "honest_etag", "honest_lm",
                                                     "no_validators"], "unverified")
    # Precedence keeps a lying validator from being trusted through the other one's class.
    trust_etag = trust["etag"] & ~volatile["etag"] & ~frozen["etag"]
    trust_lm = trust["lm"] & ~frozen["lm"] & ~volatile["lm"]
    if trust_new:
        unverified = cls == "unverified"
        for v, flag in (("etag", trust_etag), ("lm", trust_lm)):
            sent = (full > 0) & (g[f"ev_{v}_seen"] >= 0.5 * full)
            flag |= unverified & sent & ~frozen[v] & ~volatile[v]
    return pd.DataFrame({"validator_class": cls, "trust_etag": trust_etag, "trust_lm": trust_lm,
                         "audit_wanted": trust_etag | trust_lm}, index=ev.index)


def signal_trust(ev: pd.DataFrame, *, min_scored=3.0, min_accuracy=0.8):
    """``(signal_accuracy, signal_trusted)`` from decayed correct/wrong counts."""
    correct = ev["ev_sig_correct"].fillna(0.0).to_numpy(float)
    wrong = ev["ev_sig_wrong"].fillna(0.0).to_numpy(float)
    acc = (correct + 1.0) / (correct + wrong + 2.0)
    return acc, ((correct + wrong) >= min_scored) & (acc >= min_accuracy)


def _epoch_s(values: pd.Series) -> np.ndarray:
    """Timestamps (naive read as UTC, any unit) or epoch seconds as float epoch seconds, NaN
    for null."""
    if pd.api.types.is_datetime64_any_dtype(values):
        return epoch_seconds(values)
    if values.dtype == object:
        return epoch_seconds(pd.to_datetime(values, utc=True, errors="coerce"))
    return pd.to_numeric(values).to_numpy(float)


def update_hosts(prev: pd.DataFrame, today: pd.DataFrame, run_date: str,
                 params: TrustParams) -> pd.DataFrame:
    """Tomorrow's hosts table: decay yesterday's evidence, add today's, reclassify.

    Parameters
    ----------
    prev : DataFrame
        Yesterday's hosts rows (``HOST_COLUMNS``); may be empty.
    today : DataFrame
        One row per host seen today: ``host``, the ``ev_*`` sums, ``urls_known``, and what
        :func:`jobs.core.host_health.health_frame` reads: the health counts, the host's
        ``crawl_delay_s`` and ``max_fetches_per_day``, ``blocked_until`` (epoch seconds)
        and ``asked_interval_s``.
    params : TrustParams
    """
    prev = prev.set_index("host") if len(prev) else pd.DataFrame(columns=HOST_COLUMNS[1:],
                                                                 index=pd.Index([], name="host"))
    today = today.set_index("host")
    hosts = prev.index.union(today.index)
    p, t = prev.reindex(hosts), today.reindex(hosts)
    written = pd.to_datetime(p["updated_dt"])
    elapsed = ((pd.Timestamp(run_date) - written) / pd.Timedelta(1, "D")).fillna(0.0)
    elapsed = np.clip(elapsed.to_numpy(float), 0, None)
    out = pd.DataFrame(index=hosts)
    for cols, h in ((VALIDATOR_EVIDENCE, params.half_life_days),
                    (SIGNAL_EVIDENCE, params.signal_half_life_days)):
        factor = decay_factor(elapsed, h)
        for c in cols:
            old = pd.to_numeric(p[c]).fillna(0.0).to_numpy(float)
            new = pd.to_numeric(t[c]).fillna(0.0).to_numpy(float) if c in t else 0.0
            out[c] = factor * old + new
    out = out.join(classify(out, min_confirmations=params.min_confirmations,
                            max_lie_share=params.max_lie_share,
                            max_volatile_share=params.max_volatile_share,
                            trust_new=params.trust_new))
    out["signal_accuracy"], out["signal_trusted"] = signal_trust(
        out, min_scored=params.signal_min_scored, min_accuracy=params.signal_min_accuracy)
    counts = t.reindex(columns=[*host_health.COUNT_COLUMNS, "crawl_delay_s",
                                "max_fetches_per_day", "blocked_until",
                                "asked_interval_s"])
    window_start = (pd.Timestamp(run_date, tz="UTC") + pd.Timedelta(1, "D")).timestamp()
    prev_health = p.reindex(columns=list(host_health.HEALTH_COLUMNS))
    prev_health["blocked_until"] = _epoch_s(prev_health["blocked_until"])
    health = host_health.health_frame(counts, prev_health, params.health, window_start)
    health["blocked_until"] = from_epoch_seconds(health["blocked_until"],
                                                 "blocked_until").set_axis(health.index)
    out = out.join(health)
    known = pd.to_numeric(t["urls_known"]) if "urls_known" in t else pd.Series(np.nan, index=hosts)
    out["urls_known"] = known.fillna(pd.to_numeric(p["urls_known"])).fillna(0).astype(np.int64)
    out["updated_dt"] = pd.Timestamp(run_date).date()
    return out.rename_axis("host").reset_index()[list(HOST_COLUMNS)]
