"""Explain one URL's plan for run date D: state, rate and reason, slots, last fetches.

Reads a handful of rows with pyarrow filters on the ``url`` column, no Spark: the URL's row
of ``state/dt=D`` (λ̂ with its interval, the prior, observations, validators, push signals),
its host's row of ``hosts/dt=D`` (validator trust class, cap factor), its row of
``plan/dt=D`` (planned rate, lane, reason, marginal value, host cap) beside allocate's run
record (the day's multiplier), the operator's overrides in force on the URL or its host
(``overrides/``), its rows in the schedule for D+1 (the published day at
``publish.target`` by default, or the staging files under ``paths.root``), and its rows in
``fetch_logs`` of the last ``--days`` days. Every partition it needs must be committed (or,
for the schedule, published): a missing one is :class:`MissingPartitionError` (exit 2),
never an empty answer. A URL the run for D does not know is :class:`jobs.errors.UnknownURL`
("URL not known", exit 2). A schedule that cannot be read (not published yet, no
credentials, endpoint down) does not hide the rest: the answer says why in its schedule
section and still shows state, plan and fetches.

Run: ``recrawl explain URL --date D [--json] [--days N] [--schedule published|staging]``.
"""
from __future__ import annotations

import json
import sys

import pandas as pd

from jobs import partitions
from jobs.cli import Parser, add_date_arg, guarded
from jobs.config import Config, add_config_args, config_from_args
from jobs.core.plan_table import REASONS
from jobs.core.urls import canonical_url
from jobs.fleet.schedule import read_shard_index
from jobs.errors import MissingPartitionError, UnknownURL, UsageError
from jobs.paths import planning_window, schedule_date, shift_day
from jobs.runlog import read_stage_record
from jobs.table_reader import plain, rows_where

STATE_COLUMNS = ("url", "host", "lane", "importance", "lambda_hat", "lambda_lo", "lambda_hi",
                 "lambda_prior", "n_fetches", "n_observations", "n_changes", "exposure_days",
                 "n_errors", "last_status", "first_seen", "last_fetch_at", "last_success_at",
                 "last_change_at", "last_known_at", "etag", "last_modified", "content_hash",
                 "interval_s", "lm_n", "lm_changes", "lm_exposure", "gone", "consecutive_gone",
                 "signal_claim_at",
                 "pending_signal_at", "signal_unchanged_at", "fingerprint_version")
HOST_COLUMNS = ("host", "validator_class", "trust_etag", "trust_lm", "audit_wanted",
                "signal_accuracy", "signal_trusted", "cap_factor", "urls_known", "nominal_cap",
                "rate_limit", "health_verdict", "blocked_until")
FETCH_COLUMNS = ("fetched_at", "status", "conditional", "etag", "last_modified",
                 "content_hash", "bytes", "elapsed_ms", "lane")


def _stale_since_text(p: dict, h: dict | None) -> str:
    """Which instant the plan's p_stale_now counted from (jobs.core.plan_work.stale_since)."""
    if "stale_since_at" not in p:  # a plan written before the column: the last success
        return f"the last success {_when(p.get('last_success_at'))}"
    since = _when(p.get("stale_since_at"))
    if h is not None and (h.get("trust_etag") or h.get("trust_lm")):
        return f"the last success {since}: this host's 304s are trusted"
    return (f"the last confirmed copy {since}: a full fetch with a hash or a trusted 304; "
            f"this host's 304s are not trusted")


def _dated_text(s: dict) -> str:
    """The Last-Modified evidence λ̂ also reads (``lm_*``), which the change bits do not show:
    a page found unchanged for months has a low λ̂ after a few fetches because of it."""
    n = s.get("lm_n")
    if n is None or not n > 0:
        return ("  dated by Last-Modified: nothing (no trusted Last-Modified yet; the change "
                "bits above are all its evidence)")
    return (f"  dated by Last-Modified: {_num(n, '{:.3g}')} observations "
            f"({_num(s.get('lm_changes'), '{:.3g}')} changes) over "
            f"{_num(s.get('lm_exposure'), '{:.1f}')} days (decayed; a dated first copy "
            f"adds its age: docs/estimation.md, \"The age at discovery\")")


def _committed_rows(cfg: Config, table: str, dt: str, column: str, value: str, columns=None):
    return rows_where(partitions.committed_files(cfg.paths.table(table, dt), table), column, value,
                 columns)


def _record(frame: pd.DataFrame) -> dict | None:
    if frame.empty:
        return None
    return {k: plain(v) for k, v in frame.iloc[0].items()}


def schedule_slots(cfg: Config, run_date: str, url: str, host: str, source: str) -> dict:
    """The URL's rows in the schedule for D+1: the published day (its manifest, only the
    host's shard) or the staging files (``_shards.json``)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from jobs.fleet.schedule import shard_of

    day = schedule_date(run_date)
    shard = int(shard_of(host, cfg.schedule.n_shards))
    if source == "published":
        from jobs import verify

        where = cfg.publish.target
        try:
            rows = verify.read_schedule(where, day, cfg.publish.endpoint_url or None,
                                        shards={shard})
        except verify.VerificationError as exc:
            raise MissingPartitionError("schedules", f"{where} dt={day}", str(exc)) from None
        except (BotoCoreError, ClientError) as exc:  # no credentials, endpoint down, 403, ...
            raise MissingPartitionError(
                "schedules", f"{where} dt={day}",
                f"unreadable ({type(exc).__name__}: {exc}); set the object store's credentials "
                "or read the staging files with --schedule staging") from None
    else:
        where = cfg.paths.table("schedules", day)
        try:
            infos = read_shard_index(where)
        except FileNotFoundError as exc:
            raise MissingPartitionError("schedules", where, str(exc)) from None
        files = [f"{where.rstrip('/')}/{i['file']}" for i in infos if i["shard"] == shard]
        rows = rows_where(files, "host", host)
    rows = rows[rows["url"] == url] if len(rows) else rows
    slots = [{k: plain(v) for k, v in r.items() if k not in ("host", "url")}
             for r in rows.sort_values("not_before").to_dict("records")] if len(rows) else []
    return {"source": source, "where": where, "date": day, "shard": shard, "slots": slots}


def last_fetches(cfg: Config, run_date: str, url: str, days: int) -> dict:
    """fetch_logs rows of the URL on D-days+1 .. D, oldest first. ``fetch_logs/dt=D`` must
    exist; earlier days a deployment did not have yet are listed as missing."""
    rows, missing = [], []
    for k in range(days - 1, -1, -1):
        dt = shift_day(run_date, -k)
        files = partitions.visible_files(cfg.paths.table("fetch_logs", dt))
        if not files:
            if dt == run_date:
                raise MissingPartitionError("fetch_logs", cfg.paths.table("fetch_logs", dt),
                                            "no fetch-log files for the run date")
            missing.append(dt)
            continue
        found = rows_where(files, "url", url, ("url", *FETCH_COLUMNS))
        rows += [{k2: plain(v) for k2, v in r.items() if k2 != "url"}
                 for r in found.to_dict("records")]
    rows.sort(key=lambda r: r["fetched_at"] or "")
    return {"days": [shift_day(run_date, -(days - 1)), run_date], "missing_days": missing,
            "rows": rows}


def explain(cfg: Config, run_date: str, url: str, *, days: int = 3,
            schedule: str | None = None) -> dict:
    """Everything recrawl knows about ``url`` for the run of ``run_date`` (a JSON-ready dict).

    Raises
    ------
    MissingPartitionError
        A partition it reads (state, plan, hosts, run record, fetch_logs of D) is missing
        or uncommitted. An unreadable schedule is not an error: ``schedule["error"]`` says
        why and ``schedule["slots"]`` is None.
    UnknownURL
        Neither state/dt=D nor plan/dt=D has the URL.
    """
    if days < 1:
        raise UsageError("--days must be >= 1")
    url = canonical_url(url) or url  # any spelling of the page finds its row
    state = _record(_committed_rows(cfg, "state", run_date, "url", url, STATE_COLUMNS))
    plan = _record(_committed_rows(cfg, "plan", run_date, "url", url))
    if state is None and plan is None:
        raise UnknownURL(url, run_date)
    host = (state or plan)["host"]
    hosts = _record(_committed_rows(cfg, "hosts", run_date, "host", host, HOST_COLUMNS))
    record = read_stage_record(cfg, run_date, "allocate")
    allocate = {k: record.get(k) for k in ("policy", "policy_level", "refresh_value",
                                           "fast_rate", "floors_affordable")}
    if plan is not None:
        plan["reason_text"] = REASONS.get(plan["reason"], plan["reason"])
    from jobs import overrides

    active, _ = overrides.load(cfg, run_date)
    source = schedule or ("published" if cfg.publish.target else "staging")
    start, _ = planning_window(run_date)
    return {
        "url": url, "host": host, "run_date": run_date,
        "window_start": pd.Timestamp(start, unit="s", tz="UTC").isoformat(),
        "state": state, "host_row": hosts, "plan": plan, "allocate": allocate,
        "overrides": overrides.for_target(active, url, host),
        "schedule": _schedule_or_why(cfg, run_date, url, host, source),
        "fetches": last_fetches(cfg, run_date, url, days),
    }


def _schedule_or_why(cfg: Config, run_date: str, url: str, host: str, source: str) -> dict:
    """:func:`schedule_slots`, or, when the schedule cannot be read, where it was looked for
    and why (``slots`` None, ``error`` the named cause)."""
    from jobs.shards import shard_of

    try:
        return {**schedule_slots(cfg, run_date, url, host, source), "error": None}
    except MissingPartitionError as err:
        where = (cfg.publish.target if source == "published"
                 else cfg.paths.table("schedules", schedule_date(run_date)))
        return {"source": source, "where": where, "date": schedule_date(run_date),
                "shard": int(shard_of(host, cfg.schedule.n_shards)), "slots": None,
                "error": f"{type(err).__name__}: {err}"}


def _num(value, fmt="{:.4g}"):
    return "-" if value is None else fmt.format(value)


def _when(value):
    """An ISO timestamp as ``YYYY-MM-DD HH:MM:SS UTC`` (whole seconds: text is for people)."""
    return "-" if value is None else pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S UTC")


def render(doc: dict) -> str:
    """The human-readable form of :func:`explain`'s answer."""
    s, h, p, a = doc["state"], doc["host_row"], doc["plan"], doc["allocate"]
    out = [f"{doc['url']}  (host {doc['host']}; run {doc['run_date']}, "
           f"plans the 24 h from {_when(doc['window_start'])})", ""]
    if s is None:
        out += ["State: not in state/dt=D (a frontier URL, never fetched)"]
    else:
        prior = ("the default smoothing prior" if s.get("lambda_prior") is None
                 else f"group prior mean {_num(s['lambda_prior'])}/day")
        out += [
            "State (state/dt=%s):" % doc["run_date"],
            f"  lambda_hat {_num(s['lambda_hat'])}/day, 90% interval "
            f"[{_num(s['lambda_lo'])}, {_num(s['lambda_hi'])}], shrunk towards {prior}",
            f"  {_num(s['n_observations'], '{:.3g}')} observations "
            f"({_num(s['n_changes'], '{:.3g}')} changes) over "
            f"{_num(s['exposure_days'], '{:.1f}')} days; {s['n_fetches']} fetches, "
            f"{s['n_errors']} errors; last status {_num(s.get('last_status'), '{}')}"
            + ("; GONE" if s.get("gone") else ""),
            _dated_text(s),
            f"  last fetch {_when(s['last_fetch_at'])}, last success "
            f"{_when(s['last_success_at'])}, last change seen {_when(s['last_change_at'])}, "
            f"last confirmed {_when(s['last_known_at'])}",
            f"  importance {_num(s['importance'])}, lane {s['lane']}, seed interval "
            f"{_num(s['interval_s'] / 3600.0, '{:.3g}')} h",
            f"  validators: ETag {s['etag'] or '-'}, Last-Modified {s['last_modified'] or '-'}",
            f"  push signals: pending (trusted) {_when(s.get('pending_signal_at'))}, "
            f"unscored claim {_when(s.get('signal_claim_at'))}, no change since the copy "
            f"(trusted, may defer a visit) {_when(s.get('signal_unchanged_at'))}",
        ]
    if h is None:
        out += ["Host: no row in hosts/dt=D (no fetch of it yet: no validator trusted)"]
    else:
        out += [f"Host {h['host']}: validator class {h['validator_class']} (trust ETag "
                f"{'yes' if h['trust_etag'] else 'no'}, Last-Modified "
                f"{'yes' if h['trust_lm'] else 'no'}), signal accuracy "
                f"{_num(h['signal_accuracy'], '{:.2f}')} (trusted "
                f"{'yes' if h['signal_trusted'] else 'no'}), cap factor "
                f"{_num(h['cap_factor'], '{:.2f}')}, {h['urls_known']} URLs"]
        if h.get("rate_limit") is not None:
            blocked = (f", no fetch before {h['blocked_until']}" if h.get("blocked_until")
                       else "")
            out += [f"  health: served-rate limit {_num(h['rate_limit'], '{:.1f}')} of "
                    f"{_num(h.get('nominal_cap'), '{:.0f}')} visits/day (day's verdict "
                    f"{h.get('health_verdict')}){blocked}"]
    out.append("")
    if doc.get("overrides"):
        out += ["Overrides in force (overrides/):"] + [f"  {o}" for o in doc["overrides"]]
        out.append("")
    if p is None:
        out += ["Plan: no row in plan/dt=D" + (" (forgotten by an override)" if any(
            o.startswith("forget ") for o in doc.get("overrides") or []) else "")]
    else:
        every = (f" (every {24.0 / p['planned_rate']:.3g} h)" if p["planned_rate"] else "")
        out += [
            f"Plan (plan/dt={doc['run_date']}, policy {a['policy']}):",
            f"  lane {p['lane']}, planned rate {_num(p['planned_rate'])}/day{every}, "
            f"{p['visits']} candidate visit(s) in the window"
            + (" incl. an audit (measurement-only full fetch)" if p["audit"] else ""),
            f"  reason: {p['reason']} -- {p['reason_text']}",
        ]
        multiplier = a.get("refresh_value") if a.get("refresh_value") is not None \
            else a.get("policy_level")
        if p.get("marginal_value") is not None:
            out.append(f"  marginal value {_num(p['marginal_value'])} per extra visit/day vs "
                       f"the day's multiplier {_num(multiplier)}")
        elif a.get("policy_level") is not None:
            out.append(f"  the policy's level today: {_num(a['policy_level'])}")
        out += [f"  host cap {p['host_cap']} visits/day "
                f"({'binds' if p['cap_binds'] else 'does not bind'})",
                f"  p_stale_now {_num(p['p_stale_now'], '{:.3f}')} (P(changed since "
                f"{_stale_since_text(p, h)}) at the window's start)"]
    sch = doc["schedule"]
    out += ["", f"Schedule {sch['date']} ({sch['source']}: {sch['where']}, shard {sch['shard']}):"]
    if sch.get("error"):
        out.append(f"  NOT READABLE: {sch['error']}")
    elif not sch["slots"]:
        out.append("  no slot (not due in the window, or cut by the budget)")
    for r in sch["slots"] or []:
        hdr = r.get("if_none_match") or r.get("if_modified_since") or ""
        out.append(f"  {_when(r['not_before'])}  {r['lane']:<9} {r['method']:<11} "
                   f"p_changed {_num(r['p_changed'], '{:.3f}')}  {hdr}".rstrip())
    f = doc["fetches"]
    out += ["", f"Fetches {f['days'][0]} .. {f['days'][1]}"
            + (f" (no fetch_logs for {', '.join(f['missing_days'])})" if f["missing_days"] else "")
            + ":"]
    if not f["rows"]:
        out.append("  none")
    for r in f["rows"]:
        out.append(f"  {_when(r['fetched_at'])}  {r['status']}  "
                   f"{'conditional' if r.get('conditional') else 'full':<11} "
                   f"{_num(r.get('bytes'), '{}')} bytes  lane {r.get('lane') or '-'}  "
                   f"hash {(r.get('content_hash') or '-')[:12]}")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = Parser(
        description="Explain one URL's plan for run date D: its state, planned rate and the "
                    "reason, its slots in the schedule for D+1 and its last fetches.",
        epilog="A missing or uncommitted partition (or a URL the run does not know) is a named "
               "error, exit 2. No Spark: rows are read with pyarrow filters on the url column.")
    parser.add_argument("url", help="the URL, any spelling of it (read in its canonical form, as in state/)")
    add_date_arg(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--days", type=int, default=3, help="days of fetch_logs to show")
    parser.add_argument("--schedule", choices=("published", "staging"), default=None,
                        help="read the published day at publish.target (default when set) "
                             "or the staging files under paths.root")
    add_config_args(parser)
    args = parser.parse_args(argv)
    doc = explain(config_from_args(args), args.date, args.url, days=args.days,
                  schedule=args.schedule)
    if doc["schedule"]["error"]:  # the rest is printed; the gap is said on stderr too
        print(f"warning: schedule {doc['schedule']['date']} not read: "
              f"{doc['schedule']['error']}", file=sys.stderr)
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n" if args.json else render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
