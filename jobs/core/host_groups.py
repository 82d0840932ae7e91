"""The hosts of a bucket of pages as integer codes, and per-host reductions over them.

The allocation passes work on a whole bucket of hosts at once (one pandas call per
bucket); whatever they need per host -- counts, sums, the first row's politeness, a
median, a minimum -- is one numpy reduction over the host codes instead of a pandas
``groupby`` and a Python call per host. Codes follow the order of first appearance, as
``DataFrame.groupby(sort=False)`` does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class HostGroups:
    """Pages of a bucket by host: ``codes[i]`` is page i's host, 0..n-1."""

    labels: np.ndarray   # host names, in order of first appearance
    codes: np.ndarray    # per page
    counts: np.ndarray   # pages per host
    order: np.ndarray    # page indices sorted by host (stable)
    starts: np.ndarray   # where each host's pages start in ``order``

    @classmethod
    def of(cls, hosts) -> "HostGroups":
        codes, labels = pd.factorize(np.asarray(hosts, dtype=object))
        return cls.from_codes(np.asarray(labels, dtype=object), codes)

    @classmethod
    def from_codes(cls, labels, codes) -> "HostGroups":
        """Groups of rows whose host is ``labels[codes[i]]`` (e.g. visits of pages)."""
        codes = np.asarray(codes, dtype=np.int64)
        counts = np.bincount(codes, minlength=len(labels))
        return cls(labels, codes, counts, np.argsort(codes, kind="stable"),
                   np.cumsum(counts) - counts)

    @classmethod
    def single(cls, n_pages: int, label=None) -> "HostGroups":
        """Every page on one host."""
        return cls.from_codes(np.array([label], dtype=object), np.zeros(n_pages, np.int64))

    @property
    def n(self) -> int:
        return int(self.labels.size)

    @property
    def first(self) -> np.ndarray:
        """Index of each host's first page (its politeness and health are per host)."""
        return self.order[self.starts]

    def count(self, mask) -> np.ndarray:
        """Pages per host where ``mask`` holds."""
        return np.bincount(self.codes[np.asarray(mask, bool)], minlength=self.n)

    def sum(self, values, mask=None) -> np.ndarray:
        """Per-host sum of ``values`` (where ``mask`` holds); pages summed in their order."""
        values = np.asarray(values, dtype=float)
        if mask is not None:
            values = np.where(mask, values, 0.0)
        return np.bincount(self.codes, weights=values, minlength=self.n)

    def min(self, values, mask=None, empty=np.inf) -> np.ndarray:
        """Per-host minimum over the pages where ``mask`` holds (``empty`` if none)."""
        v = np.where(mask, values, empty) if mask is not None else np.asarray(values, float)
        return np.minimum.reduceat(v[self.order], self.starts) if self.n else np.zeros(0)

    def max(self, values, mask=None, empty=-np.inf) -> np.ndarray:
        """Per-host maximum over the pages where ``mask`` holds (``empty`` if none)."""
        v = np.where(mask, values, empty) if mask is not None else np.asarray(values, float)
        return np.maximum.reduceat(v[self.order], self.starts) if self.n else np.zeros(0)

    def median(self, values, mask) -> np.ndarray:
        """Per-host median of ``values`` where ``mask`` holds (NaN for a host with none):
        the middle value, or the mean of the two middle values, as ``np.median``."""
        sel = np.flatnonzero(mask)
        out = np.full(self.n, np.nan)
        if not sel.size:
            return out
        v, c = np.asarray(values, dtype=float)[sel], self.codes[sel]
        order = np.lexsort((v, c))
        v, c = v[order], c[order]
        k = np.bincount(c, minlength=self.n)
        start = np.cumsum(k) - k
        has = k > 0
        lo = v[(start + (k - 1) // 2)[has]]
        hi = v[(start + k // 2)[has]]
        out[has] = np.where(k[has] % 2 == 1, lo, (lo + hi) / 2.0)
        return out

    def rank(self, sort_keys: dict, ascending) -> tuple[np.ndarray, np.ndarray]:
        """Rows sorted by host, then by the ``sort_keys`` columns (stable: ties keep the
        row order); returns (order, rank of each sorted row within its host, 0 first)."""
        keys = pd.DataFrame({"_host": self.codes, **sort_keys})
        order = keys.sort_values(list(keys.columns), ascending=[True, *ascending],
                                 kind="mergesort").index.to_numpy()
        return order, np.arange(order.size) - self.starts[self.codes[order]]
