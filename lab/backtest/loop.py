"""The closed loop: history -> real Spark stages -> S3 publish -> simulated fleet -> next day.

One synthetic web (:class:`lab.sim.Simulation`) is crawled for ``history_days`` by the
legacy crawler, state is bootstrapped from those logs by ``jobs.rebuild_state``, and then
every policy is run on a copy of that same web and data root. Each day of a policy run is
exactly what the DAG does for logical date D: ``allocate`` and ``build_schedule`` (the
same ``run`` functions), ``dag_tasks.publish`` and ``dag_tasks.verify`` against a real S3
server; the fleet then reads D+1's manifest and files with ``jobs.verify.read_schedule``,
executes the rows at ``not_before`` (:meth:`Simulation.step`), which writes
``fetch_logs/dt=D+1``, ``signals`` and ``frontier``; ``validate_logs`` and ``update_state``
for D+1 close the loop.

The simulator is the test harness, so it may hold its small web in memory; the planner
jobs themselves never collect per-URL data to the driver.
"""
from __future__ import annotations

import copy
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs import (allocate, build_schedule, dag_tasks, intake, rebuild_state, update_state,
                  validate_logs)
from lab.backtest import audit
from lab.backtest.report import TRUE_RATE_POLICIES, page_kinds
from jobs.config import Config, load_config, toml_text
from jobs.core import budget_curve
from jobs.core.plan import host_cap
from jobs.core.timing import DAY_S, WEEK_S
from lab.sim import Simulation, WebParams, run_history
from lab.sim import documents as sim_documents
from lab.sim.params import web_overrides
from lab.sim.contract import (FETCH_LOG_SCHEMA, FRONTIER_SCHEMA, HOST_POLICY_SCHEMA,
                               IMPORTANCE_SCHEMA, SIGNALS_SCHEMA, partition_dir, write_table)
from jobs.verify import read_schedule

BUCKET = "recrawl-backtest"
POLICIES = ("uniform", "proportional", "adaptive", "optimal", "oracle", "informed")
# What a backtest runs unless told: the planner, its baselines and the oracle (``informed``
# is a diagnostic, run by name).
DEFAULT_POLICIES = POLICIES[:5]
# The backtest's web has a weekly rhythm (issue 14) unless --web process_shares=... says otherwise;
# WebParams' own default keeps the weekly share 0, so other users' webs are unchanged.
PROCESS_SHARES = (0.6, 0.15, 0.15, 0.1)
# A config key owned by another stage, probed rather than assumed: the audit sample rate.
AUDIT_RATE_KEY = "audit.sample_rate"
# Off for the oracle: it is the Poisson optimum with the true rates, the ceiling to beat
# (no learnt rhythm, no probes of rates it knows).
ORACLE_OFF = {"timing.enabled": "false", "estimation.probe_factor": "0"}
# Off for ``informed``: probes buy knowledge of rates it is given.
INFORMED_OFF = {"estimation.probe_factor": "0"}
TRUTH_PAGES_SCHEMA = pa.schema([("url", pa.string()), ("kind", pa.string()),
                                ("period_s", pa.float64()), ("change_s", pa.float64())])


def config_has(key: str) -> bool:
    """Whether the typed config defines ``section.key``."""
    import dataclasses

    from jobs.config import ConfigError, type_of_section
    section, name = key.split(".", 1)
    try:
        return name in {f.name for f in dataclasses.fields(type_of_section(section))}
    except ConfigError:
        return False


@dataclass(frozen=True)
class BacktestSpec:
    """Everything that defines one backtest; the same spec always gives the same figures.

    Attributes
    ----------
    urls, hosts : int
        Size of the synthetic web at day 0.
    history_days : int
        Days crawled by the legacy crawler before the planner takes over. The legacy
        crawler revisits every page within about 7 days; with less history some pages
        never reach the planner's state, and it can never plan them.
    days : int
        Days planned by the planner (each one a full daily run).
    seed : int
        Seed of the web (and so of everything else).
    budget_share : float
        Daily fetch budget as a share of ``urls``.
    start : str
        Date of simulation day 0.
    audit_rate : float
        Share of URLs in the freshness audit sample.
    overrides : tuple of str
        Extra ``section.key=value`` planner config overrides, applied to every policy.
    web : tuple of str
        ``name=value`` overrides of the synthetic web (:func:`lab.sim.params.web_overrides`),
        e.g. the hidden host health of issue 15 (``quota_host_share=0.1``). Without a
        ``process_shares`` override the web's change processes are :data:`PROCESS_SHARES`
        (Poisson, daily, bursty, weekly).
    intake : bool
        Sitemap and feed signals reach the planner the production way: the sim fleet fetches
        every host's robots.txt, sitemap or feed once a day (``documents/dt=D``,
        :mod:`lab.sim.documents`) and ``jobs.intake`` derives ``signals/`` and
        ``host_policy/`` from them; only pushed signals (WebSub, IndexNow) stay hand-written.
    """

    urls: int = 3000
    hosts: int = 40
    history_days: int = 7
    days: int = 6
    seed: int = 0
    budget_share: float = 0.25
    start: str = "2026-01-01"
    audit_rate: float = 0.05
    overrides: tuple = ()
    web: tuple = ()
    intake: bool = False

    @property
    def budget(self) -> int:
        return int(round(self.budget_share * self.urls))

    def params(self) -> WebParams:
        web = {"process_shares": PROCESS_SHARES, **web_overrides(self.web)}
        return WebParams(n_urls=self.urls, n_hosts=self.hosts, seed=self.seed, start=self.start,
                         **web)


@dataclass
class PolicyRun:
    """The outcome of one policy: truth metrics, daily series and planner records."""

    policy: str
    status: str                       # "ok", "not wired" or "failed"
    error: str | None = None
    budget: int = 0
    metrics: dict = field(default_factory=dict)
    daily: pd.DataFrame | None = None       # one row per planned day (truth + planner)
    allocation: pd.DataFrame | None = None  # per page: true λ, importance, visits/day
    hosts: pd.DataFrame | None = None       # per host and day: rows, cap, lanes
    audit: pd.DataFrame | None = None       # per day: audit estimate and truth
    audit_checks: pd.DataFrame | None = None  # one row per audit check
    seconds: float = 0.0
    stage_seconds: dict = field(default_factory=dict)


def day_str(params: WebParams, day: int) -> str:
    return params.date_of(day).isoformat()


def planner_config(spec: BacktestSpec, root: Path, policy: str, endpoint: str | None,
                   budget: int | None = None) -> Config:
    """The planner's config for one policy on one data root.

    The publish endpoint is always explicit: the loopback S3 server's, or with none (the
    history, which publishes nothing) a local directory, never AWS by default.
    """
    target = (f"s3://{BUCKET}/{root.parent.name}" if endpoint
              else str(root.parent / "published"))
    base = [f"paths.root={root}", "spark.master=local[2]", "spark.state_buckets=2",
            "schedule.n_shards=4", f"budget.daily_fetches={budget if budget is not None else spec.budget}",
            f"publish.target={target}", "publish.max_workers=4",
            f"publish.endpoint_url={endpoint or ''}"]
    # The oracle is optimal with the true rates, which reach allocate as its backtest-only
    # argument (oracle_table), never through the production config.
    pol = [f"policy.name={'optimal' if policy in TRUE_RATE_POLICIES else policy}"]
    if config_has(AUDIT_RATE_KEY):  # the planner's audit sample is the harness's sample
        pol.append(f"{AUDIT_RATE_KEY}={spec.audit_rate}")
    off = {"oracle": ORACLE_OFF, "informed": INFORMED_OFF}.get(policy, {})
    # the oracle stays the Poisson optimum (issue 14)
    pol += [f"{key}={value}" for key, value in off.items() if config_has(key)]
    return load_config(None, base + pol + list(spec.overrides))


def oracle_table(root: Path, policy: str) -> str | None:
    """The table of true rates allocate takes for ``policy`` (``TRUE_RATE_POLICIES`` only)."""
    return str(root / "_truth" / "lambda") if policy in TRUE_RATE_POLICIES else None


# ------------------------------------------------------------------- inputs
def write_inputs(sim: Simulation, root: Path, day: int) -> None:
    """Refresh the slowly changing inputs as a production feed would before day ``day``'s run.

    ``importance`` covers every page discovered so far (a link-graph feed knows them);
    ``_truth/lambda`` is the oracle's table of true long-run change rates, ``_truth/pages``
    each page's kind and, for daily and weekly publishers, the period and instant of their
    changes (``lab.studies.study_timing``).
    """
    pg = sim.web.pages
    known = np.flatnonzero(pg.discovered < day + 1)
    write_table(pa.table({"url": pa.array(pg.url[known], pa.string()),
                          "importance": pa.array(pg.importance[known], pa.float64())}),
                root / "importance" / "part-0.parquet", IMPORTANCE_SCHEMA)
    write_table(pa.table({"url": pa.array(pg.url[known], pa.string()),
                          "lambda": pa.array(pg.lam_eff[known], pa.float64())}),
                root / "_truth" / "lambda" / "part-0.parquet",
                pa.schema([("url", pa.string()), ("lambda", pa.float64())]))
    kinds = page_kinds(pd.DataFrame({"kind": pg.kind[known], "front": pg.section[known] < 0}))
    # Publishers' fixed change instant: seconds into the day (UTC) or into the week from
    # Monday 00:00 UTC, as jobs.core.timing counts phases; NaN for pages without one.
    weekly, daily = kinds == "weekly", kinds == "daily"
    period = np.where(weekly, WEEK_S, np.where(daily, DAY_S, np.nan))
    change = (pg.hour[known] + np.where(weekly, np.maximum(pg.weekday[known], 0), 0)) * DAY_S
    write_table(pa.table({"url": pa.array(pg.url[known], pa.string()),
                          "kind": pa.array(kinds.astype(str), pa.string()),
                          "period_s": pa.array(period, pa.float64()),
                          "change_s": pa.array(np.where(np.isnan(period), np.nan, change),
                                               pa.float64())}),
                root / "_truth" / "pages" / "part-0.parquet", TRUTH_PAGES_SCHEMA)


def write_day(sim: Simulation, root: Path, day: int, log: pa.Table,
              intake: bool = False) -> None:
    date = sim.params.date_of(day)
    write_table(log, partition_dir(root, "fetch_logs", date) / "part-00000.parquet",
                FETCH_LOG_SCHEMA)
    write_signals(sim, root, day, intake)
    write_table(sim.frontier_table(day), partition_dir(root, "frontier", date) / "part-00000.parquet",
                FRONTIER_SCHEMA)


def write_signals(sim: Simulation, root: Path, day: int, intake: bool) -> None:
    """The day's hand-written signals; with ``intake``, only the pushed ones, and the
    documents the sim fleet fetched instead (``jobs.intake`` turns them into signals)."""
    date = sim.params.date_of(day)
    signals = sim.signals_table(day)
    if intake:
        signals = sim_documents.pushed_signals(signals)
        write_table(sim_documents.documents_table(sim, day),
                    partition_dir(root, "documents", date) / "part-00000.parquet",
                    sim_documents.DOCUMENTS_SCHEMA)
    write_table(signals, partition_dir(root, "signals", date) / "part-00000.parquet",
                SIGNALS_SCHEMA)


def write_history(spec: BacktestSpec, root: Path, days: int | None = None) -> Simulation:
    """Crawl the web with the legacy crawler for ``days`` (default ``spec.history_days``),
    writing each day's inputs under ``root``; return the simulation after them."""
    days = spec.history_days if days is None else days
    sim = Simulation(spec.params())
    run_history(sim, days, lambda d, table, rec: write_day(sim, root, d, table, spec.intake))
    policy = pa.Table.from_pandas(sim.web.host_policy(), preserve_index=False)
    if spec.intake:  # intake writes dated snapshots: upstream's is the first day's, committed
        first = partition_dir(root, "host_policy", sim.params.date_of(0))
        write_table(policy, first / "part-0.parquet", HOST_POLICY_SCHEMA)
        (first / "_SUCCESS").touch()
    else:  # the flat layout: one snapshot for every day
        write_table(policy, root / "host_policy" / "part-0.parquet", HOST_POLICY_SCHEMA)
    write_inputs(sim, root, days - 1)
    return sim


def prepare_history(spec: BacktestSpec, workdir: Path, spark) -> tuple[Simulation, Path]:
    """Crawl the web with the legacy crawler and bootstrap planner state from its logs.

    Returns the simulation positioned after the history and the data root holding the
    history's partitions and ``state/dt=<last history day>``.
    """
    params = spec.params()
    root = workdir / "history" / "data"
    shutil.rmtree(root.parent, ignore_errors=True)
    sim = write_history(spec, root)
    cfg = planner_config(spec, root, "adaptive", None)
    first, last = day_str(params, 0), day_str(params, spec.history_days - 1)
    for d in range(spec.history_days):
        validate_logs.run(cfg, day_str(params, d))
        if spec.intake:
            intake.run(cfg, day_str(params, d), spark)
    rebuild_state.run(cfg, first, last, spark)
    return sim, root


# --------------------------------------------------------------------- loop
def run_policy(spec: BacktestSpec, policy: str, history: tuple[Simulation, Path], workdir: Path,
               spark, endpoint: str, budget: int | None = None, tag: str | None = None,
               log=print) -> PolicyRun:
    """Run ``spec.days`` planned days of ``policy`` on a copy of the history."""
    sim0, hist_root = history
    budget = spec.budget if budget is None else budget
    name = tag or policy
    root = workdir / name / "data"
    shutil.rmtree(root.parent, ignore_errors=True)
    shutil.copytree(hist_root, root)
    sim = copy.deepcopy(sim0)
    sim.root = root
    run = PolicyRun(policy=name, status="ok", budget=budget)
    cfg = planner_config(spec, root, policy, endpoint, budget)
    lambda_table = oracle_table(root, policy)
    cfg_path = root.parent / "recrawl.toml"
    cfg_path.write_text(toml_text(cfg))
    from jobs.publish import ensure_bucket
    ensure_bucket(endpoint, BUCKET)

    p = sim.params
    first_plan = spec.history_days  # sim day of the first planned schedule
    secs = {k: 0.0 for k in ("allocate", "build_schedule", "publish_verify", "fleet",
                             "update_state", "audit", "intake")}
    rows, host_rows, audits = [], [], []
    visits0 = sim.copies.visits.copy()
    first_copy = np.full(0, np.nan)  # per page: the instant (sim days) of its first copy
    seen0 = (sim.page_obs_days.copy(), sim.page_fresh_days.copy())
    t_start = time.monotonic()
    for k in range(spec.days):
        d_run, d_next = first_plan - 1 + k, first_plan + k
        D, D1 = day_str(p, d_run), day_str(p, d_next)
        t = t_day = time.monotonic()
        try:
            alloc_rec = allocate.run(cfg, D, spark, lambda_table=lambda_table)
        except NotImplementedError as exc:
            run.status, run.error = "not wired", str(exc)
            log(f"[backtest] {name}: not wired ({exc})")
            return run
        secs["allocate"] += time.monotonic() - t
        t = time.monotonic()
        build_schedule.run(cfg, D, spark)
        secs["build_schedule"] += time.monotonic() - t
        if rows:  # metrics/dt=D now holds update_state(D)'s audit of day D's fetches
            rows[-1].update(production_audit(cfg, D))
        t = time.monotonic()
        dag_tasks.publish(D, str(cfg_path))
        verified = dag_tasks.verify(D, str(cfg_path))
        sched = read_schedule(cfg.publish.target, D1, endpoint)
        secs["publish_verify"] += time.monotonic() - t
        t = time.monotonic()
        state_prev = audit.read_state_for_audit(cfg.paths.table("state", D), spec.audit_rate)
        result = sim.step(d_next, sched)
        first_copy = first_copies(sim, first_copy, result.fetch_log)
        secs["fleet"] += time.monotonic() - t
        host_rows.append(_host_use(sim, sched, d_next))
        t = time.monotonic()
        audits.append(audit.shadow_audit(sim, d_next, state_prev, result.fetch_log))
        secs["audit"] += time.monotonic() - t
        t = time.monotonic()
        write_inputs(sim, root, d_next)
        if spec.intake:
            write_signals(sim, root, d_next, True)  # replaces the step's hand-written ones
            t_intake = time.monotonic()
            intake.run(cfg, D1, spark)
            secs["intake"] += time.monotonic() - t_intake
        validate_logs.run(cfg, D1)
        update_state.run(cfg, D1, spark)
        secs["update_state"] += time.monotonic() - t
        rec = result.record
        rows.append({"day": d_next, "date": D1, "run_date": D, "fetches": rec["fetches"],
                     "freshness": rec["fresh_days"] / rec["obs_days"],
                     "freshness_weighted": rec["w_fresh_days"] / rec["w_obs_days"],
                     "age_days": rec["age_days2"] / rec["obs_days"],
                     "age_days_weighted": rec["w_age_days2"] / rec["w_obs_days"],
                     "status_304": rec["status_304"], "status_503": rec["status_503"],
                     "status_429": rec["status_429"], "over_quota": rec["over_quota"],
                     "gap_violations": rec["gap_violations"], "cap_violations": rec["cap_violations"],
                     "found_change": rec["fetches_found_change"], "bytes": rec["bytes"],
                     "not_issued": result.not_issued, "scheduled": len(sched),
                     "verified_rows": verified.get("rows"),
                     **{f"lane_{l}": int((sched["lane"] == l).sum())
                        for l in ("refresh", "fast", "discovery", "audit")},
                     **_planner_figures(cfg, D, d_next, alloc_rec)})
        log(f"[backtest] {name} {D1}: {len(sched)} rows, freshness {rows[-1]['freshness']:.3f} "
            f"(w {rows[-1]['freshness_weighted']:.3f}), {time.monotonic() - t_day:.1f}s")
    if rows:  # the last day's row: update_state's (no later run planned)
        rows[-1].update(production_audit(cfg, rows[-1]["date"]))
    run.seconds = time.monotonic() - t_start
    run.stage_seconds = {k: round(v, 1) for k, v in secs.items()}
    run.daily = pd.DataFrame(rows)
    run.metrics = sim.metrics(first_plan, first_plan + spec.days - 1, budget)
    run.metrics.update(_extra_metrics(run.daily, budget))
    run.metrics.update(discovery_delay(sim.web.pages.born, first_copy, first_plan,
                                       first_plan + spec.days))
    run.allocation = _allocation(sim, visits0, seen0, spec.days)
    run.hosts = pd.concat(host_rows, ignore_index=True)
    run.audit_checks = pd.concat(audits, ignore_index=True)
    run.audit = audit.combine(run.audit_checks, run.daily, name)
    run.metrics.update({f"audit_window_{k}": v for k, v in audit.window(
        run.audit_checks, run.metrics["freshness"], run.metrics["freshness_weighted"],
        name).items() if k not in ("policy", "day")})
    return run


def _planner_figures(cfg: Config, run_date: str, day: int, alloc_rec: dict) -> dict:
    """The planner's own view of the run for ``run_date``."""
    return {"expected_freshness": alloc_rec.get("expected_freshness"),
            "due_total": alloc_rec.get("due_total"), "host_carried": alloc_rec.get("host_carried"),
            "expected_age_days": alloc_rec.get("expected_age_days"),
            # signals that defer and discover (jobs.core.signal_evidence, allocate)
            **{c: alloc_rec.get(c) for c in ("signal_deferred", "signal_urls_discovered",
                                             "signal_urls_not_discovered")},
            # the budget advisor's what-if curve for the day this plan covers
            **{c: alloc_rec.get(c)
               for c in budget_curve.FRESHNESS_COLUMNS + budget_curve.AGE_COLUMNS}}


AUDIT_KEYS = ("audit_freshness", "audit_freshness_lo", "audit_freshness_hi", "audit_n")


def production_audit(cfg: Config, date: str) -> dict:
    """The production freshness audit of ``date``'s fetches, as an operator reads it.

    ``metrics/dt=<date>``: update_state's audit figures, in the row that date's
    build_schedule wrote, or update_state's own row on the last simulated day (no later run
    follows). ``planner_audit_source`` is the row's ``written_by``.
    """
    from jobs import metrics

    m = metrics.read(cfg, date)
    vals, source = {k: m.get(k) for k in AUDIT_KEYS}, m.get("written_by")
    out = {f"planner_{k}": (None if v is None or pd.isna(v) else float(v)) for k, v in vals.items()}
    out["planner_audit_source"] = source
    return out


def first_copies(sim: Simulation, first_copy: np.ndarray, log: pa.Table) -> np.ndarray:
    """``first_copy`` (per page, sim days; NaN: no copy yet) grown to every page and updated
    with the day's fetch log: a page's first 200 of a policy lane (audits are
    measurement-only) is when the index first held it."""
    pg = sim.web.pages
    n = len(pg.born)
    out = np.concatenate([first_copy, np.full(n - len(first_copy), np.nan)])
    if log.num_rows == 0:
        return out
    micros = log["fetched_at"].cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    df = pd.DataFrame({"url": log["url"].to_numpy(zero_copy_only=False),
                       "us": micros.to_numpy(zero_copy_only=False),
                       "status": log["status"].to_numpy(zero_copy_only=False),
                       "lane": log["lane"].to_pandas()})
    df = df[(df["status"] == 200) & (df["lane"].fillna("") != "audit")]
    page = pd.Index(pg.url[:n]).get_indexer(df["url"].to_numpy(object))
    at = ((df["us"].to_numpy(float) / 1e6 - sim.params.start_epoch_s) / DAY_S)
    ok = page >= 0
    first = pd.Series(at[ok]).groupby(page[ok]).min()
    idx = first.index.to_numpy()
    out[idx] = np.fmin(out[idx], first.to_numpy())
    return out


def discovery_delay(born: np.ndarray, first_copy: np.ndarray, start: float, end: float) -> dict:
    """How long pages born in the window ``[start, end)`` (sim days) waited for their first
    copy: ``discovery_delay_days``, the mean of min(first copy, end) − birth (a page still
    without a copy counts the time to the window's end: a restricted mean, comparable between
    policies on the same web), ``discovery_delay_copied_days`` the mean over the pages that
    got one, and ``new_pages_copied_share``."""
    n = len(born)
    fc = np.concatenate([first_copy, np.full(max(n - len(first_copy), 0), np.nan)])[:n]
    new = (born >= start) & (born < end)
    if not new.any():
        return {"new_pages": 0, "discovery_delay_days": float("nan"),
                "discovery_delay_copied_days": float("nan"), "new_pages_copied_share": float("nan")}
    b, f = born[new], fc[new]
    copied = ~np.isnan(f)
    wait = np.minimum(np.where(copied, f, end), end) - b
    return {"new_pages": int(new.sum()), "discovery_delay_days": float(wait.mean()),
            "discovery_delay_copied_days": float(wait[copied].mean()) if copied.any()
            else float("nan"),
            "new_pages_copied_share": float(copied.mean())}


def _extra_metrics(daily: pd.DataFrame, budget: int) -> dict:
    return {"budget": budget, "planned_rows": int(daily["scheduled"].sum()),
            "not_issued": int(daily["not_issued"].sum()),
            "schedule_over_budget_days": int((daily["scheduled"] > budget).sum())}


def _allocation(sim: Simulation, visits0: np.ndarray, seen0: tuple, days: int) -> pd.DataFrame:
    """Per page: host, true λ, importance, the visit rate the policy actually gave it and the
    days it was observed / fresh in the planned window (truth; freshness per page kind:
    :func:`lab.backtest.report.kind_freshness`)."""
    pg = sim.web.pages
    n = len(sim.copies.visits)

    def since(now, before):
        now = np.concatenate([now, np.zeros(max(n - len(now), 0))])[:n]
        return now - np.concatenate([before, np.zeros(n - len(before))])[:n]

    return pd.DataFrame({"url": pg.url[:n], "host": sim.web.hosts.name[pg.host[:n]],
                         "lam": pg.lam_eff[:n], "importance": pg.importance[:n],
                         "kind": pg.kind[:n], "front": pg.section[:n] < 0,
                         "visits_per_day": since(sim.copies.visits, visits0) / days,
                         "obs_days": since(sim.page_obs_days, seen0[0]),
                         "fresh_days": since(sim.page_fresh_days, seen0[1])})


def _host_use(sim: Simulation, sched: pd.DataFrame, day: int) -> pd.DataFrame:
    """Scheduled rows per host against the host's daily capacity (crawl delay and cap)."""
    h = sim.web.truth_hosts()
    mf = h["max_fetches_per_day"].to_numpy(float)
    cap = host_cap(h["crawl_delay_s"].to_numpy(float), np.where(mf < 0, np.nan, mf))
    counts = sched.groupby("host").size() if len(sched) else pd.Series(dtype=int)
    return pd.DataFrame({"day": day, "host": h["host"], "capacity": cap,
                         "rows": counts.reindex(h["host"]).fillna(0).astype(int).to_numpy(),
                         "size_day0": h["size_day0"]})


def spec_dict(spec: BacktestSpec) -> dict:
    d = asdict(spec)
    d["budget"] = spec.budget
    d["process_shares"] = list(spec.params().process_shares)  # the web's, overridden or not
    return d
