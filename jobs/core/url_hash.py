r"""XXH64 of many strings at once (numpy), and a uniform number in [0, 1) from it.

The planner hashes every URL of the page table in every allocation pass (audit-sample
membership, the audit's day and time), so the hash runs over whole arrays: the strings'
UTF-8 bytes come from one Arrow buffer and the XXH64 rounds run as numpy operations over
all strings at once, one loop step per 32-byte stripe or tail word, not per string.

The function is the standard XXH64 (Collet, https://github.com/Cyan4973/xxHash, spec
``doc/xxhash_spec.md``) of the string's UTF-8 bytes with a 64-bit seed, read little-endian,
so it is the same on every platform and in every process; ``XXH64(b"", 0) =
0xEF46DB3751D8E999`` and Spark's ``xxhash64(col)`` is this function with seed 42 (both
checked in ``tests/core/test_lanes.py``). A value that is not a ``str`` is hashed as ``str(v)``.

:func:`unit` maps the hash to :math:`u = \lfloor h / 2^{11} \rfloor \cdot 2^{-53}`, the top
53 bits as a double: uniform on a grid of :math:`2^{-53}` in [0, 1), never 1.0.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

_M = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_U = {p: np.uint64(p) for p in (_P1, _P2, _P3, _P4, _P5)}


def _rotl(x, r: int):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc, lane):
    return _rotl(acc + lane * _U[_P2], 31) * _U[_P1]


def _merge(h, v):
    return (h ^ _round(np.uint64(0), v)) * _U[_P1] + _U[_P4]


def utf8_buffer(values):
    """The UTF-8 bytes of every string, back to back: (bytes padded with 32 zeros,
    start offsets, lengths), via one Arrow array (no Python loop over the strings)."""
    obj = np.asarray(values, dtype=object)
    try:
        arr = pa.array(obj, type=pa.large_string())
        if arr.null_count:
            raise TypeError("null")
    except (pa.ArrowException, TypeError):  # not all str: hash str(v), as documented
        arr = pa.array(pd.Series(obj, dtype=object).astype(str).to_numpy(dtype=object),
                       type=pa.large_string())
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, dtype="<i8", count=len(arr) + 1, offset=8 * arr.offset)
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    # Padding: every 8-byte read below starts inside a string, so it ends inside the pad.
    size = -(-(int(offsets[-1]) + 32) // 8) * 8
    buf = np.zeros(size, dtype=np.uint8)
    buf[:offsets[-1] - offsets[0]] = raw[offsets[0]:offsets[-1]]
    start = (offsets[:-1] - offsets[0]).astype(np.int64)
    return buf, start, np.diff(offsets).astype(np.int64)


def _reader(buf, width: int):
    """Little-endian unsigned words of ``width`` bytes starting at ANY byte position: a
    strided view with a one-byte step over the padded buffer (no copy)."""
    words = buf.view(f"<u{width}")
    view = np.lib.stride_tricks.as_strided(words, shape=(buf.size - width + 1,), strides=(1,))
    return lambda pos: view[pos].astype(np.uint64)


def xxh64(values, seed: int = 0) -> np.ndarray:
    """XXH64 of each value's UTF-8 bytes with ``seed`` (uint64 array, one per value).

    Steps (spec §3), vectorised over the strings: strings of 32 bytes or more run four
    accumulators over their 32-byte stripes and merge them; shorter ones start at
    seed + P5. Then the length is added, the remaining 8-byte words, one 4-byte word and
    single bytes are mixed in, and the avalanche scrambles the result.
    """
    buf, start, length = utf8_buffer(values)
    n, seed = length.size, int(seed) & _M
    read64, read32 = _reader(buf, 8), _reader(buf, 4)
    h = np.full(n, (seed + _P5) & _M, dtype=np.uint64)
    stripes = length // 32
    long = np.flatnonzero(stripes > 0)
    if long.size:
        init = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        acc = [np.full(long.size, v, dtype=np.uint64) for v in init]
        count = stripes[long]
        for k in range(int(count.max())):
            act = np.flatnonzero(count > k)
            pos = start[long[act]] + 32 * k
            for lane in range(4):
                acc[lane][act] = _round(acc[lane][act], read64(pos + 8 * lane))
        hl = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
        for lane in range(4):
            hl = _merge(hl, acc[lane])
        h[long] = hl
    h += length.astype(np.uint64)
    pos = start + 32 * stripes
    rest = length - 32 * stripes
    for j in range(3):  # 8-byte words
        act = np.flatnonzero(rest >= 8 * (j + 1))
        k1 = _round(np.uint64(0), read64(pos[act] + 8 * j))
        h[act] = _rotl(h[act] ^ k1, 27) * _U[_P1] + _U[_P4]
    pos, rest = pos + 8 * (rest // 8), rest % 8
    act = np.flatnonzero(rest >= 4)  # one 4-byte word
    h[act] = _rotl(h[act] ^ (read32(pos[act]) * _U[_P1]), 23) * _U[_P2] + _U[_P3]
    four = rest >= 4
    pos, rest = pos + 4 * four, rest - 4 * four
    for j in range(3):  # single bytes
        act = np.flatnonzero(rest > j)
        byte = buf[pos[act] + j].astype(np.uint64)
        h[act] = _rotl(h[act] ^ (byte * _U[_P5]), 11) * _U[_P1]
    h ^= h >> np.uint64(33)
    h *= _U[_P2]
    h ^= h >> np.uint64(29)
    h *= _U[_P3]
    h ^= h >> np.uint64(32)
    return h


def unit(values, seed: int) -> np.ndarray:
    """A uniform number in [0, 1) per value: the top 53 bits of ``xxh64(values, seed)``."""
    return (xxh64(values, seed) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def label_seed(label: str) -> int:
    """A seed named by a string: ``XXH64(label, seed 0)`` (so distinct labels give
    unrelated hash functions of the same URL)."""
    return int(xxh64([label], 0)[0])
