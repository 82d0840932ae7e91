"""Vectorised RFC 7231 IMF-fixdate formatting and parsing ("Sun, 06 Nov 1994 08:49:37 GMT")."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lab.sim.rand import _string_array

IMF_FORMAT = "%a, %d %b %Y %H:%M:%S GMT"
_WEEKDAYS = np.frombuffer(b"MonTueWedThuFriSatSun", dtype=np.uint8).reshape(7, 3)
_MONTHS = np.frombuffer(b"JanFebMarAprMayJunJulAugSepOctNovDec", dtype=np.uint8).reshape(12, 3)
_WIDTH = 29


def _civil_from_days(days: np.ndarray):
    # Howard Hinnant's days→civil algorithm, vectorised (proleptic Gregorian).
    z = days + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


def _digits(mat, col, values, width):
    for k in range(width - 1, -1, -1):
        mat[:, col + k] = 48 + values % 10
        values = values // 10


def format_http_dates(epoch_seconds: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Format integer Unix seconds as IMF-fixdate Arrow strings (nulls where not ``valid``)."""
    secs = np.asarray(epoch_seconds, dtype=np.int64)
    if valid is None:
        valid = np.ones(len(secs), dtype=bool)
    s = secs[valid]
    days = np.floor_divide(s, 86400)
    sod = s - days * 86400
    year, month, day = _civil_from_days(days)
    if len(s) and (year.min() < 1000 or year.max() > 9999):
        raise ValueError("HTTP dates must fall in years 1000-9999")
    mat = np.empty((len(s), _WIDTH), dtype=np.uint8)
    mat[:, :] = np.frombuffer(b"Www, DD Mon YYYY HH:MM:SS GMT", dtype=np.uint8)
    mat[:, 0:3] = _WEEKDAYS[(days + 3) % 7]  # 1970-01-01 was a Thursday
    _digits(mat, 5, day, 2)
    mat[:, 8:11] = _MONTHS[month - 1]
    _digits(mat, 12, year, 4)
    _digits(mat, 17, sod // 3600, 2)
    _digits(mat, 20, (sod // 60) % 60, 2)
    _digits(mat, 23, sod % 60, 2)
    lengths = np.where(valid, _WIDTH, 0).astype(np.int32)
    offsets = np.zeros(len(secs) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return _string_array(mat.tobytes(), offsets, valid)


def parse_http_dates(strings) -> tuple[np.ndarray, np.ndarray]:
    """Parse IMF-fixdate strings to Unix seconds.

    Returns
    -------
    seconds : ndarray of int64
        Parsed value, 0 where absent or unparseable.
    ok : ndarray of bool
        True where a well-formed date was given.
    """
    arr = strings if isinstance(strings, pa.Array) else pa.array(strings, type=pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    parsed = pc.strptime(arr, format=IMF_FORMAT, unit="s", error_is_null=True)
    ok = np.asarray(parsed.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    secs = parsed.cast(pa.int64()).fill_null(0).to_numpy()
    return secs.astype(np.int64), ok
