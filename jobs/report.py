"""The daily report for run date D: one self-contained HTML page from the production tables.

No Spark: small pyarrow reads of committed partitions. ``metrics/dt=d`` of the last ``--days``
days (audit freshness with its interval, the planner's expected freshness and how well it
forecast the audit, due / planned / carried over, the day's what-if budget curve and the
multiplier per day), allocate's run record for D (budget by
lane and what was left unused), ``plan/dt=D`` read in row batches and reduced per host (hosts
at their cap, the λ̂ distribution, the hosts with the most stale importance now) and
``quarantine/dt=D`` (counts by reason). The figures are computed by
:mod:`jobs.core.daily_report` and drawn by :mod:`jobs.report_html` (inline SVG, no scripts).

A missing or uncommitted partition of D itself is :class:`MissingPartitionError` (exit 2); an
earlier day without metrics is shown as missing on the page, never as an empty chart.

Run: ``recrawl report --date D [--days N] [--top N] [--out FILE]``.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from jobs import metrics, partitions, storage
from jobs.cli import Parser, add_date_arg, guarded, output_file
from jobs.config import Config, add_config_args, config_from_args
from jobs.core import daily_report as dr
from jobs.errors import MissingPartitionError, UsageError
from jobs.paths import check_date, shift_day
from jobs.report_html import render
from jobs.runlog import read_stage_record
from jobs.table_reader import batches

PLAN_COLUMNS = ("host", "lane", "importance", "lambda_hat", "p_stale_now", "visits",
                "cap_binds", "host_cap")


def metrics_window(cfg: Config, run_date: str, days: int) -> tuple[list[str], dict]:
    """The report's dates (oldest first) and each one's metrics row, or why it is missing.
    D itself must be there."""
    dates = [shift_day(run_date, -k) for k in range(days - 1, -1, -1)]
    out = {}
    for d in dates:
        try:
            out[d] = metrics.read(cfg, d)
        except MissingPartitionError as err:
            if d == run_date:
                raise
            out[d] = f"metrics/dt={d}: {err}"
    return dates, out


def plan_figures(cfg: Config, run_date: str) -> tuple[pd.DataFrame, np.ndarray]:
    """``plan/dt=D`` reduced batch by batch: per-host sums and the λ̂ histogram counts."""
    files = partitions.committed_files(cfg.paths.table("plan", run_date), "plan")
    sums = dr.merge_host_sums([])
    counts = np.zeros(len(dr.LAMBDA_EDGES) - 1, dtype=np.int64)
    for batch in batches(files, PLAN_COLUMNS):
        sums = dr.merge_host_sums([sums, dr.host_sums(batch)])  # one frame of hosts, always
        counts += dr.lambda_counts(batch["lambda_hat"], batch["lane"])
    return sums, counts


def quarantine_frame(cfg: Config, run_date: str) -> pd.DataFrame:
    """Quarantined rows of D counted per (source, reason). update_state's run record is the
    quarantine's done mark: without it the partition may be half written (an error)."""
    read_stage_record(cfg, run_date, "update_state")
    base = cfg.paths.table("quarantine", run_date).rstrip("/")
    parts = []
    for f in storage.list_parquet_files(base):
        rel = f[len(base) + 1:] if f.startswith(base) else f
        source = next((p.split("=", 1)[1] for p in rel.split("/") if p.startswith("source=")),
                      "?")
        for batch in batches([f], ("reason",)):
            parts.append(batch.groupby("reason").size().rename("rows").reset_index()
                         .assign(source=source))
    return dr.quarantine_counts(pd.concat(parts, ignore_index=True) if parts
                                else pd.DataFrame())


def override_summary(cfg: Config, run_date: str, allocate: dict) -> dict:
    """The operator's overrides of the day: allocate's counts (in force, by action,
    quarantined) and the rows in force in the table now, one line each."""
    from jobs import overrides
    from jobs.core.overrides import describe

    active, bad = overrides.load(cfg, run_date)
    return {"record": allocate.get("overrides") or {},
            "lines": [describe(r) for r in active.to_dict("records")],
            "quarantined_now": int(len(bad))}


def _fast_share(row: dict, cfg: Config) -> float:
    """``budget.fast_share`` of the run that wrote the day's metrics (its ``config_json``),
    else the report's config."""
    import json

    try:
        return float(json.loads(row.get("config_json") or "{}")["budget"]["fast_share"])
    except (ValueError, KeyError, TypeError):
        return float(cfg.budget.fast_share)


def build(cfg: Config, run_date: str, *, days: int = 14, top: int = 20) -> dict:
    """Everything the page shows for ``run_date`` (frames and small dicts).

    Raises
    ------
    MissingPartitionError
        ``metrics/dt=D``, ``plan/dt=D``, or the allocate / update_state run record of D is
        missing or uncommitted.
    """
    check_date(run_date)
    if days < 1 or top < 1:
        raise UsageError("--days and --top must be >= 1")
    dates, metrics = metrics_window(cfg, run_date, days)
    allocate = read_stage_record(cfg, run_date, "allocate")
    update = read_stage_record(cfg, run_date, "update_state")
    sums, lam_counts = plan_figures(cfg, run_date)
    series = dr.freshness_series(dates, metrics)
    curve = dr.budget_curve_frame(metrics[run_date])
    return {
        "run_date": run_date, "days": dates, "metrics": metrics[run_date],
        "missing": {d: m for d, m in metrics.items() if isinstance(m, str)},
        "warnings": dr.input_warnings([update, allocate]),
        "freshness": series, "forecast": dr.forecast_match(series),
        "lanes": dr.lane_budget(allocate.get("budget_cut") or {}),
        "fast_lane": dr.fast_lane_note(allocate, _fast_share(metrics[run_date], cfg)),
        "flow": dr.due_planned_carried(dates, metrics),
        "health": dr.host_health_series(dates, metrics),
        "hosts_at_cap": dr.hosts_at_cap(sums), "hosts_planned": int(len(sums)),
        "lambda": pd.DataFrame({"bin": dr.lambda_bin_labels(), "pages": lam_counts}),
        "quarantine": quarantine_frame(cfg, run_date),
        "overrides": override_summary(cfg, run_date, allocate),
        "stale_hosts": dr.top_stale_hosts(sums, top), "top": top,
        "budget_curve": curve, "budget_reading": dr.budget_reading(curve),
        "budget_series": dr.budget_series(dates, metrics),
    }


def write(cfg: Config, run_date: str, out: str, **kw) -> str:
    """Build and render the page for ``run_date`` into ``out`` (a local path), whole or not
    at all (:func:`jobs.cli.output_file`); returns it."""
    with output_file(out) as fh:
        fh.write(render(build(cfg, run_date, **kw)).encode("utf-8"))
    return out


def main(argv=None) -> int:
    parser = Parser(
        description="Write the daily report for run date D: one self-contained HTML page "
                    "(inline SVG figures, no scripts) from the production tables.",
        epilog="A missing or uncommitted partition of D is a named error, exit 2; earlier days "
               "without metrics are marked missing on the page. No Spark.")
    add_date_arg(parser)
    parser.add_argument("--days", type=int, default=14, help="days of metrics to show (D and "
                                                             "the days before it)")
    parser.add_argument("--top", type=int, default=20, help="hosts in the stale-hosts table")
    parser.add_argument("--out", default=None, help="output file (default "
                                                    "recrawl-report-D.html)")
    add_config_args(parser)
    args = parser.parse_args(argv)
    out = args.out or f"recrawl-report-{args.date}.html"
    write(config_from_args(args), args.date, out, days=args.days, top=args.top)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
