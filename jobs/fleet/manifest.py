"""A published day's ``_manifest.json``: its schema version rule and its parsed form.

The version is ``"MAJOR.MINOR"`` (docs/fleet.md, "Versions"). A reader accepts every
manifest of its own MAJOR, older or newer MINOR: a minor change only adds (a manifest
field, an optional column); fields and columns a reader does not know are ignored. Anything
else (a column removed, retyped or made required, a new lane or method value, a changed
meaning) is a new MAJOR, which a reader refuses with :class:`ManifestVersionError` rather
than guess. Manifests before 2.0 wrote the integer ``1`` (read here as 1.0, so refused).

Pure Python: the publisher (``jobs.publish``), ``jobs.verify`` and the fleet reader
(``jobs.fleet.reader``) share it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

MANIFEST_VERSION = "2.0"  # what this code writes; a reader accepts any "2.x"
_VERSION = re.compile(r"([0-9]{1,6})\.([0-9]{1,6})")


class ManifestError(ValueError):
    """A manifest cannot be used; the message names where it was read and why."""


class ManifestVersionError(ManifestError):
    """The manifest's MAJOR schema version is not the reader's (or is unreadable)."""


def parse_version(value) -> tuple[int, int]:
    """``"MAJOR.MINOR"`` as ``(major, minor)``; the legacy integer ``n`` is ``(n, 0)``.

    Raises
    ------
    ManifestVersionError
        For anything else (``"2"``, ``"2.1.0"``, ``" 2.1"``, ``True``, null).
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, 0
    match = _VERSION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ManifestVersionError(f"schema_version {value!r} is not \"MAJOR.MINOR\"")
    return int(match.group(1)), int(match.group(2))


SUPPORTED_MAJOR = parse_version(MANIFEST_VERSION)[0]


def check_version(value, where: str, major: int = SUPPORTED_MAJOR) -> tuple[int, int]:
    """The manifest's ``(major, minor)`` if its MAJOR is ``major``, else ManifestVersionError."""
    try:
        version = parse_version(value)
    except ManifestVersionError as exc:
        raise ManifestVersionError(f"manifest at {where}: {exc}") from None
    if version[0] != major:
        raise ManifestVersionError(
            f"manifest at {where} has schema_version {value!r} (major {version[0]}); this "
            f"reader understands major {major} only (any {major}.x): upgrade the reader"
            if version[0] > major else
            f"manifest at {where} has schema_version {value!r} (major {version[0]}); this "
            f"reader understands major {major} only (any {major}.x): republish the day")
    return version


@dataclass(frozen=True)
class ShardEntry:
    """One shard of a published day: its id, row count (0: no file) and data file.

    ``key``, ``bytes`` and ``sha256`` are None for an empty shard.
    """

    shard: int
    rows: int
    hosts: int
    key: str | None
    bytes: int | None
    sha256: str | None

    @property
    def empty(self) -> bool:
        return self.key is None


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: every shard ``0 .. shard_count-1`` once, in order."""

    version: tuple[int, int]
    date: str
    shard_count: int
    shards: tuple[ShardEntry, ...]
    raw: dict

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)


def _int(value, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def parse_manifest(data, where: str) -> Manifest:
    """Parse and check a manifest (bytes or an already decoded dict).

    Raises
    ------
    ManifestVersionError
        A different MAJOR version.
    ManifestError
        Not JSON, or a same-major manifest whose shard listing is inconsistent: shards
        not exactly ``0 .. shard_count-1``, a shard's file missing from ``files`` or
        disagreeing with it, a file no shard names.
    """
    if isinstance(data, (bytes, bytearray, str)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ManifestError(f"manifest at {where} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"manifest at {where} is not a JSON object")
    version = check_version(data.get("schema_version"), where)
    count, listed, files = data.get("shard_count"), data.get("shards"), data.get("files")
    if not _int(count, 1) or not isinstance(listed, list) or not isinstance(files, list):
        raise ManifestError(f"manifest at {where} lacks shard_count/shards/files")
    by_key = {f.get("key"): f for f in files if isinstance(f, Mapping)}
    if len(by_key) != len(files):
        raise ManifestError(f"manifest at {where}: files must be objects with distinct keys")
    shards = []
    for i, item in enumerate(listed):
        if not isinstance(item, Mapping) or item.get("shard") != i:
            raise ManifestError(f"manifest at {where}: shards[{i}] is not shard {i} (every "
                                f"shard 0..{count - 1} is listed once, in order)")
        rows, hosts, key = item.get("rows"), item.get("hosts"), item.get("key")
        if not _int(rows, 0) or not _int(hosts, 0):
            raise ManifestError(f"manifest at {where}: shard {i} lacks rows/hosts counts")
        if key is None:
            if rows or hosts:
                raise ManifestError(f"manifest at {where}: shard {i} has {rows} rows but no file")
            shards.append(ShardEntry(i, 0, 0, None, None, None))
            continue
        entry = by_key.pop(key, None)
        if entry is None or entry.get("shard") != i or entry.get("rows") != rows:
            raise ManifestError(f"manifest at {where}: shard {i}'s file {key!r} is not in "
                                f"files with the same shard and rows")
        if not _int(entry.get("bytes"), 1) or not isinstance(entry.get("sha256"), str):
            raise ManifestError(f"manifest at {where}: file {key!r} lacks bytes/sha256")
        shards.append(ShardEntry(i, rows, hosts, key, entry["bytes"], entry["sha256"]))
    if len(shards) != count:
        raise ManifestError(f"manifest at {where}: {len(shards)} shards listed, shard_count "
                            f"is {count}")
    if by_key:
        raise ManifestError(f"manifest at {where}: files {sorted(by_key)[:3]} belong to no shard")
    return Manifest(version, str(data.get("date")), count, tuple(shards), data)
