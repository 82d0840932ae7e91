"""Backtest report: figures (PNG), the same figures' data (Parquet/JSON) and one HTML page.

Layout under ``out``::

    report.html            the page (PNGs referenced from figures/)
    figures/*.png
    data/summary.json      spec, per-policy metrics (per seed, mean ± sd), statuses, kinds
    data/daily.parquet     per policy, seed and day: truth freshness/age, fetches, lanes
    data/allocation.parquet  visits/day against true λ and importance, binned
    data/hosts.parquet     per policy, seed, day and host: scheduled rows and capacity
    data/audit.parquet     per policy, seed and day: audit estimates, intervals and truth
    data/sweep.parquet     freshness against budget
    data/kinds.parquet     per policy, seed and page kind: freshness and its ratio to the oracle
    data/pages.parquet     per policy, seed and page: url, kind, true λ, importance, visits/day,
                           days observed and fresh (what the per-kind table sums)
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the report is written by a batch job
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from lab.sim.params import PROCESS_KINDS  # noqa: E402

# Policies that plan with the simulator's true rates (allocate's backtest-only oracle_table):
# the oracle, the Poisson ceiling to beat, and ``informed``, optimal with the true rates and
# its learnt rhythms, which measures what knowing λ is worth to optimal. Neither can run in
# production, so neither is ever the winner of a headline.
TRUE_RATE_POLICIES = ("oracle", "informed")

TABLE_KEYS = ("freshness_weighted", "freshness", "age_days_weighted", "age_days", "fetches",
              "found_change_share", "not_modified_rate", "bytes", "politeness_gap_violations",
              "politeness_cap_violations", "status_503", "budget_overrun", "never_visited_share",
              "discovery_delay_days", "new_pages_copied_share")
AGE_LABEL = "age (days since the copy went stale; 0 if fresh)"
LAMBDA_BINS = np.array([0, 1e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 1e9])
# Page kinds of the per-kind table: front pages and feeds (Poisson, high λ), then the
# change process of every other page.
KINDS = ("front", *PROCESS_KINDS)
KIND_KEYS = ("freshness_weighted", "freshness", "freshness_weighted_vs_oracle",
             "freshness_vs_oracle")
KIND_LABELS = ("freshness, importance-weighted", "freshness", "÷ oracle, importance-weighted",
               "÷ oracle")


def _mean_sd(df: pd.DataFrame, by, keys) -> pd.DataFrame:
    """Mean and sample sd over seeds of ``keys`` per ``by`` group, and the group's size."""
    g = df.groupby(by, sort=False)[list(keys)]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=1).add_suffix("_sd"))
    out["seeds"] = g.size()
    return out.reset_index()


def _fmt(mean: float, sd: float) -> str:
    """``mean ± sd`` (just the mean with one seed)."""
    return f"{mean:.3f}" + (f" ± {sd:.3f}" if pd.notna(sd) else "")


def summary_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Mean and sample sd over seeds of each metric, one row per policy."""
    ok = metrics[metrics["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    return _mean_sd(ok, "policy", [k for k in TABLE_KEYS if k in ok])


def page_kinds(alloc: pd.DataFrame) -> np.ndarray:
    """Kind of each page of an allocation frame: "front" for front pages and feeds, else
    its change process (``PROCESS_KINDS``)."""
    process = np.array(PROCESS_KINDS, dtype=object)[alloc["kind"].to_numpy(np.int64)]
    return np.where(alloc["front"].to_numpy(bool), "front", process)


def kind_freshness(alloc: pd.DataFrame) -> pd.DataFrame:
    """Freshness per policy, seed and page kind ("all" and :data:`KINDS`).

    Parameters
    ----------
    alloc : DataFrame
        Per page (``loop._allocation``, tagged with ``policy`` and ``seed``): ``kind``,
        ``front``, ``importance``, ``obs_days``, ``fresh_days``.

    Returns
    -------
    DataFrame
        One row per (policy, seed, kind): ``pages``, ``obs_days``, ``freshness`` = Σ fresh /
        Σ obs, ``freshness_weighted`` = Σ w·fresh / Σ w·obs over the kind's pages ("all": the
        run's overall figures, the same sums as the truth metrics), and each divided by the
        oracle's of the same seed and kind (``*_vs_oracle``; NaN without an oracle run).
    """
    w = alloc["importance"].to_numpy(float)
    a = pd.DataFrame({"policy": alloc["policy"], "seed": alloc["seed"], "kind": page_kinds(alloc),
                      "obs": alloc["obs_days"], "fresh": alloc["fresh_days"],
                      "w_obs": w * alloc["obs_days"], "w_fresh": w * alloc["fresh_days"]})
    a = pd.concat([a.assign(kind="all"), a], ignore_index=True)
    a["kind"] = pd.Categorical(a["kind"], ["all", *KINDS])
    s = (a.groupby(["policy", "seed", "kind"], sort=False, observed=True)
         .agg(pages=("obs", "size"), obs_days=("obs", "sum"), fresh_days=("fresh", "sum"),
              w_obs=("w_obs", "sum"), w_fresh=("w_fresh", "sum")).reset_index())
    order = {p: i for i, p in enumerate(dict.fromkeys(alloc["policy"]))}  # as they ran
    s = s.sort_values(["policy", "seed", "kind"], kind="stable", ignore_index=True,
                      key=lambda c: c.map(order) if c.name == "policy" else c)
    s["kind"] = s["kind"].astype(str)
    s["freshness"] = s["fresh_days"] / s["obs_days"]
    s["freshness_weighted"] = s["w_fresh"] / s["w_obs"]
    ref = s.loc[s["policy"] == "oracle", ["seed", "kind", "freshness", "freshness_weighted"]]
    s = s.merge(ref, on=["seed", "kind"], how="left", suffixes=("", "_oracle"))
    for k in ("freshness", "freshness_weighted"):
        s[f"{k}_vs_oracle"] = s[k] / s.pop(f"{k}_oracle")
    return s.drop(columns=["fresh_days", "w_obs", "w_fresh"])


def kind_table(kinds: pd.DataFrame) -> pd.DataFrame:
    """Mean and sample sd over seeds of :func:`kind_freshness`, per policy and kind."""
    if kinds.empty:
        return pd.DataFrame()
    return _mean_sd(kinds, ["policy", "kind"], ("pages", *KIND_KEYS))


def kind_display(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`kind_table` as shown (HTML and the run's log): a row per policy and measure, a
    column per kind, cells ``mean ± sd``; the first row counts pages (mean over seeds)."""
    if table.empty:
        return pd.DataFrame()
    pages = table.groupby("kind", sort=False)["pages_mean"].first()  # the same web per policy
    kinds = list(pages.index)
    rows = [{"policy": "", "measure": "pages", **{k: f"{pages[k]:.0f}" for k in kinds}}]
    for pol, g in table.groupby("policy", sort=False):
        g = g.set_index("kind")
        for key, label in zip(KIND_KEYS, KIND_LABELS):
            # Ratios only where an oracle ran, and not the oracle's own (1 by definition).
            if g[f"{key}_mean"].notna().any() and not (pol == "oracle" and "oracle" in key):
                rows.append({"policy": pol, "measure": label,
                             **{k: _fmt(g.loc[k, f"{key}_mean"], g.loc[k, f"{key}_sd"])
                                if k in g.index else "" for k in kinds}})
    return pd.DataFrame(rows)


def kind_text(alloc: pd.DataFrame) -> str:
    """The per-kind table of a run's allocation frames, as plain text for the log."""
    shown = kind_display(kind_table(kind_freshness(alloc))) if not alloc.empty else pd.DataFrame()
    return shown.to_string(index=False) if not shown.empty else "(no policy ran)"


def headline(table: pd.DataFrame, key: str = "freshness_weighted") -> str:
    """Which policy won on ``key`` (mean over seeds) and by how much over the runner-up.

    The oracle (optimal with the true λ, which no production planner has) is a bound, not a
    contestant: it is reported beside the winner, never as the winner.
    """
    col = f"{key}_mean"
    if table.empty or col not in table:
        return "No policy ran to the end: no winner."
    t = table.dropna(subset=[col]).sort_values(col, ascending=False)
    real, oracle = t[~t["policy"].isin(TRUE_RATE_POLICIES)], t[t["policy"] == "oracle"]
    label = key.replace("_", " ").replace("freshness weighted", "importance-weighted freshness")

    def fig(row) -> str:
        return _fmt(row[col], row.get(f"{key}_sd"))

    if real.empty:
        if oracle.empty:  # e.g. `--policies informed` alone: a diagnostic, never a winner
            ran = ", ".join(t["policy"])
            return f"Only true-rate policies ran ({ran}): no winner."
        return f"Only the oracle ran: {label} {fig(oracle.iloc[0])}."
    best = real.iloc[0]
    seeds = int(best.get("seeds", 1))
    text = f"{best['policy']} won on {label}: {fig(best)} (mean over {seeds} seed(s))"
    if len(real) > 1:
        second = real.iloc[1]
        gap = best[col] - second[col]
        rel = gap / second[col] * 100 if second[col] else float("nan")
        text += (f", {gap:+.3f} ({rel:+.1f}%) over the runner-up {second['policy']} "
                 f"({second[col]:.3f})")
        worst = real.iloc[-1]
        if len(real) > 2:
            text += f" and {best[col] - worst[col]:+.3f} over the last, {worst['policy']}"
    else:
        text += ", the only policy that ran"
    if not oracle.empty:
        # Not a bound: the oracle plans with each page's true long-run λ but with timing and
        # probes off, so a planner that learns when pages change can beat it.
        o = oracle.iloc[0][col]
        ratio = f" ({best[col] / o:.3f} ×)" if o else ""
        text += (f"; the Poisson oracle (true long-run λ, timing and probes off) reached "
                 f"{o:.3f}, the winner {best[col] - o:+.3f}{ratio} against it")
    return text + "."


def allocation_bins(alloc: pd.DataFrame) -> pd.DataFrame:
    """Mean visits/day per (policy, true-λ bin, importance tercile)."""
    a = alloc.copy()
    a["lam_bin"] = pd.cut(a["lam"], LAMBDA_BINS, right=False, labels=False)
    a["imp_tercile"] = a.groupby(["policy", "seed"])["importance"].transform(
        lambda s: pd.qcut(s.rank(method="first"), 3, labels=False))
    out = (a.groupby(["policy", "lam_bin", "imp_tercile"], observed=True)
           .agg(pages=("lam", "size"), lam_mid=("lam", "median"),
                visits_per_day=("visits_per_day", "mean")).reset_index())
    return out


def _policy_panels(n: int):
    """One panel per policy, side by side, sharing the y axis."""
    return plt.subplots(1, n, figsize=(max(3.6 * n, 6.0), 3.8), sharey=True, squeeze=False)


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fig_time(daily: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    panels = [("freshness_weighted", "freshness (importance-weighted)",
               "freshness (share of the day current)"),
              ("freshness", "freshness (plain)", "freshness (share of the day current)"),
              ("age_days_weighted", "age (importance-weighted)", AGE_LABEL),
              ("age_days", "age (plain)", AGE_LABEL)]
    for ax, (col, title, ylabel) in zip(axes.flat, panels):
        for pol, g in daily.groupby("policy", sort=False):
            m = g.groupby("day")[col].agg(["mean", "min", "max"])
            ax.plot(m.index, m["mean"], marker="o", ms=3, label=pol)
            ax.fill_between(m.index, m["min"], m["max"], alpha=0.15)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # days are whole numbers
        ax.grid(alpha=0.3)
    axes[1, 0].set_xlabel("simulation day (days since the web's day 0)")
    axes[1, 1].set_xlabel("simulation day (days since the web's day 0)")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Truth, day by day (band: min-max over seeds)")
    _save(fig, path)


def _fig_sweep(sweep: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (pol, col), g in sweep.melt(id_vars=["policy", "budget_share", "seed"],
                                    value_vars=["freshness_weighted", "freshness"]
                                    ).groupby(["policy", "variable"]):
        m = g.groupby("budget_share")["value"].mean()
        ax.plot(m.index * 100, m.values, marker="o",
                ls="-" if col == "freshness_weighted" else "--", label=f"{pol}, {col}")
    ax.set_xlabel("daily budget, % of URLs")
    ax.set_ylabel("time-averaged freshness (share of time current)")
    ax.set_title("What-if: freshness against budget")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def _fig_allocation(bins: pd.DataFrame, path: Path) -> None:
    pols = list(dict.fromkeys(bins["policy"]))
    fig, axes = _policy_panels(len(pols))
    for ax, pol in zip(axes[0], pols):
        g = bins[bins["policy"] == pol]
        for t, label in enumerate(("low", "mid", "high")):
            s = g[g["imp_tercile"] == t].sort_values("lam_mid")
            ax.plot(np.maximum(s["lam_mid"], 1e-4), np.maximum(s["visits_per_day"], 1e-3),
                    marker="o", ms=3, label=f"importance {label}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(pol, fontsize=10)
        ax.set_xlabel("true λ (changes/day)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("visits/day (mean in bin)")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Allocation against true change rate and importance")
    _save(fig, path)


def _fig_lanes_hosts(daily: pd.DataFrame, hosts: pd.DataFrame, path: Path) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    lanes = [c for c in daily.columns if c.startswith("lane_")]
    per = daily.groupby("policy", sort=False)[lanes].mean()
    bottom = np.zeros(len(per))
    for c in lanes:
        ax1.bar(per.index, per[c], bottom=bottom, label=c[5:])
        bottom += per[c].to_numpy()
    ax1.set_ylabel("scheduled fetches per day (mean)")
    ax1.set_xlabel("policy")
    ax1.set_title("Split per lane")
    ax1.legend(fontsize=8)
    ax1.tick_params(axis="x", rotation=20)
    for pol, g in hosts.groupby("policy", sort=False):
        use = np.sort((g["rows"] / g["capacity"].clip(lower=1)).to_numpy())
        ax2.plot(use, 1.0 - np.arange(len(use)) / len(use), label=pol)
    ax2.set_xlabel("scheduled / host's daily capacity (ratio)")
    ax2.set_ylabel("share of host-days at or above (ratio)")
    ax2.set_title("Use of each host's capacity (crawl delay and cap)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    _save(fig, path)


def _fig_audit(audit: pd.DataFrame, path: Path) -> None:
    pols = list(dict.fromkeys(audit["policy"]))
    fig, axes = _policy_panels(len(pols))
    for ax, pol in zip(axes[0], pols):
        g = audit[(audit["policy"] == pol) & (audit["day"] >= 0)]
        x = g["day"] + 0.1 * g["seed"].rank(method="dense")
        ax.errorbar(x, g["audit_freshness"], yerr=[g["audit_freshness"] - g["audit_lo"],
                                                   g["audit_hi"] - g["audit_freshness"]],
                    fmt="o", ms=3, label="shadow audit, 95% CI")
        if "planner_audit_freshness" in g and g["planner_audit_freshness"].notna().any():
            ax.errorbar(x + 0.05, g["planner_audit_freshness"],
                        yerr=[g["planner_audit_freshness"] - g["planner_audit_lo"],
                              g["planner_audit_hi"] - g["planner_audit_freshness"]],
                        fmt="s", ms=3, label="production audit (metrics, Wilson CI)")
        ax.plot(x, g["true_freshness"], "k_", ms=12, label="true freshness")
        ax.set_title(pol, fontsize=10)
        ax.set_xlabel("simulation day (days since the web's day 0)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("freshness (share of audited pages current)")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Freshness audit: estimate and interval against truth")
    _save(fig, path)


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0,
                      classes="t", na_rep="")


def write_report(out: Path, spec: dict, command: str, metrics: pd.DataFrame,
                 daily: pd.DataFrame, alloc: pd.DataFrame, hosts: pd.DataFrame,
                 audit: pd.DataFrame, sweep: pd.DataFrame, notes: list[str]) -> Path:
    """Write figures, data files and ``report.html`` under ``out``; returns the HTML path."""
    figs, data = out / "figures", out / "data"
    figs.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    table = summary_table(metrics)
    bins = allocation_bins(alloc) if not alloc.empty else pd.DataFrame()
    kinds = kind_freshness(alloc) if not alloc.empty else pd.DataFrame()
    ktable = kind_table(kinds)
    for name, df in (("daily", daily), ("allocation", bins), ("hosts", hosts), ("audit", audit),
                     ("sweep", sweep), ("metrics", metrics), ("kinds", kinds), ("pages", alloc)):
        df.to_parquet(data / f"{name}.parquet", index=False)
    (data / "summary.json").write_text(json.dumps(
        {"spec": spec, "command": command, "notes": notes, "headline": headline(table),
         "policies": json.loads(table.to_json(orient="records")),
         "kinds": json.loads(ktable.to_json(orient="records")),
         "runs": json.loads(metrics.to_json(orient="records"))}, indent=1))

    sections = []
    if not daily.empty:
        _fig_time(daily, figs / "freshness_age_over_time.png")
        _fig_lanes_hosts(daily, hosts, figs / "lanes_and_host_capacity.png")
        sections += [("Freshness and age over time", "freshness_age_over_time.png"),
                     ("Split per lane and use of host capacity", "lanes_and_host_capacity.png")]
    if not sweep.empty:
        _fig_sweep(sweep, figs / "freshness_vs_budget.png")
        sections.append(("Freshness against budget", "freshness_vs_budget.png"))
    if not bins.empty:
        _fig_allocation(bins, figs / "allocation_vs_lambda_importance.png")
        sections.append(("Allocation against λ and importance",
                         "allocation_vs_lambda_importance.png"))
    if not audit.empty:
        _fig_audit(audit, figs / "audit_coverage.png")
        sections.append(("Freshness audit against truth", "audit_coverage.png"))

    status = metrics.groupby("policy", sort=False).agg(
        status=("status", "first"), error=("error", "first")).reset_index()
    cover = pd.DataFrame()
    if not audit.empty:
        cols = [c for c in ("covered", "covered_w", "planner_covered") if c in audit]
        cover = (audit[audit["day"] >= 0].groupby("policy", sort=False)[cols]
                 .agg(lambda s: f"{int(s.sum())}/{int(s.notna().sum())}").reset_index())
    parts = [f"<h1>recrawl backtest</h1><p class='headline'>{html.escape(headline(table))}</p>",
             f"<p><code>{html.escape(command)}</code></p>",
             f"<pre>{html.escape(json.dumps(spec, indent=1))}</pre>",
             "<h2>Policies</h2>", _html_table(status),
             "<h2>Truth metrics over the planned days (mean and sd over seeds)</h2>",
             _html_table(table) if not table.empty else "<p>no policy ran</p>"]
    if not ktable.empty:
        parts += ["<h2 id='kinds'>Freshness per page kind (mean ± sd over seeds)</h2>",
                  "<p>Over the planned days, Σ fresh days / Σ observed days of each kind's "
                  "pages, plain and importance-weighted; <i>front</i>: front pages and feeds "
                  "(Poisson), the other kinds are the change processes of ordinary pages; "
                  "<i>all</i>: every page (the truth metrics above). ÷ oracle: the policy's "
                  "figure over the oracle's (true λ), per seed, then mean ± sd.</p>",
                  _html_table(kind_display(ktable))]
    if not cover.empty:
        parts += ["<h2>Audit interval covers the true freshness (days covered / days)</h2>",
                  _html_table(cover)]
    parts += ["<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes)
              + "</ul>"]
    for title, png in sections:
        parts.append(f"<h2>{html.escape(title)}</h2><img src='figures/{png}' style='max-width:100%'>")
    style = ("<style>body{font-family:sans-serif;margin:2em;max-width:1300px}"
             "table.t{border-collapse:collapse;font-size:12px}"
             "table.t td,table.t th{padding:2px 6px;border-bottom:1px solid #ddd}"
             ".headline{font-size:1.15em;background:#eef4ff;padding:.6em 1em;"
             "border-left:4px solid #3366aa}</style>")
    path = out / "report.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>recrawl backtest"
                    f"</title>{style}</head><body>{''.join(parts)}</body></html>")
    return path
