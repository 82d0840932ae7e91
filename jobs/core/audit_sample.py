"""The freshness audit sample: URLs fetched in full at a fixed cadence, whatever the policy.

Membership is a pure function of the URL (a stable hash below the sample rate), so the
planner that schedules the sample and the state update that scores it agree without
sharing any table, and the sample never depends on what the policy prefers.

Both numbers here are :func:`jobs.core.url_hash.unit` of the URL's UTF-8 bytes (XXH64, top
53 bits over 2^53), vectorised over whole arrays of URLs: deterministic, the same on every
platform, uniform in [0, 1). They differ only in the seed, which is XXH64 of a label, so
the day's number is unrelated to the membership number of the same URL.
"""
from __future__ import annotations

import numpy as np

from jobs.core.url_hash import label_seed, unit

MEMBER_SEED = label_seed("recrawl-audit")


def url_unit(urls) -> np.ndarray:
    """A uniform number in [0, 1) per URL, stable across processes and machines:
    ``unit(url, seed = XXH64("recrawl-audit", 0))``."""
    return unit(urls, MEMBER_SEED)


def day_unit(urls, day_index: int) -> np.ndarray:
    """A uniform number in [0, 1) per (URL, day), unrelated to :func:`url_unit`:
    ``unit(url, seed = XXH64("recrawl-auditday|<day_index>", 0))``."""
    return unit(urls, label_seed(f"recrawl-auditday|{int(day_index)}"))


def in_audit_sample(urls, rate: float) -> np.ndarray:
    """Whether each URL belongs to the audit sample of the given rate (0 disables it)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError("audit sample rate must be in [0, 1]")
    return url_unit(urls) < rate
