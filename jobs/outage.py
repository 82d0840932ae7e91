"""Outage days: a day the fleet did not fetch, declared, and carried forward without Spark.

A day with no fetch logs is an error (the fleet may simply be late, or its writer broken),
unless it is declared an outage: ``fetch_logs/dt=D/_NO_FETCHES.json`` (:func:`declare`,
written by ``recrawl update-state --date D --no-fetches`` or by the fleet's operator; the
fleet may write it itself). On a declared day, with no log file beside the marker:

* ``validate-logs`` checks the other inputs and records ``no_fetches``; the DAG's log
  sensor (``logs_present``) accepts the marker in place of logs;
* ``update-state`` carries the state forward (:func:`carry_forward`): ``state/dt=D`` and
  ``hosts/dt=D`` are byte copies of D-1's committed files. Nothing changes, λ̂ included;
  only the age of what we know grows, and that is computed from the timestamps at read
  time. Rows keep ``updated_dt`` (the run that last folded them), so the next fold decays
  their evidence over both days, exactly as two daily folds would. The run record says
  ``no_fetches`` and carries D-1's figures (no fetches, no audit, nothing quarantined);
* ``rebuild-state`` treats the day the same way (``jobs.core.replay``: no fold that day), so
  a rebuild over an outage equals the daily runs.

Push signals and importance rows of an outage day are not read (they are the next day's
input only if they are in the next day's partitions). A marker beside log files is a
refusal (:class:`jobs.errors.OutageRefused`): a day either was fetched or was not.
"""
from __future__ import annotations

import posixpath
import uuid
from typing import Optional

from jobs import metrics, partitions, storage
from jobs.config import Config
from jobs.errors import OutageRefused
from jobs.fleet.schedule import filesystem_for
from jobs.paths import previous_day
from jobs.runlog import read_stage_record, write_stage_record

MARKER = "_NO_FETCHES.json"
#: The tables an outage day carries forward from D-1.
CARRIED = ("state", "hosts")
#: Run-record figures that count the day's own fetches: 0 on an outage day.
TODAY_FIGURES = ("log_rows", "quarantined_fetch_logs", "quarantined_importance",
                 "quarantined_signals", "host_fetches", "host_errors", "host_throttled",
                 "audit_n", "audit_fresh")
NO_AUDIT = {"audit_freshness": None, "audit_freshness_lo": None, "audit_freshness_hi": None}


def marker_path(cfg: Config, day: str) -> str:
    return f"{cfg.paths.table('fetch_logs', day)}/{MARKER}"


def declared(cfg: Config, day: str) -> bool:
    """True when ``day`` is a declared outage day (its marker exists)."""
    return storage.exists(marker_path(cfg, day))


def check(cfg: Config, day: str) -> bool:
    """Whether ``day`` is an outage day; refuses a marker beside fetch-log files."""
    if not declared(cfg, day):
        return False
    files = partitions.visible_files(cfg.paths.table("fetch_logs", day))
    if files:
        raise OutageRefused(f"{marker_path(cfg, day)} declares no fetches on {day}, but "
                            f"{len(files)} fetch-log file(s) are there: remove the marker "
                            f"or the files")
    return True


def _check_no_logs(cfg: Config, day: str) -> None:
    files = partitions.visible_files(cfg.paths.table("fetch_logs", day))
    if files:
        raise OutageRefused(f"--no-fetches on {day}, but fetch_logs/dt={day} has "
                            f"{len(files)} file(s): the fleet did fetch that day")


def declare(cfg: Config, day: str, reason: str = "") -> dict:
    """Write ``day``'s outage marker (idempotent); refused when the day has fetch logs."""
    _check_no_logs(cfg, day)
    body = storage.read_json(marker_path(cfg, day)) or {"date": day, "no_fetches": True,
                                                         "reason": reason}
    storage.write_json(marker_path(cfg, day), body)
    return body


def outage_record(prev: dict) -> dict:
    """An outage day's update_state run record from D-1's: the same state figures, no
    fetches, no audit, nothing quarantined, ``no_fetches`` true."""
    record = {**prev, **dict.fromkeys(TODAY_FIGURES, 0), **NO_AUDIT, "no_fetches": True}
    return record


def carry_forward(cfg: Config, run_date: str, reason: str = "") -> dict:
    """Declare ``run_date`` an outage (if not yet) and commit D-1's state and hosts as D's.

    Raises
    ------
    OutageRefused
        The day has fetch-log files.
    MissingPartitionError
        D-1's state or hosts (or its update_state record) is missing or uncommitted.
    """
    _check_no_logs(cfg, run_date)
    prev_day = previous_day(run_date)
    sources = {t: partitions.committed_files(cfg.paths.table(t, prev_day), t) for t in CARRIED}
    prev = read_stage_record(cfg, prev_day, "update_state")
    declare(cfg, run_date, reason)
    for table, files in sources.items():
        _copy_commit(files, cfg.paths.table(table, run_date), table)
    record = {**outage_record(prev), "carried_from": prev_day}
    write_stage_record(cfg, run_date, "update_state", record)
    metrics.write_state_rows(cfg, [run_date], [record], "update_state")
    return record


def _copy_commit(files: list[str], dest: str, table: str) -> Optional[dict]:
    """Byte copies of ``files`` into ``dest``, committed as its new commit."""
    job = uuid.uuid4()
    fs, _ = filesystem_for(dest)
    copied = []
    for k, src in enumerate(files):
        target = f"{dest.rstrip('/')}/part-{k:05d}-{job}-c000.snappy.parquet"
        _, src_path = filesystem_for(src)
        _, dst_path = filesystem_for(target)
        storage.make_dirs(fs, posixpath.dirname(dst_path))
        fs.copy_file(src_path, dst_path)
        copied.append(target)
    return partitions.commit_files(dest, table, copied)
