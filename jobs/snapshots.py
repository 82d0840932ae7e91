"""Reference tables read as of the run date: the ``importance/`` and ``host_policy/`` snapshots.

Upstream publishes each of these tables as a whole, again and again; a run reads exactly one
version of it, chosen per run date D (docs/contract.md, "Snapshots"):

* **Dated layout** ``<table>/dt=X/``: the latest *committed* snapshot with X <= D. Committed
  means what it means for recrawl's own partitions (:mod:`jobs.partitions`): a
  ``_COMMITTED.json`` marker naming the files, or Spark's ``_SUCCESS`` (its job committer
  writes it after the last file; every file under ``dt=X/`` is then read). A newer dated
  directory without either is being written: it is skipped, named in the run record, and the
  previous committed snapshot is read. So a demotion or a lowered crawl delay takes effect on
  the first run dated on or after its snapshot, and no other snapshot is ever read.
* **Flat layout** (small deployments): Parquet files under ``<table>/`` and no ``dt=``
  directory: one snapshot, valid for every date, with no age.
* Both layouts under one prefix: :class:`jobs.errors.SchemaError` (which one is current
  cannot be told); a ``dt=`` directory whose date does not parse: the same.
* No prefix, or one without any data file or ``dt=`` directory: the table is absent, as it
  was before snapshots (both tables are optional; every URL or host gets the defaults).
* Dated snapshots but none committed with X <= D (a backfill older than the first, or the
  only ones still being written): :class:`jobs.errors.MissingPartitionError`. The defaults
  would silently promote every demoted page and undo every crawl delay.

A snapshot older than ``ingest.snapshot_max_age_days`` (D - X, in days) is still read, with a
warning in the run record (``warnings``) and on the daily report.

A stage that writes ``<table>/dt=D`` itself (intake, ``host_policy``) carries forward the
snapshot a run of D-1 reads (:func:`previous`) and refuses the flat layout
(:func:`require_dated`): its dated snapshot beside flat files would be both layouts at once.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from datetime import date
from typing import Optional

from jobs import partitions, storage
from jobs.config import Config
from jobs.errors import MissingPartitionError, SchemaError
from jobs.paths import check_date, shift_day

#: The snapshot tables (both optional).
TABLES = ("importance", "host_policy")
_DT = "dt="


@dataclass(frozen=True)
class Snapshot:
    """The one version of ``table`` a run of ``run_date`` reads."""

    table: str
    path: str                  # the directory read: ``<table>/dt=X`` or the prefix itself
    dt: Optional[str]          # None: the flat layout (undated, valid for every date)
    files: tuple[str, ...]
    run_date: str
    skipped: tuple[str, ...] = field(default=())  # newer dated directories <= D, uncommitted

    @property
    def age_days(self) -> Optional[int]:
        """D - X in days (None for the flat layout)."""
        if self.dt is None:
            return None
        return (date.fromisoformat(self.run_date) - date.fromisoformat(self.dt)).days

    def warnings(self, max_age_days: float) -> list[str]:
        """One line per thing a person should look at: a stale or a skipped snapshot."""
        out = []
        if self.age_days is not None and self.age_days > max_age_days:
            out.append(f"{self.table}: the latest committed snapshot is dt={self.dt}, "
                       f"{self.age_days} days before {self.run_date} (more than "
                       f"ingest.snapshot_max_age_days = {max_age_days:g}); read anyway")
        for d in self.skipped:
            out.append(f"{self.table}: snapshot dt={d} is not committed (no _COMMITTED.json "
                       f"or _SUCCESS): skipped, dt={self.dt} read instead")
        return out

    def record(self) -> dict:
        """The run record's entry for this snapshot: its partition relative to the root (a
        record is a function of the inputs, wherever the root is), its date, file count, age
        and the newer snapshots skipped."""
        partition = self.table if self.dt is None else f"{self.table}/dt={self.dt}"
        return {"partition": partition, "dt": self.dt, "files": len(self.files),
                "age_days": self.age_days, "skipped_uncommitted": list(self.skipped)}


def _committed(path: str, table: str) -> Optional[list[str]]:
    """The files of a committed dated snapshot, or None when it is not committed."""
    if partitions.is_committed(path):
        return partitions.committed_files(path, table)
    if storage.exists(f"{path.rstrip('/')}/_SUCCESS"):
        return storage.list_parquet_files(path)
    return None


def _layout(root: str, table: str) -> tuple[list[str], list[str]]:
    """(the dates of the ``dt=`` directories, the undated data files) under ``root``.

    Raises SchemaError for both at once, or for a ``dt=`` directory that is not a date."""
    dated, flat = [], []
    for name, is_dir in storage.list_dir(root):
        if name.startswith(("_", ".")):
            continue
        if is_dir and name.startswith(_DT):
            try:
                dated.append(check_date(name[len(_DT):]))
            except ValueError as err:
                raise SchemaError(table, f"{root}/{name}", None,
                                  f"a snapshot directory must be dt=YYYY-MM-DD ({err})") from None
        else:
            flat += storage.list_parquet_files(f"{root}/{name}")
    if dated and flat:
        raise SchemaError(table, root, None,
                          f"both dated snapshots (dt=...) and undated files (e.g. "
                          f"{posixpath.basename(flat[0])}) under one prefix: which one is "
                          f"current cannot be told; keep one layout (docs/contract.md, "
                          f"\"Snapshots\")")
    return dated, flat


def find(cfg: Config, table: str, run_date: str) -> Optional[Snapshot]:
    """The snapshot of ``table`` a run of ``run_date`` reads; None when the table is absent
    (:func:`find_at` of the table's prefix under ``paths.root``)."""
    return find_at(cfg.paths.table(table), table, run_date)


def find_at(prefix: str, table: str, run_date: str) -> Optional[Snapshot]:
    """The snapshot under ``prefix`` (the table's directory) a run of ``run_date`` reads;
    None when the table is absent.

    Raises
    ------
    SchemaError
        Dated and flat files under one prefix, or a ``dt=`` directory that is not a date.
    MissingPartitionError
        Dated snapshots exist, but none committed is dated on or before ``run_date``.
    """
    check_date(run_date)
    root = prefix.rstrip("/")
    dated, flat = _layout(root, table)
    if not dated:
        return Snapshot(table, root, None, tuple(flat), run_date) if flat else None
    skipped = []
    for d in sorted((d for d in dated if d <= run_date), reverse=True):
        path = f"{root}/{_DT}{d}"
        files = _committed(path, table)
        if files is None:
            skipped.append(d)
            continue
        return Snapshot(table, path, d, tuple(files), run_date, tuple(skipped))
    first = min(dated)
    why = (f"the first is dt={first}" if first > run_date else
           f"none of dt={', dt='.join(sorted(skipped))} is committed")
    raise MissingPartitionError(table, root, f"no committed snapshot dated on or before "
                                             f"{run_date} ({why}); the defaults are no "
                                             f"substitute for a table that exists")


def require_dated(cfg: Config, table: str, writer: str) -> None:
    """Refuse the flat layout of ``table`` for ``writer``, a stage that writes
    ``<table>/dt=D`` itself: beside undated files that would be both layouts at once.

    Raises
    ------
    SchemaError
        The table holds undated files (or already both layouts).
    """
    root = cfg.paths.table(table).rstrip("/")
    _, flat = _layout(root, table)
    if flat:
        raise SchemaError(table, root, None,
                          f"undated snapshot files (e.g. {posixpath.basename(flat[0])}) "
                          f"while {writer} writes {table}/dt=D: move them into a dt=YYYY-MM-DD "
                          f"directory (with _SUCCESS), or turn {writer} off (docs/contract.md, "
                          f"\"Snapshots\")")


def previous(cfg: Config, table: str, run_date: str) -> Optional[Snapshot]:
    """The snapshot a run of the day before ``run_date`` reads (:func:`find`): what a stage
    writing ``<table>/dt=D`` (intake) carries forward. None when the table is absent or its
    first dated snapshot is ``run_date`` or later (nothing earlier to carry)."""
    day_before = shift_day(check_date(run_date), -1)
    dated, _ = _layout(cfg.paths.table(table).rstrip("/"), table)
    if dated and min(dated) > day_before:
        return None
    return find(cfg, table, day_before)


def record(cfg: Config, run_date: str) -> dict:
    """The run record's ``snapshots`` (table -> :meth:`Snapshot.record`, None when absent)
    and ``warnings`` (:meth:`Snapshot.warnings`) for every snapshot table."""
    snaps = {t: find(cfg, t, run_date) for t in TABLES}
    warnings = [w for s in snaps.values() if s is not None
                for w in s.warnings(cfg.ingest.snapshot_max_age_days)]
    return {"snapshots": {t: (s.record() if s is not None else None) for t, s in snaps.items()},
            "warnings": warnings}
