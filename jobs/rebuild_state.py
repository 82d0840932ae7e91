"""Recompute state from the whole fetch-log history in one Spark job.

Used after a bug fix or a change to the estimators: it folds every date in [--from, --to]
starting from nothing (whatever state exists before --from), and its result equals what
the daily incremental runs (``jobs.update_state``) would have produced (a test checks
this for the state, every day's hosts table and every day's run record).

One job, not one per day: every day's clean logs and signals are read once, with their
day, and grouped by a hash of the HOST (not the URL); one pandas call per bucket replays
the days in order (:func:`jobs.core.replay.replay`: stale rows, the host
trust of the day before, ``fold_day``, ``update_hosts``). This is exact because all
dependence between URLs before the group priors is within a host, and λ̂ of a day never
feeds a later fold. After the last day the group priors and importance are applied as
``update_state`` applies them. Besides reading each day's partitions and one ``fold_day``
call per bucket and day, the cost grows with the log rows, not with days × state.

Writes (a rerun replaces them):

* ``state/dt=--to`` only. The state partitions of the days before are NOT written (writing
  them is the days × state cost this job exists to avoid); partitions already there from
  earlier runs are left as they are and no longer match the rebuilt hosts and records, so
  run ``update_state`` for a date inside the range only after rebuilding up to its day
  before. The DAG's next day reads ``state/dt=--to`` and ``hosts/dt=--to``.
* ``hosts/dt=D`` for every day (small);
* ``quarantine/dt=D/source=...`` for every day, as the daily run writes it (including the
  ``stale_fetched_at`` rows older than their URL's last fetch of the day before);
* the ``update_state`` run record of every day (same keys as the daily run's);
* ``metrics/dt=D`` of every day: the rebuilt state figures, and the plan columns of the row
  already committed for D, if any (``written_by = rebuild_state``; :mod:`jobs.metrics`).

Outage days (``fetch_logs/dt=D/_NO_FETCHES.json``, :mod:`jobs.outage`; ``--no-fetches-on``
declares them first) are not folded: the state and hosts are carried over them as the daily
run carries them, and their run record says ``no_fetches``. Any other day without logs is
refused before Spark starts, as is a range starting on an outage day.

Memory: one bucket holds every day's logs of its hosts (a host is never split): about
``spark.rebuild_rows_per_bucket`` log rows, and there is at least one bucket per core. Each
bucket folds each day once (one ``fold_day`` call for all its URLs), so fewer, larger
buckets cost less.

Run: ``python -m jobs.rebuild_state --from 2026-11-01 --to 2026-11-29 [--config ...]``.
Output goes to the configured root; point ``paths.root`` at a copy to compare before
replacing production state.
"""
from __future__ import annotations

import functools
import sys

import pandas as pd

from jobs import ingest, metrics, outage, partitions, progress, schemas, storage, update_state
from jobs import snapshots
from jobs.cli import Parser, add_date_arg, date_list, guarded
from jobs.config import Config, add_config_args, config_from_args
from jobs.errors import OutageRefused, UsageError
from jobs.core import observations, replay, state_update, trust
from jobs.params import trust_params, update_params
from jobs.paths import date_range, previous_day, quarantine_path
from jobs.runlog import write_stage_record
from jobs.spark_session import get_spark

_LOG_COLS = ["url", "host", "fetched_at", "status", "conditional", "etag", "last_modified",
             "content_hash", "bytes", "lane", "elapsed_ms", "retry_after", "fingerprint_version"]
_SIG_COLS = ["url", "host", "signaled_at"]
_SIG_DDL = "url string, host string, signaled_at timestamp, dt string"
_QUARANTINE_SOURCES = ("fetch_logs", "importance", "signals")
_QUARANTINE_COLS = ("reason", "url", "row_json")  # a quarantine file's columns
# The replay's one output holds rows of four kinds (_kind) side by side in one schema:
# "state" rows use the state columns, "hosts" rows the h_ columns, "figures" (per day and
# bucket) and "stale" (per day and URL: url, last_fetch_at) rows the f_ columns.


def buckets(cfg: Config, log_rows: int, cores: int) -> int:
    """Host-hash buckets of the replay: about ``log_rows / spark.rebuild_rows_per_bucket``
    (a bucket holds every day's logs of its hosts), at least one per core. Fewer is cheaper:
    each bucket folds every day once, whatever its size."""
    return max(1, cores, -(-log_rows // cfg.spark.rebuild_rows_per_bucket))


def _out_schema():
    """(Spark DDL, Arrow schema) of the replay's output."""
    import pyarrow as pa

    hosts_ddl = ", ".join(f"h_{part}" for part in schemas.HOSTS.spark_ddl().split(", "))
    figures = list(replay.FIGURES)
    ddl = (f"_kind string, _dt string, {schemas.STATE.spark_ddl()}, {hosts_ddl}, "
           + ", ".join(f"f_{c} bigint" for c in figures))
    fields = ([pa.field("_kind", pa.string()), pa.field("_dt", pa.string())]
              + list(schemas.STATE.arrow_schema(all_nullable=True))
              + [f.with_name(f"h_{f.name}") for f in schemas.HOSTS.arrow_schema(all_nullable=True)]
              + [pa.field(f"f_{c}", pa.int64()) for c in figures])
    return ddl, pa.schema(fields)


def _arrow(pdf: pd.DataFrame, kind: str, schema):
    """``pdf`` (columns named as in ``schema``; the others null) as an Arrow table of it."""
    return schemas.table_from_pandas(pdf.assign(_kind=kind), schema)


def _replay_fn(cfg: Config, days: list[str], schema, outage_days: list[str]):
    up, tp = update_params(cfg), trust_params(cfg)

    def run_bucket(logs_t, sig_t):
        import pyarrow as pa

        r = replay.replay(logs_t.to_pandas(), sig_t.to_pandas(), days, up, tp,
                          outage_days=outage_days)
        last = days[-1]
        parts = [
            _arrow(r.state.assign(_dt=last), "state", schema),
            _arrow(r.hosts.rename(columns={c: f"h_{c}" for c in trust.HOST_COLUMNS})
                   .rename(columns={"dt": "_dt"}), "hosts", schema),
            _arrow(r.figures.rename(columns={c: f"f_{c}" for c in replay.FIGURES})
                   .rename(columns={"dt": "_dt"}), "figures", schema),
            _arrow(r.stale.rename(columns={"dt": "_dt", "rows": "f_stale_rows"}), "stale", schema),
        ]
        return pa.concat_tables(parts)

    return run_bucket


def _union(frames):
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _write_hosts(cfg: Config, days: list[str], hosts) -> None:
    """Every day's hosts in one partitioned write, then one commit per ``hosts/dt=D``
    (a day without hosts is committed empty, as the daily run commits it)."""
    root = cfg.paths.table("hosts")
    before = {d: set(storage.list_parquet_files(cfg.paths.table("hosts", d))) for d in days}
    storage.delete_dir(f"{root.rstrip('/')}/_temporary")  # a killed job's task outputs
    (hosts.repartition("dt").sortWithinPartitions("dt", "host")
     .write.mode("append").partitionBy("dt").parquet(root))
    for d in days:
        path = cfg.paths.table("hosts", d)
        new = [f for f in storage.list_parquet_files(path) if f not in before[d]]
        partitions.commit_files(path, "hosts", new)
    _drop_success_marker(root)


def _drop_success_marker(root: str) -> None:
    marker = f"{root.rstrip('/')}/_SUCCESS"
    if storage.exists(marker):  # Spark's, at the table root: no partition's commit
        storage.delete_file(marker)


def _write_quarantine(cfg: Config, replaced: list[tuple[str, str]], rows) -> dict:
    """Every day's quarantine rows (``dt``, ``source``, reason, url, row_json) in one
    partitioned write; returns {(day, source): rows} for every pair of ``replaced``.

    As the daily run, each (day, source) of ``replaced`` (its input was read) is replaced,
    even by no rows (then by an empty file, as Spark writes one); any other is left alone.
    """
    import pyarrow as pa
    from pyspark.sql import functions as F

    rows = rows.cache()
    counts = {(r["dt"], r["source"]): int(r["n"])
              for r in rows.groupBy("dt", "source").agg(F.count("*").alias("n")).collect()}
    for d, source in replaced:
        storage.delete_dir(quarantine_path(cfg, d, source))
    if counts:
        root = cfg.paths.table("quarantine")
        storage.delete_dir(f"{root.rstrip('/')}/_temporary")  # a killed job's task outputs
        (rows.repartition("dt", "source").write.mode("append").partitionBy("dt", "source")
         .parquet(root))
        _drop_success_marker(root)
    rows.unpersist()
    empty = pa.schema([pa.field(name, pa.string()) for name in _QUARANTINE_COLS])
    for d, source in replaced:
        if (d, source) not in counts:
            storage.write_parquet(f"{quarantine_path(cfg, d, source)}/part-00000-empty.parquet",
                                  empty.empty_table())
    return {key: counts.get(key, 0) for key in replaced}


def run(cfg: Config, first: str, last: str, spark=None, no_fetches_on=()) -> list[dict]:
    """Rebuild state/dt=``last``, hosts, quarantine and run records of [first, last]; return
    the run records, one per day (as ``update_state.run`` returns each).

    Days declared outages (:mod:`jobs.outage`; ``no_fetches_on`` declares more first) are
    carried forward as the daily run carries them; any other day without logs is refused.
    """
    from pyspark.sql import functions as F

    if last < first:
        raise UsageError(f"--to {last} is before --from {first}")
    days = date_range(first, last)
    for d in no_fetches_on:
        if d not in days:
            raise UsageError(f"--no-fetches-on {d} is outside {first} .. {last}")
        outage.declare(cfg, d)
    outages = [d for d in days if outage.check(cfg, d)]
    if days[0] in outages:
        raise OutageRefused(f"{days[0]} is an outage day: start the rebuild at the first day "
                            f"with fetch logs")
    fetched = [d for d in days if d not in outages]
    for d in fetched:  # every input refusal before a Spark session starts
        ingest.checked_footers(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", d), True)
    inputs = {d: snapshots.record(cfg, d) for d in fetched}  # each day's snapshots
    spark = spark or get_spark(cfg, "rebuild_state")
    # Every day in one read (one plan branch and no Spark job per day); the checked rows are
    # persisted for the replay, the stale-row join and the quarantine.
    cached: list = []
    logs, bad_logs, log_rows = ingest.read_fetch_logs_days(spark, cfg, fetched, cached)
    sig_clean, bad_sig, sig_days = ingest.read_signals_days(spark, cfg, fetched)
    # The importance snapshot as of the last day: the state it writes is that day's.
    importance, bad_imp = ingest.read_importance(spark, cfg, last)
    log_cols = [c for c in logs.columns if c != "dt"]  # as read_fetch_logs gives them
    signals = (sig_clean.select(*_SIG_COLS, "dt") if sig_clean is not None
               else spark.createDataFrame([], _SIG_DDL))

    # 1. The replay: one pandas call per host bucket over all days; its output is small
    # beside the logs (last state, hosts per day), so it is materialised once and the
    # plans below start from it.
    ddl, arrow_schema = _out_schema()
    n = F.lit(buckets(cfg, sum(log_rows.values()), spark.sparkContext.defaultParallelism))
    # Every row carries its host's politeness of its day's host_policy snapshot (its
    # served-rate limit is judged against it).
    policy = ingest.read_host_policy_days(spark, cfg, fetched)
    rows = ingest.with_politeness(cfg, logs.select(*_LOG_COLS, "dt"), policy, ("host", "dt"))
    out = (rows.withColumn("_b", F.pmod(F.xxhash64("host"), n))
           .groupBy("_b")
           .cogroup(signals.withColumn("_b", F.pmod(F.xxhash64("host"), n)).groupBy("_b"))
           .applyInArrow(_replay_fn(cfg, days, arrow_schema, outages), ddl)
           .localCheckpoint(eager=True))
    kind = F.col("_kind")
    sums = {r["_dt"]: r for r in out.filter(kind == "figures").groupBy("_dt").agg(
        *[F.sum(f"f_{c}").alias(c) for c in replay.FIGURES]).collect()}

    # 2. The last day's state: group priors and importance exactly as update_state.
    folded = update_state.with_group_keys(cfg, out.filter(kind == "state")
                                          .select(*schemas.STATE.names))
    result = update_state.with_group_priors(cfg, folded, cached)
    default_imp = F.lit(float(cfg.policy.default_importance))
    if importance is not None:
        result = (result.drop("importance").join(ingest.importance_by_url(importance), "url",
                                                 "left")
                  .withColumn("importance", F.coalesce("importance", default_imp)))
    else:
        result = result.withColumn("importance", default_imp)
    partitions.write_committed(result.select(*state_update.STATE_COLUMNS),
                               cfg.paths.table("state", last), "state")

    # 3. Every day's hosts.
    hosts = out.filter(kind == "hosts").select(
        *[F.col(f"h_{c}").alias(c) for c in schemas.HOSTS.names], F.col("_dt").alias("dt"))
    _write_hosts(cfg, days, hosts)
    host_figs = update_state.host_figures(hosts, "dt")

    # 4. Every day's quarantine: the reads' rows, and the stale rows the replay found.
    columns = ["dt", "source", "reason", "url", "row_json"]
    replaced = [(d, "fetch_logs") for d in fetched] + [(d, "signals") for d in sig_days]
    frames = [bad_logs.select(*columns)]
    if bad_sig is not None:
        frames.append(bad_sig.select(*columns))
    if bad_imp is not None:  # the daily run quarantines the same importance rows every day
        replaced += [(d, "importance") for d in fetched]
        frames.append(bad_imp.crossJoin(spark.createDataFrame([(d,) for d in fetched],
                                                              "dt string"))
                      .select(*columns))
    if any(int(r["stale_rows"] or 0) for r in sums.values()):
        stale = out.filter(kind == "stale").select(
            F.col("_dt").alias("dt"), "url", F.col("last_fetch_at").alias("_prev_fetch_at"))
        frames.append(ingest.split_stale_rows(logs, stale, log_cols, keys=("dt", "url"))[1]
                      .select(*columns))
    quarantined = _write_quarantine(cfg, replaced, _union(frames))
    for frame in cached:  # the checked logs and the prior tables with_group_priors persists
        frame.unpersist()

    # 5. Every day's run record, keys as update_state's.
    records = []
    for d in days:
        if d in outages:  # as jobs.outage.carry_forward records it
            record = {**outage.outage_record(records[-1]), "carried_from": previous_day(d)}
            write_stage_record(cfg, d, "update_state", record)
            records.append(record)
            continue
        fig = sums.get(d)
        get = (lambda c: int(fig[c] or 0)) if fig is not None else (lambda c: 0)  # noqa: E731
        record = {
            "log_rows": log_rows[d],
            **{f"quarantined_{s}": quarantined.get((d, s), 0) for s in _QUARANTINE_SOURCES},
            "urls_known": get("urls_known"), "urls_gone": get("urls_gone"),
            "urls_pending_signal": get("urls_pending_signal"),
            **{k: get(k) for k in observations.FETCH_FIGURES},
            **(host_figs.get(d) or update_state.no_host_figures()),
            **update_state._audit_figures(cfg, get("audit_n"), get("audit_fresh")),
            **inputs[d],
        }
        write_stage_record(cfg, d, "update_state", record)
        records.append(record)
    # 6. Every day's metrics: the new state figures beside the plan already committed for
    # that day (a rebuild does not change what was published), after the records they copy.
    metrics.write_state_rows(cfg, days, records, "rebuild_state")
    return records


def main(argv=None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    add_date_arg(parser, "--from", "first date to fold (YYYY-MM-DD)", dest="first")
    add_date_arg(parser, "--to", "last date to fold; state/dt=--to is written", dest="last")
    parser.add_argument("--no-fetches-on", type=date_list, default=[], metavar="D1,D2",
                        help="declare these days of the range fleet outages first "
                             "(fetch_logs/dt=D/_NO_FETCHES.json; docs/operations.md); days "
                             "already declared need not be named")
    add_config_args(parser)
    args = parser.parse_args(argv)
    cfg = config_from_args(args)
    progress.log_to_stderr()
    with progress.reporting("rebuild_state", cfg.spark.progress_interval_s):
        records = run(cfg, args.first, args.last, no_fetches_on=args.no_fetches_on)
    for record in records:
        print(record)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
