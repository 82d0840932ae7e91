"""Stage 1: is the day's input there and does every file meet its contract?

Reads Parquet footers only (no data), so it runs on the driver without Spark. Fails
with a SchemaError naming the file and column; row-level problems are left to
update_state, which quarantines them.

Run: ``python -m jobs.validate_logs --date D``.
"""
from __future__ import annotations

import sys

from jobs import ingest, outage, partitions, schemas, snapshots
from jobs.cli import stage_main
from jobs.config import Config
from jobs.runlog import write_stage_record


def logs_present(cfg: Config, run_date: str) -> bool:
    """True once the day's fetch-log partition holds at least one data file, or the day is
    a declared outage (:mod:`jobs.outage`)."""
    return (bool(partitions.visible_files(cfg.paths.table("fetch_logs", run_date)))
            or outage.declared(cfg, run_date))


def run(cfg: Config, run_date: str) -> dict:
    p = cfg.paths
    no_fetches = outage.check(cfg, run_date)
    checks = [
        (schemas.FETCH_LOG, p.table("fetch_logs", run_date), not no_fetches),
        (schemas.SIGNALS, p.table("signals", run_date), False),
        (schemas.FRONTIER, p.table("frontier", run_date), False),
    ]
    if cfg.intake.enabled:  # intake's input: the fleet's robots.txt, sitemaps and feeds
        snapshots.require_dated(cfg, "host_policy", "intake")  # intake writes its dt=D
        checks.append((schemas.DOCUMENTS, p.table("documents", run_date), not no_fetches))
    record = {}
    for contract, uri, required in checks:
        record[f"{contract.name}_files"] = len(ingest.checked_files(contract, uri, required))
    # The importance / host_policy snapshot the day's run reads (jobs.snapshots), not the
    # whole prefix.
    for contract in (schemas.IMPORTANCE, schemas.HOST_POLICY):
        record[f"{contract.name}_files"] = len(ingest.snapshot_footers(cfg, contract, run_date))
    if no_fetches:
        record["no_fetches"] = True
    write_stage_record(cfg, run_date, "validate_logs", record)
    return record


def main(argv=None) -> int:
    return stage_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
