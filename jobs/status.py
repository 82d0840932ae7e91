"""Where the pipeline stands, per date: which partitions are committed, uncommitted or
missing, their rows, each stage's run record and attempts, and whether the day is published.

No Spark and no data read: row counts come from commit markers (and Parquet footers for
the fleet's fetch logs), the published day from its manifest at ``publish.target``.
Exits 6 (:class:`jobs.errors.NotReady`) when the next run (the one after ``--to``) cannot
start: ``state/dt=--to`` or ``hosts/dt=--to`` is not committed.

Run: ``recrawl status [--from D0] [--to D] [--json]`` (default: the 7 days to --to, from the
first state partition at the earliest; --to defaults to the last date with a state partition).
"""
from __future__ import annotations

import json
import sys
from typing import Optional

from jobs import outage, partitions, storage
from jobs.cli import Parser, add_date_arg, guarded
from jobs.config import Config, add_config_args, config_from_args
from jobs.errors import NotReady, UsageError
from jobs.paths import date_range, schedule_date, schedule_manifest_key, shift_day
from jobs.runlog import ATTEMPTED, has_stage_record, read_attempts

#: The committed tables of a run date, in pipeline order (``_work/dt=D/candidates`` too).
COMMITTED = ("state", "hosts", "plan", "candidates", "metrics")
#: What the run for D+1 reads from D.
NEEDED_NEXT = ("state", "hosts")


def _partition_path(cfg: Config, table: str, day: str) -> str:
    if table == "candidates":
        return f"{cfg.paths.table('_work', day)}/candidates"
    return cfg.paths.table(table, day)


def partition_status(path: str) -> dict:
    """``{"status": committed|uncommitted|missing, "rows": n|None, "files": n|None}``."""
    marker = partitions.read_marker(path)
    if marker is not None:
        return {"status": "committed", "rows": int(marker.get("rows", 0)),
                "files": len(marker.get("files", []))}
    return {"status": "uncommitted" if storage.exists(path) else "missing", "rows": None,
            "files": None}


def fetch_logs_status(cfg: Config, day: str) -> dict:
    """The fleet's input: present (files, rows from footers), outage (declared) or missing."""
    files = partitions.visible_files(cfg.paths.table("fetch_logs", day))
    if files:
        rows = sum(storage.parquet_metadata(f).num_rows for f in files)
        return {"status": "present", "rows": rows, "files": len(files),
                "outage_marker": outage.declared(cfg, day)}
    if outage.declared(cfg, day):
        return {"status": "outage", "rows": 0, "files": 0}
    return {"status": "missing", "rows": None, "files": None}


def staged_status(cfg: Config, day: str) -> dict:
    """The staged schedule ``schedules/dt=D+1`` (``_shards.json``, written last by
    build_schedule)."""
    from jobs.fleet.schedule import read_shard_index

    path = cfg.paths.table("schedules", schedule_date(day))
    try:
        infos = read_shard_index(path)
    except FileNotFoundError:
        return {"status": "uncommitted" if storage.exists(path) else "missing", "rows": None,
                "files": None}
    return {"status": "committed", "rows": sum(int(i["rows"]) for i in infos),
            "files": len(infos)}


def published_status(cfg: Config, day: str) -> dict:
    """Whether ``schedules/dt=D+1`` is published at ``publish.target`` (its manifest)."""
    from jobs.objstore import open_store

    target = cfg.publish.target
    if not target:
        return {"status": "no target", "where": ""}
    try:
        store, location = open_store(target, endpoint_url=cfg.publish.endpoint_url or None)
        key = schedule_manifest_key(location.prefix, schedule_date(day))
        where = location.uri(key)
        if store.head(key) is None:
            return {"status": "no", "where": where}
        manifest = json.loads(store.get_bytes(key))
    except Exception as exc:  # noqa: BLE001 -- no credentials, endpoint down, 403: say so
        return {"status": "unreadable", "where": target,
                "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    return {"status": "yes", "where": where, "rows": manifest.get("totals", {}).get("rows"),
            "files": manifest.get("totals", {}).get("files")}


def runs_status(cfg: Config, day: str) -> list[dict]:
    """Each stage with a run record or an attempt on ``day``: done (record written), its
    attempts and the last one's start, seconds and outcome."""
    out = []
    for stage in ATTEMPTED:
        attempts = read_attempts(cfg, day, stage)
        done = has_stage_record(cfg, day, stage) if stage not in ("publish", "verify") else (
            bool(attempts) and attempts[-1]["outcome"] == "ok")
        if not attempts and not done:
            continue
        last = attempts[-1] if attempts else {}
        out.append({"stage": stage, "record": done, "attempts": len(attempts),
                    "started_at": last.get("started_at"), "seconds": last.get("seconds"),
                    "outcome": last.get("outcome")})
    return out


def day_status(cfg: Config, day: str, published: bool = True) -> dict:
    tables = {"fetch_logs": fetch_logs_status(cfg, day)}
    tables.update({t: partition_status(_partition_path(cfg, t, day)) for t in COMMITTED})
    tables["schedule"] = staged_status(cfg, day)
    doc = {"date": day, "tables": tables, "runs": runs_status(cfg, day)}
    if published:
        doc["published"] = published_status(cfg, day)
    return doc


def state_dates(cfg: Config) -> list[str]:
    """The ``dt=`` dates of ``state/`` (committed or not), oldest first."""
    return sorted(name[3:] for name, is_dir in storage.list_dir(cfg.paths.table("state"))
                  if is_dir and name.startswith("dt="))


def status(cfg: Config, first: Optional[str] = None, last: Optional[str] = None,
           published: bool = True) -> dict:
    """Every date of [first, last]: :func:`day_status`; and what the next run needs."""
    known = state_dates(cfg) if not (first and last) else []
    if last is None:
        if not known:
            raise UsageError(f"no state/ under {cfg.paths.root}: give --to")
        last = known[-1]
    if first is None:  # the week to --to, from the first state at the earliest
        first = max([shift_day(last, -6)] + [d for d in known[:1] if d <= last])
    if last < first:
        raise UsageError(f"--to {last} is before --from {first}")
    days = [day_status(cfg, d, published) for d in date_range(first, last)]
    need = {t: days[-1]["tables"][t]["status"] for t in NEEDED_NEXT}
    missing = [f"{t}/dt={last} is {s}" for t, s in need.items() if s != "committed"]
    return {"from": first, "to": last, "days": days,
            "next_run": {"date": shift_day(last, 1), "ready": not missing, "missing": missing}}


def _n(value) -> str:
    return "-" if value is None else f"{value:,}"


def render(doc: dict) -> str:
    out = [f"recrawl status {doc['from']} .. {doc['to']}"]
    for day in doc["days"]:
        out += ["", f"{day['date']}"]
        for table, s in day["tables"].items():
            extra = " (outage marker)" if s.get("outage_marker") else ""
            label = f"schedule dt={schedule_date(day['date'])}" if table == "schedule" else table
            out.append(f"  {label:<24} {s['status']:<12} {_n(s['rows']):>12} rows "
                       f"{_n(s['files']):>5} files{extra}")
        p = day.get("published")
        if p is not None:
            detail = (f"{_n(p.get('rows'))} rows, {p['where']}" if p["status"] == "yes" else
                      p.get("error") or p.get("where", ""))
            out.append(f"  {'published':<24} {p['status']:<12} {detail}")
        for r in day["runs"]:
            line = f"  run {r['stage']:<20} {'record' if r['record'] else 'no record':<12}"
            if r["attempts"]:
                line += (f" attempt {r['attempts']}: {r['started_at']}, {r['seconds']:.1f} s, "
                         f"{r['outcome']}")
            out.append(line.rstrip())
    nxt = doc["next_run"]
    out += ["", f"next run {nxt['date']}: " + ("ready" if nxt["ready"] else
                                               "NOT READY: " + "; ".join(nxt["missing"]))]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = Parser(description="Per date and table: committed / uncommitted / missing, rows, "
                                "run records and attempts, published or not. No Spark.",
                    epilog="Exit 6 when the next run cannot start (state or hosts of --to "
                           "not committed).")
    add_date_arg(parser, "--from", "first date (default: 6 days before --to)", dest="first",
                 required=False)
    add_date_arg(parser, "--to", "last date (default: the latest state partition)",
                 dest="last", required=False)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--no-published", action="store_true",
                        help="do not read publish.target (no object store access)")
    add_config_args(parser)
    args = parser.parse_args(argv)
    doc = status(config_from_args(args), args.first, args.last,
                 published=not args.no_published)
    sys.stdout.write(json.dumps(doc, indent=2) + "\n" if args.json else render(doc))
    sys.stdout.flush()
    if not doc["next_run"]["ready"]:
        raise NotReady(f"the run for {doc['next_run']['date']} cannot start: "
                       + "; ".join(doc["next_run"]["missing"]))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
