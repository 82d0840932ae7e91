"""The freshness audit sample: URLs fetched in full at a fixed cadence, whatever the policy.

Membership is a pure function of the URL (a stable hash below the sample rate), so the
planner that schedules the sample and the state update that scores it agree without
sharing any table, and the sample never depends on what the policy prefers.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd


def url_unit(urls) -> np.ndarray:
    """A uniform number in [0, 1) per URL, stable across processes and machines."""
    def one(u: str) -> float:
        digest = hashlib.blake2b(u.encode("utf-8"), digest_size=8, person=b"recrawl-audit").digest()
        return int.from_bytes(digest, "big") / 2.0**64

    return np.fromiter((one(u) for u in pd.Series(urls).astype(str)), dtype=float,
                       count=len(urls))


def in_audit_sample(urls, rate: float) -> np.ndarray:
    """Whether each URL belongs to the audit sample of the given rate (0 disables it)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError("audit sample rate must be in [0, 1]")
    return url_unit(urls) < rate
