"""Deterministic randomness helpers: seeded streams, counter-based hashes, hex.

Two kinds of randomness are used. Bulk draws (page attributes, change times)
come from ``numpy.random.Generator`` streams keyed by (seed, purpose, shard,
day), so a shard's web is the same whichever other shards are built with it.
Per-request noise (errors, byte counts, volatile ETags) comes from a
counter-based hash of the request itself, so a response never depends on
which other requests were issued in the same batch.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

# Purpose codes for stream(); fixed forever so seeds stay reproducible.
HOSTS, PAGES, CHANGES, BIRTHS, SIGNALS, HEALTH, WEEKLY, RHYTHM = 1, 2, 3, 4, 5, 6, 7, 8

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def stream(seed: int, *keys: int) -> np.random.Generator:
    """Independent generator for ``(seed, *keys)``; all keys must be ≥ 0."""
    return np.random.default_rng([int(seed), *(int(k) for k in keys)])


def _fmix(h: np.ndarray) -> np.ndarray:
    # splitmix64 finaliser: a bijection with good avalanche, cheap in numpy.
    h = h ^ (h >> np.uint64(30))
    h = h * _M1
    h = h ^ (h >> np.uint64(27))
    h = h * _M2
    return h ^ (h >> np.uint64(31))


def mix64(*parts) -> np.ndarray:
    """Hash integer arrays (broadcast together) into uint64 values."""
    arrays = np.broadcast_arrays(*(np.asarray(p) for p in parts))
    h = np.full(arrays[0].shape, 0x243F6A8885A308D3, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in arrays:
            h = _fmix(h ^ (a.astype(np.int64).view(np.uint64) + _GOLDEN))
    return h


def uniform(*parts) -> np.ndarray:
    """Hash-based U[0, 1) for each broadcast element of ``parts``."""
    return (mix64(*parts) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)


def hex_strings(values: np.ndarray, quote: bool = False,
                valid: np.ndarray | None = None) -> pa.Array:
    """Format uint64 values as 16-char lowercase hex Arrow strings.

    Parameters
    ----------
    values : ndarray of uint64
    quote : bool
        Wrap each value in double quotes, as an ETag header value.
    valid : ndarray of bool, optional
        False entries become nulls.
    """
    values = np.ascontiguousarray(values, dtype=np.uint64)
    n = len(values)
    if valid is None:
        valid = np.ones(n, dtype=bool)
    nibbles = (values[valid, None] >> (np.arange(60, -1, -4, dtype=np.uint64)[None, :])) & np.uint64(15)
    chars = _HEX[nibbles.astype(np.intp)]
    if quote:
        q = np.full((len(chars), 1), ord('"'), dtype=np.uint8)
        chars = np.hstack([q, chars, q])
    width = 18 if quote else 16
    lengths = np.where(valid, width, 0).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return _string_array(np.ascontiguousarray(chars).tobytes(), offsets, valid)


def _string_array(data: bytes, offsets: np.ndarray, valid: np.ndarray) -> pa.Array:
    n = len(valid)
    null_count = int(n - valid.sum())
    bitmap = None
    if null_count:
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offsets.tobytes()),
                                                  pa.py_buffer(data)], null_count)


def parse_hex(strings, quote: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Parse strings produced by :func:`hex_strings` back to uint64.

    Returns
    -------
    values : ndarray of uint64
        Parsed values, 0 where absent or malformed.
    present : ndarray of bool
        True where a (possibly malformed) value was given.
    """
    arr = pa.array(strings, type=pa.string()) if not isinstance(strings, pa.Array) else strings
    present = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    width = 18 if quote else 16
    raw = np.array(arr.fill_null("").to_pylist(), dtype=f"S{width + 1}")
    ok = np.char.str_len(raw) == width
    mat = raw.view(np.uint8).reshape(len(raw), width + 1)[:, :width]
    if quote:
        ok &= (mat[:, 0] == ord('"')) & (mat[:, -1] == ord('"'))
        mat = mat[:, 1:-1]
    digit = np.full(256, 255, dtype=np.uint8)
    digit[_HEX] = np.arange(16, dtype=np.uint8)
    digit[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16, dtype=np.uint8)
    nib = digit[mat]
    ok &= (nib != 255).all(axis=1)
    vals = np.zeros(len(raw), dtype=np.uint64)
    for k in range(16):
        vals = (vals << np.uint64(4)) | (nib[:, k].astype(np.uint64) & np.uint64(15))
    return np.where(ok, vals, np.uint64(0)), present
