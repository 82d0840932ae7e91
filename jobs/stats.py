"""Counts of one run date, ``readdb -stats`` style: URLs by lane, trust class and last status,
λ̂ quantiles, planned visits by reason and lane, the top hosts by URLs, planned visits and
stale importance; or, with ``--host H``, one host: its trust, health limit, cap, and its
URLs' λ̂ and plan.

No Spark: only the needed columns of the committed ``state/``, ``hosts/`` and ``plan/``
partitions of D are read, batch by batch (a missing or uncommitted one is a named error,
exit 2). Run: ``recrawl stats --date D [--top 10] [--host H] [--json]``.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pandas as pd

from jobs import partitions
from jobs.cli import Parser, add_date_arg, guarded
from jobs.config import Config, add_config_args, config_from_args
from jobs.core import daily_report as dr
from jobs.core.freshness import freshness
from jobs.errors import UnknownHost, UsageError
from jobs.report import PLAN_COLUMNS
from jobs.table_reader import batches, plain, rows_where

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
STATE_COLUMNS = ("host", "lane", "last_status", "lambda_hat", "gone")
HOST_ROW = ("host", "validator_class", "trust_etag", "trust_lm", "signal_trusted",
            "nominal_cap", "rate_limit", "cap_factor", "health_verdict", "blocked_until",
            "urls_known", "fetches_today", "error_rate_today")
HOST_STATE = ("url", "lambda_hat", "lambda_lo", "lambda_hi", "last_status", "last_fetch_at",
              "gone")
HOST_PLAN = ("url", "lane", "reason", "planned_rate", "visits", "host_cap", "cap_binds",
             "p_stale_now")
VALUE_COLUMNS = ("host", "importance", "lambda_hat", "planned_rate", "visits")


def plan_value(plan: pd.DataFrame) -> float:
    r"""The plan's expected importance-weighted freshness value,
    :math:`\sum_i w_i \bar F(\hat\lambda_i, f_i)` (Cho & Garcia-Molina's freshness of a page
    visited evenly at its planned rate; frontier URLs, with no copy yet, count 0)."""
    lam = pd.to_numeric(plan["lambda_hat"], errors="coerce").to_numpy(float)
    rate = pd.to_numeric(plan["planned_rate"], errors="coerce").fillna(0.0).to_numpy(float)
    w = pd.to_numeric(plan["importance"], errors="coerce").fillna(0.0).to_numpy(float)
    known = np.isfinite(lam) & (plan["lane"].to_numpy(object) != "discovery")
    return float(np.sum(w[known] * freshness(lam[known], rate[known])))


def host_share(cfg: Config, run_date: str, host: str) -> dict:
    """The host's share of the day's planned visits and of the plan's expected value
    (:func:`plan_value`), streamed over plan/dt=D without Spark."""
    value = host_value = visits = host_visits = 0.0
    for b in batches(_files(cfg, "plan", run_date), (*VALUE_COLUMNS, "lane")):
        v = plan_value(b)
        mine = (b["host"] == host).to_numpy()
        value += v
        host_value += plan_value(b[mine]) if mine.any() else 0.0
        visits += float(b["visits"].sum())
        host_visits += float(b.loc[mine, "visits"].sum())
    return {"value_share": host_value / value if value > 0 else None,
            "visits_share": host_visits / visits if visits > 0 else None,
            "value": host_value, "value_total": value}


def _files(cfg: Config, table: str, run_date: str) -> list[str]:
    return partitions.committed_files(cfg.paths.table(table, run_date), table)


def _counts(series: pd.Series) -> dict:
    return {str(k): int(v) for k, v in series.sort_index().items()}


def _top(frame: pd.DataFrame, column: str, n: int, keep: list[str]) -> list[dict]:
    top = frame.sort_values([column, "host"], ascending=[False, True]).head(n)
    return [{k: plain(v) for k, v in r.items()} for r in top[keep].to_dict("records")]


def stats(cfg: Config, run_date: str, top: int = 10) -> dict:
    """The day's counts (a JSON-ready dict)."""
    if top < 1:
        raise UsageError("--top must be >= 1")
    state_files, host_files, plan_files = (_files(cfg, t, run_date)
                                           for t in ("state", "hosts", "plan"))
    lanes, statuses, per_host = pd.Series(dtype=np.int64), pd.Series(dtype=np.int64), \
        pd.Series(dtype=np.int64)
    lambdas, gone = [], 0
    for b in batches(state_files, STATE_COLUMNS):
        lanes = lanes.add(b["lane"].fillna("?").value_counts(), fill_value=0)
        status = b["last_status"].astype("Int64").astype(str).replace("<NA>", "never")
        statuses = statuses.add(status.value_counts(), fill_value=0)
        per_host = per_host.add(b["host"].value_counts(), fill_value=0)
        lambdas.append(b["lambda_hat"].to_numpy(float))
        gone += int(b["gone"].fillna(False).astype(bool).sum())
    lam = np.concatenate(lambdas) if lambdas else np.zeros(0)
    lam = lam[np.isfinite(lam)]
    classes = pd.concat([b for b in batches(host_files, ("host", "validator_class"))]
                        or [pd.DataFrame(columns=["host", "validator_class"])])
    cls_of = classes.set_index("host")["validator_class"]
    by_class = per_host.groupby(cls_of.reindex(per_host.index).fillna("no hosts row")).sum()
    sums, reasons, plan_lanes = dr.merge_host_sums([]), pd.Series(dtype=np.int64), \
        pd.Series(dtype=np.int64)
    for b in batches(plan_files, (*PLAN_COLUMNS, "reason")):
        sums = dr.merge_host_sums([sums, dr.host_sums(b)])
        reasons = reasons.add(b.groupby("reason")["visits"].sum(), fill_value=0)
        plan_lanes = plan_lanes.add(b.groupby("lane")["visits"].sum(), fill_value=0)
    urls = pd.DataFrame({"host": per_host.index, "urls": per_host.to_numpy(np.int64)})
    return {
        "run_date": run_date, "urls": int(per_host.sum()), "urls_gone": gone,
        "hosts": int(len(classes)),
        "urls_by_lane": _counts(lanes), "urls_by_trust_class": _counts(by_class),
        "urls_by_last_status": _counts(statuses),
        "lambda_hat": {"mean": float(lam.mean()) if len(lam) else None,
                       **{f"q{round(q * 100)}": (float(np.quantile(lam, q)) if len(lam)
                                                 else None) for q in QUANTILES}},
        "planned_visits": int(sums["visits"].sum()),
        "planned_visits_by_reason": _counts(reasons),
        "planned_visits_by_lane": _counts(plan_lanes),
        "top_hosts_by_urls": _top(urls, "urls", top, ["host", "urls"]),
        "top_hosts_by_planned_visits": _top(sums, "visits", top,
                                            ["host", "visits", "urls", "host_cap",
                                             "cap_binds"]),
        "top_hosts_by_stale_importance": [
            {k: plain(v) for k, v in r.items()}
            for r in dr.top_stale_hosts(sums, top).to_dict("records")],
    }


def host_stats(cfg: Config, run_date: str, host: str, top: int = 20) -> dict:
    """One host of the day: its hosts row, its plan (cap, visits) and its URLs (λ̂, plan)."""
    row = rows_where(_files(cfg, "hosts", run_date), "host", host, HOST_ROW)
    state = rows_where(_files(cfg, "state", run_date), "host", host, ("host", *HOST_STATE))
    plan = rows_where(_files(cfg, "plan", run_date), "host", host, ("host", *HOST_PLAN))
    if row.empty and state.empty and plan.empty:
        raise UnknownHost(host, run_date)
    urls = (state.drop(columns=["host"]) if len(state) else pd.DataFrame(columns=HOST_STATE))
    if len(plan):
        urls = urls.merge(plan.drop(columns=["host", "host_cap", "cap_binds"]), on="url",
                          how="outer")
    urls = urls.sort_values("lambda_hat", ascending=False, na_position="last")
    lam = pd.to_numeric(urls["lambda_hat"], errors="coerce").dropna().to_numpy(float) \
        if "lambda_hat" in urls else np.zeros(0)
    return {
        "run_date": run_date, "host": host,
        "host_row": ({k: plain(v) for k, v in row.iloc[0].items()} if len(row) else None),
        "host_cap": plain(plan["host_cap"].max()) if len(plan) else None,
        "cap_binds": bool(plan["cap_binds"].any()) if len(plan) else None,
        "urls": int(len(urls)), "planned_visits": int(plan["visits"].sum()) if len(plan) else 0,
        "share": host_share(cfg, run_date, host),
        "lambda_hat": {f"q{round(q * 100)}": (float(np.quantile(lam, q)) if len(lam) else None)
                       for q in (0.1, 0.5, 0.9)},
        "top_urls_by_lambda": [{k: plain(v) for k, v in r.items()}
                               for r in urls.head(top).to_dict("records")],
    }


def _num(value, fmt="{:.4g}") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else fmt.format(value)


def _table(title: str, counts: dict) -> list[str]:
    total = sum(counts.values()) or 1
    return [title] + [f"  {k:<24} {v:>12,}  {100.0 * v / total:5.1f} %" for k, v in
                      sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def render(doc: dict) -> str:
    lam = doc["lambda_hat"]
    out = [f"recrawl stats {doc['run_date']}: {doc['urls']:,} URLs ({doc['urls_gone']:,} gone) "
           f"on {doc['hosts']:,} hosts; {doc['planned_visits']:,} planned visits", ""]
    out += _table("URLs by lane", doc["urls_by_lane"]) + [""]
    out += _table("URLs by host trust class", doc["urls_by_trust_class"]) + [""]
    out += _table("URLs by last status", doc["urls_by_last_status"]) + [""]
    out += ["lambda_hat (changes/day): mean " + _num(lam["mean"]) + ", "
            + ", ".join(f"{k} {_num(v)}" for k, v in lam.items() if k != "mean"), ""]
    out += _table("Planned visits by reason", doc["planned_visits_by_reason"]) + [""]
    out += _table("Planned visits by lane", doc["planned_visits_by_lane"]) + [""]
    out += ["Top hosts by URLs"] + [f"  {r['host']:<40} {r['urls']:>10,}"
                                    for r in doc["top_hosts_by_urls"]] + [""]
    out += ["Top hosts by planned visits"] + [
        f"  {r['host']:<40} {r['visits']:>10,} visits  cap {r['host_cap']}"
        + ("  (cap binds)" if r["cap_binds"] else "") for r in doc["top_hosts_by_planned_visits"]]
    out += ["", "Top hosts by stale importance (sum of importance x p_stale_now, counted "
                "from the last confirmed copy)"] + [
        f"  {r['host']:<40} {_num(r['stale_weight'])}  ({_num(100 * r['stale_share'], '{:.1f}')} "
        f"% of its importance)" for r in doc["top_hosts_by_stale_importance"]]
    return "\n".join(out) + "\n"


def render_host(doc: dict) -> str:
    h = doc["host_row"] or {}
    out = [f"host {doc['host']} (run {doc['run_date']}): {doc['urls']} URLs, "
           f"{doc['planned_visits']} planned visits, host cap {_num(doc['host_cap'], '{}')}"
           + (" (binds)" if doc["cap_binds"] else "")]
    share = doc.get("share") or {}
    if share.get("value_share") is not None:
        out.append(f"  share of the plan's expected value (importance x freshness): "
                   f"{100 * share['value_share']:.2f} %, of the planned visits: "
                   f"{100 * (share['visits_share'] or 0):.2f} %")
    if doc["host_row"] is None:
        out.append("  no row in hosts/dt=D (never fetched)")
    else:
        out.append(f"  trust: validator class {h['validator_class']} (ETag "
                   f"{'trusted' if h['trust_etag'] else 'not trusted'}, Last-Modified "
                   f"{'trusted' if h['trust_lm'] else 'not trusted'}, signals "
                   f"{'trusted' if h['signal_trusted'] else 'not trusted'})")
        out.append(f"  health: served-rate limit {_num(h['rate_limit'], '{:.1f}')} of nominal "
                   f"cap {_num(h['nominal_cap'], '{:.1f}')} visits/day, cap factor "
                   f"{_num(h['cap_factor'], '{:.2f}')}, verdict {h['health_verdict'] or '-'}"
                   + (f", blocked until {h['blocked_until']}" if h.get("blocked_until") else "")
                   + f"; {h['fetches_today']} fetches today, error rate "
                   f"{_num(h['error_rate_today'], '{:.3f}')}")
    lam = doc["lambda_hat"]
    out.append("  lambda_hat: " + ", ".join(f"{k} {_num(v)}" for k, v in lam.items()))
    out.append(f"  URLs by lambda_hat (top {len(doc['top_urls_by_lambda'])}):")
    for r in doc["top_urls_by_lambda"]:
        out.append(f"    {r['url']}  lambda {_num(r.get('lambda_hat'))} "
                   f"[{_num(r.get('lambda_lo'))}, {_num(r.get('lambda_hi'))}]  "
                   f"lane {r.get('lane') or '-'}  rate {_num(r.get('planned_rate'))}/day  "
                   f"visits {_num(r.get('visits'), '{}')}  reason {r.get('reason') or '-'}")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = Parser(description="Counts of run date D (readdb -stats), or one host with "
                                "--host. No Spark.",
                    epilog="A missing or uncommitted state/, hosts/ or plan/ partition of D "
                           "is a named error (exit 2); so is an unknown --host.")
    add_date_arg(parser)
    parser.add_argument("--host", default=None, help="inspect this host")
    parser.add_argument("--top", type=int, default=10, help="rows of each top-hosts table "
                                                            "(with --host: URLs shown)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_config_args(parser)
    args = parser.parse_args(argv)
    cfg = config_from_args(args)
    if args.host:
        doc = host_stats(cfg, args.date, args.host, args.top)
        text = render_host(doc) if not args.json else None
    else:
        doc = stats(cfg, args.date, args.top)
        text = render(doc) if not args.json else None
    sys.stdout.write(text if text is not None else json.dumps(doc, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
