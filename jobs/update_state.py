"""Stage 2: yesterday's state + hosts + today's fetch logs and signals -> state/dt=D, hosts/dt=D.

Never rescans log history: reads ``state/dt=D-1``, ``hosts/dt=D-1``, ``fetch_logs/dt=D`` and
``signals/dt=D`` only. Steps (all per-URL work stays on the executors):

1. Each log row gets its host's trust (``trust_etag``, ``trust_lm``, ``signal_trusted``)
   from yesterday's hosts table; signal rows are unioned with the log rows.
2. State and today's rows (and the importance table's rows) are bucketed by a hash of the
   URL and co-grouped, so each pandas call folds a whole bucket with
   ``jobs.core.state_update.fold_day`` (decayed sufficient statistics, observations,
   validator evidence, signal claims). Log rows older than their URL's last fetch are
   left out there (``jobs.core.replay.split_stale``) and quarantined afterwards.
3. Empirical-Bayes group priors: ``applyInPandas(fit_group_priors)`` over the folded
   statistics of every group level of ``estimation.prior_level`` (template, URL class,
   host: jobs.core.estimators_shrinkage) in one pass, each level's small fit joined back;
   one scalar pandas UDF (its inputs only cross to Python) picks each row's prior
   (``choose_prior``) and estimates with it: λ̂, λ_lo, λ_hi.
4. Hosts: today's evidence summed per host plus health counts from the logs, co-grouped
   with yesterday's hosts rows and reclassified by ``jobs.core.trust.update_hosts``.
5. The freshness audit is scored into the run record: only fetch-log rows with lane
   ``audit`` (measurement-only: they change no stored state), see jobs.core.state_update.

Run: ``python -m jobs.update_state --date D`` or ``spark-submit jobs/update_state.py --date D``.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from jobs import ingest, metrics, outage, partitions, schemas, storage
from jobs.cli import stage_main
from jobs.config import Config
from jobs.errors import BootstrapRefused, OutageRefused
from jobs.core import (estimators_shrinkage, host_health, observations, replay,
                       state_update, trust)
from jobs.core.estimators_stats import STATS_COLUMNS, observation_columns
from jobs.params import trust_params, update_params
from jobs.paths import previous_day
from jobs.runlog import write_stage_record
from jobs import snapshots
from jobs.spark_session import get_spark

_EV = list(observations.EVIDENCE_COLUMNS)
# The fold's rows: state, today's evidence, and the last fetch before today of the URLs
# whose rows it left out as stale (null for the others).
_FOLD_DDL = (schemas.STATE.spark_ddl() + "".join(f", {c} bigint" for c in _EV)
             + ", _prev_fetch_at timestamp")
_PRIOR_DDL = ("_level int, _group string, prior_shape double, prior_rate double, "
              "prior_em boolean")
_ROW_COLS = ["url", "host", "fetched_at", "status", "conditional", "etag", "last_modified",
             "content_hash", "bytes", "trust_etag", "trust_lm", "signaled_at", "signal_trusted",
             "is_signal", "lane", "importance", "is_importance", "fingerprint_version"]


def _fold_arrow_schema():
    """The Arrow schema of :data:`_FOLD_DDL` (as Spark sends timestamps: µs, UTC)."""
    import pyarrow as pa

    return pa.schema(list(schemas.STATE.arrow_schema(all_nullable=True))
                     + [pa.field(c, pa.int64()) for c in _EV]
                     + [pa.field("_prev_fetch_at", pa.timestamp("us", tz="UTC"))])


def _fold_fn(cfg: Config, run_date: str):
    """Per URL bucket: yesterday's rows and today's rows in, the folded rows out, as Arrow
    tables (``applyInArrow``): PySpark's own pandas conversion of the wide rows, both ways,
    cost more than the fold itself at 10M URLs; pyarrow's is a few times cheaper."""
    params = update_params(cfg)
    default_importance = float(cfg.policy.default_importance)
    schema = _fold_arrow_schema()

    def fold(state_t, rows_t):
        state_pdf, rows_pdf = state_t.to_pandas(), rows_t.to_pandas()
        if len(state_pdf) == 0:
            state_pdf = state_update.empty_state()
        is_sig = rows_pdf["is_signal"].eq(True).to_numpy()  # null (a log row): False
        is_imp = rows_pdf["is_importance"].eq(True).to_numpy()
        logs, sig = rows_pdf[~is_sig & ~is_imp], rows_pdf[is_sig]
        if len(logs) == 0 and len(state_pdf) == 0:
            return schema.empty_table()
        # Rows older than their URL's last fetch are not folded (the caller quarantines
        # them): found here, where the URL's state row already is, not by a join of the
        # logs with all of yesterday's state.
        logs, stale = replay.split_stale(logs, state_pdf)
        # λ is estimated once, after the group priors are joined (with_group_priors).
        out = state_update.fold_day(state_pdf[state_update.STATE_COLUMNS], logs, run_date,
                                    params, signals=sig, estimate=False)
        out["_prev_fetch_at"] = out["url"].map(
            stale.set_index("url")["last_fetch_at"]).astype("datetime64[us, UTC]")
        # Importance comes with the bucket's rows (no join of wide state rows by URL): the
        # table's weight, or the default for URLs it does not list.
        weights = state_update.importance_by_url(rows_pdf["url"][is_imp],
                                                 rows_pdf["importance"][is_imp])
        out["importance"] = (out["url"].map(weights).astype(float)
                             .fillna(default_importance).to_numpy())
        return schemas.table_from_pandas(out, schema)

    return fold


def _fit_priors_fn(cfg: Config):
    def fit(pdf):
        # Every group of a hash bucket in one call, level by level (the EM is vectorised
        # over groups and freezes each group once it converges, so a group's fit does not
        # depend on its bucket mates). The rows are already each group's sample
        # (_fit_priors).
        out = []
        for level, rows in pdf.groupby("_level", sort=True):
            # Shuffles deliver rows in any order; a fixed order makes the EM's sums, and
            # so a rerun's state, identical to the bit.
            rows = rows.sort_values(["_group", "url"], kind="stable")
            priors = estimators_shrinkage.fit_group_priors(
                rows[list(STATS_COLUMNS)].astype(float), rows["_group"].to_numpy(object),
                min_urls=cfg.estimation.prior_min_urls)
            out.append(pd.DataFrame({
                "_level": np.full(len(priors), level, dtype=np.int32),
                "_group": priors.index.astype(str),
                "prior_shape": priors["prior_shape"].to_numpy(float),
                "prior_rate": priors["prior_rate"].to_numpy(float),
                "prior_em": (priors["method"] == "em").to_numpy(bool)}))
        return pd.concat(out, ignore_index=True)  # a Spark group is never empty

    return fit


_PRIOR_CANDIDATES = ("prior_shape", "prior_rate", "prior_em")
_ESTIMATES = ("lambda_hat", "lambda_lo", "lambda_hi", "lambda_prior")


def _estimate_udf(cfg: Config, levels: int):
    """A scalar pandas UDF: per row, the prior choice
    (jobs.core.estimators_shrinkage.choose_prior) among the ``levels`` joined group fits,
    then the estimates with that prior, as a struct of :data:`_ESTIMATES` and the chosen
    ``prior_shape``, ``prior_rate``.

    Only its inputs cross to Python (the statistics and the candidate priors, ~50 doubles a
    row) and only the struct comes back: a ``mapInArrow`` over the wide state row sent all
    of it both ways, most of that stage's time."""
    from pyspark.sql.functions import pandas_udf

    def cols(name):
        return [f"{name}_{k}" for k in range(levels)]

    ddl = ", ".join(f"{c} double" for c in (*_ESTIMATES, "prior_shape", "prior_rate"))

    @pandas_udf(f"struct<{ddl}>")
    def estimate(rows: pd.DataFrame) -> pd.DataFrame:
        em = rows[cols("prior_em")].eq(True).to_numpy(dtype=bool)  # no fit joined: not EM
        shape, rate = estimators_shrinkage.choose_prior(
            rows[cols("prior_shape")].to_numpy(dtype=float),
            rows[cols("prior_rate")].to_numpy(dtype=float), em)
        stats = rows[list(STATS_COLUMNS)].astype(float)
        rates = state_update.estimate_with_priors(stats, shape, rate, level=cfg.estimation.level)
        out = {c: rates[c].to_numpy(float) for c in _ESTIMATES}
        return pd.DataFrame({**out, "prior_shape": shape, "prior_rate": rate})

    inputs = [*STATS_COLUMNS, *[c for name in _PRIOR_CANDIDATES for c in cols(name)]]
    return estimate, inputs


def _group_keys(cfg: Config):
    """Spark expressions of the shrinkage groups of ``estimation.prior_level``, most specific
    first: jobs.core.estimators_shrinkage.group_key_from_url on the ``host`` column, built
    from its URL_PATTERN and ID_PATTERN (a test checks both engines give the same keys)."""
    from pyspark.sql import functions as F

    es = estimators_shrinkage
    segment = F.regexp_extract("url", es.URL_PATTERN, 1)
    segment = F.when(segment == F.lit(es.EMPTY_SEGMENT), F.lit("")).otherwise(segment)
    keys = {"host": F.col("host"), "template": F.concat(F.col("host"), segment),
            "class": F.concat(F.lit("*"), F.regexp_replace(segment, es.ID_PATTERN, ""))}
    return [keys[level] for level in es.PRIOR_CHAINS[cfg.estimation.prior_level]]


def with_group_keys(cfg: Config, frame):
    """``frame`` plus ``_g0``, ``_g1``, ...: each row's group of every level of
    ``estimation.prior_level`` (:func:`_group_keys`), which :func:`with_group_priors` reads.

    update_state adds them before it persists the fold: the group sizes, the fit sample and
    the prior joins all read them, and each would recompute the URL regexes of every
    level."""
    return frame.select("*", *[key.alias(f"_g{level}")
                               for level, key in enumerate(_group_keys(cfg))])


def prior_sample_unit():
    """A URL's uniform number in [0, 1) (on a grid of 1e-6) for the prior-fit sample."""
    from pyspark.sql import functions as F

    return F.abs(F.xxhash64("url", F.lit("prior-sample"))) % 1_000_000 / 1_000_000.0


def _fit_priors(cfg: Config, folded, keys: list[str]):
    """One prior per group of every level, fitted per hash bucket of (level, group) in one
    shuffle and one pandas stage for all levels (one pandas call per bucket, not per group:
    there are thousands of templates a day).

    Each group is fitted on a deterministic hash sample of about ``prior_fit_max_urls`` of
    its URLs (the whole group when smaller: unit < max / size), drawn before the shuffle:
    a URL class can span a large share of the crawl, and whole it would reach one pandas
    call to keep a small share of it (and the Python workers' memory with it). The sizes of the groups that need a sample come from a
    count per group (a partial aggregate: one row per group and partition crosses the
    shuffle); there are at most rows / max of them, so broadcast.

    Only URLs with an observation cross the shuffle: the EM reads only those, and a URL
    without one adds zeros to its group's pooled sums (most of a young crawl). A group
    without any gets no prior either way. The sample still counts every URL of the group."""
    from functools import reduce

    from pyspark.sql import functions as F

    def by_level(frame, *cols):
        return reduce(lambda a, b: a.unionByName(b), [
            frame.select(F.lit(level).cast("int").alias("_level"), F.col(key).alias("_group"),
                         *cols)
            for level, key in enumerate(keys)])

    observed = reduce(lambda a, b: a | b, [F.coalesce(F.col(c), F.lit(0.0)) > 0
                                           for c in observation_columns()])
    max_urls = cfg.estimation.prior_fit_max_urls
    large = (by_level(folded).groupBy("_level", "_group").agg(F.count("*").alias("_size"))
             .filter(F.col("_size") > max_urls))
    rows = by_level(folded.filter(observed), "url", prior_sample_unit().alias("_unit"),
                    *STATS_COLUMNS)
    sample = (rows.join(F.broadcast(large), ["_level", "_group"], "left")
              .filter(F.col("_size").isNull()
                      | (F.col("_unit") < F.lit(float(max_urls)) / F.col("_size")))
              .drop("_size", "_unit"))
    buckets = cfg.spark.state_buckets
    return (sample.withColumn("_pb", F.pmod(F.xxhash64("_level", "_group"), F.lit(buckets)))
            .groupBy("_pb").applyInPandas(_fit_priors_fn(cfg), _PRIOR_DDL))


# A level's prior table (one row per group with a usable prior) is broadcast to the
# rows when it has at most this many groups; a larger one (URLs whose first path segment
# is an ID make one group per URL) is joined by a shuffle instead.
BROADCAST_MAX_GROUPS = 1_000_000


def with_group_priors(cfg: Config, folded, cached: list | None = None):
    """Each row's λ̂, λ_lo, λ_hi and λ_prior under its group prior, plus the chosen
    ``prior_shape`` and ``prior_rate``.

    Every level's priors are fitted in one pass (:func:`_fit_priors`); each level's table
    (small, one row per group) is joined to the rows by group; a scalar pandas UDF
    (:func:`_estimate_udf`) then picks each row's prior with
    :func:`jobs.core.estimators_shrinkage.choose_prior` and estimates with it. The fitted
    table is persisted (counted per level to choose the join) and appended to ``cached``
    for the caller to unpersist once the result is written.
    """
    from pyspark.sql import functions as F

    keys = [f"_g{level}" for level in range(len(_group_keys(cfg)))]
    missing = [k for k in keys if k not in folded.columns]
    if missing:
        raise ValueError(f"with_group_priors needs the group columns {missing}: "
                         f"add them with with_group_keys")
    out = folded
    # Groups without a usable prior (NaN) join like no group: left out of the table.
    fits = (_fit_priors(cfg, folded, keys)
            .filter(~F.isnan(F.coalesce("prior_shape", F.lit(float("nan"))))).persist())
    if cached is not None:
        cached.append(fits)
    groups = {r["_level"]: r["n"] for r in fits.groupBy("_level").agg(F.count("*").alias("n"))
              .collect()}  # one row per level
    for level, key in enumerate(keys):
        pri = fits.filter(F.col("_level") == level).select(
            F.col("_group").alias(key),
            *[F.col(c).alias(f"{c}_{level}") for c in _PRIOR_CANDIDATES])
        # Broadcast: the wide rows are not shuffled once per level.
        small = groups.get(level, 0) <= BROADCAST_MAX_GROUPS
        out = out.join(F.broadcast(pri) if small else pri, key, "left")
    added = [*_ESTIMATES, "prior_shape", "prior_rate"]
    estimate, inputs = _estimate_udf(cfg, len(keys))
    out = out.withColumn("_est", estimate(F.struct(*inputs)))
    kept = [c for c in folded.columns if c not in added + keys]
    return out.select(*kept, *[F.col(f"_est.{c}").alias(c) for c in added])


def _hosts_fn(cfg: Config, run_date: str):
    params = trust_params(cfg)

    def update(prev_pdf, today_pdf):
        if len(prev_pdf) == 0 and len(today_pdf) == 0:
            return pd.DataFrame(columns=list(trust.HOST_COLUMNS))
        return trust.update_hosts(prev_pdf[list(trust.HOST_COLUMNS)] if len(prev_pdf) else
                                  prev_pdf.iloc[0:0], today_pdf, run_date, params)

    return update


def _read_prev(spark, cfg: Config, table: str, contract, run_date: str, bootstrap: bool):
    """Yesterday's committed partition; with ``bootstrap``, nothing (an explicit first day)."""
    if bootstrap:
        return spark.createDataFrame([], contract.spark_ddl())
    files = partitions.committed_files(cfg.paths.table(table, previous_day(run_date)), table)
    schemas.check_files(contract, files)
    if not files:  # committed and empty (a day with no URLs yet): still a real input
        return spark.createDataFrame([], contract.spark_ddl())
    # Optional columns a partition written before they existed lacks are read as null.
    return ingest.project(spark.read.parquet(*files), contract)


def check_bootstrap(cfg: Config, run_date: str) -> None:
    """Refuse to start from nothing on top of real history: that is rebuild_state's job."""
    prev = cfg.paths.table("state", previous_day(run_date))
    if partitions.is_committed(prev):
        raise BootstrapRefused(f"--bootstrap on {run_date}, but {prev} is committed: "
                               f"bootstrapping would discard it (use rebuild-state to "
                               f"recompute history)")


def _rows(logs, signals, hosts_prev, importance=None):
    """Fetch rows, signal rows and importance rows in one frame; fetch and signal rows
    carry their host's trust flags (a small table: broadcast, the rows stay put)."""
    from pyspark.sql import functions as F

    trust_cols = F.broadcast(hosts_prev.select("host", "trust_etag", "trust_lm",
                                               "signal_trusted"))
    logs = (logs.join(trust_cols, "host", "left")
            .withColumn("signaled_at", F.lit(None).cast("timestamp"))
            .withColumn("is_signal", F.lit(False)).withColumn("is_importance", F.lit(False))
            .withColumn("importance", F.lit(None).cast("double")).select(*_ROW_COLS))
    types = dict(logs.dtypes)

    def padded(frame):
        for c in _ROW_COLS:
            if c not in frame.columns:
                frame = frame.withColumn(c, F.lit(None).cast(types[c]))
        return frame.select(*_ROW_COLS)

    rows = logs
    if signals is not None:
        rows = rows.unionByName(padded(
            signals.join(trust_cols, "host", "left").withColumn("is_signal", F.lit(True))
            .withColumn("status", F.lit(None).cast("int"))))
    if importance is not None:
        rows = rows.unionByName(padded(
            importance.select("url", F.col("importance").cast("double"))
            .withColumn("is_importance", F.lit(True))))  # a URL's rows: one or more
    return rows


def run(cfg: Config, run_date: str, spark=None, bootstrap: bool = False,
        from_empty: bool = False, no_fetches: bool = False) -> dict:
    """Fold ``run_date``'s logs into yesterday's committed state and hosts.

    ``bootstrap`` starts from nothing on the first date of a deployment (refused when
    yesterday's state is committed); ``from_empty`` is rebuild_state's replay, which starts
    from nothing whatever exists. Otherwise a missing or uncommitted yesterday is a
    :class:`jobs.partitions.MissingPartitionError`, never an empty start.

    ``no_fetches`` declares the day a fleet outage; on a declared day (``--no-fetches`` now
    or the marker before) the state is carried forward without Spark (:mod:`jobs.outage`).
    """
    from pyspark.sql import functions as F

    if no_fetches or outage.check(cfg, run_date):
        if bootstrap:
            raise OutageRefused(f"--bootstrap on {run_date}, a day without fetches: "
                                f"bootstrap on the first day with fetch logs")
        return outage.carry_forward(cfg, run_date)
    # Every input refusal before a Spark session starts.
    if bootstrap:
        check_bootstrap(cfg, run_date)
    elif not from_empty:
        for table in ("state", "hosts"):
            partitions.committed_files(cfg.paths.table(table, previous_day(run_date)), table)
    ingest.checked_footers(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", run_date), True)
    inputs = snapshots.record(cfg, run_date)  # which importance / host_policy snapshot
    spark = spark or get_spark(cfg, "update_state")
    cached = []  # persisted frames, unpersisted once the run record's figures are read
    logs, bad_logs = ingest.read_fetch_logs(spark, cfg, run_date, cached)
    importance, bad_imp = ingest.read_importance(spark, cfg, run_date)
    signals, bad_sig = ingest.read_signals(spark, cfg, run_date)
    start_empty = bootstrap or from_empty
    prev = _read_prev(spark, cfg, "state", schemas.STATE, run_date, start_empty)
    hosts_prev = _read_prev(spark, cfg, "hosts", schemas.HOSTS, run_date, start_empty)

    buckets = cfg.spark.state_buckets
    rows = _rows(logs, signals, hosts_prev, importance).withColumn("_b", F.pmod(F.xxhash64("url"),
                                                                    F.lit(buckets)))
    prev = prev.withColumn("_b", F.pmod(F.xxhash64("url"), F.lit(buckets)))
    folded = (prev.groupBy("_b").cogroup(rows.groupBy("_b"))
              .applyInArrow(_fold_fn(cfg, run_date), _FOLD_DDL))
    folded = with_group_keys(cfg, folded).persist()
    cached.append(folded)
    result = with_group_priors(cfg, folded, cached)
    partitions.write_committed(result.select(*state_update.STATE_COLUMNS),
                               cfg.paths.table("state", run_date), "state")

    figures = folded.agg(F.count("*").alias("urls_known"),
                         F.sum(F.col("gone").cast("int")).alias("urls_gone"),
                         F.sum(F.col("pending_signal_at").isNotNull().cast("int"))
                         .alias("urls_pending_signal"),
                         F.sum("ev_audit_n").alias("audit_n"),
                         F.sum("ev_audit_fresh").alias("audit_fresh"),
                         *[F.sum(ev).alias(k) for k, ev in observations.FETCH_FIGURES.items()],
                         F.count("_prev_fetch_at").alias("stale_urls")).first().asDict()
    logs, bad_logs = _split_stale(folded, logs, bad_logs, int(figures["stale_urls"]))
    hosts = _write_hosts(spark, cfg, run_date, folded, logs, hosts_prev)
    audit = _audit_figures(cfg, int(figures["audit_n"] or 0), int(figures["audit_fresh"] or 0))
    record = {
        # From the footers: no second pass over the day's logs.
        "log_rows": sum(storage.parquet_metadata(f).num_rows for f in
                        partitions.visible_files(cfg.paths.table("fetch_logs", run_date))),
        "quarantined_fetch_logs": ingest.write_quarantine(cfg, run_date, "fetch_logs", bad_logs),
        "quarantined_importance": ingest.write_quarantine(cfg, run_date, "importance", bad_imp),
        "quarantined_signals": ingest.write_quarantine(cfg, run_date, "signals", bad_sig),
        "urls_known": int(figures["urls_known"] or 0),
        "urls_gone": int(figures["urls_gone"] or 0),
        "urls_pending_signal": int(figures["urls_pending_signal"] or 0),
        **{k: int(figures[k] or 0) for k in observations.FETCH_FIGURES},
        **hosts, **audit, **inputs,
    }
    for frame in cached:
        frame.unpersist()
    write_stage_record(cfg, run_date, "update_state", record)
    metrics.write_state_rows(cfg, [run_date], [record], "update_state")
    return record


def _split_stale(folded, logs, bad_logs, stale_urls: int):
    """(clean, quarantined) logs: the rows the fold left out as stale join the quarantine,
    and the host health counts only the others. No stale URL (most days): no join."""
    from pyspark.sql import functions as F

    if stale_urls == 0:
        return logs, bad_logs
    stale = folded.filter(F.col("_prev_fetch_at").isNotNull()).select("url", "_prev_fetch_at")
    clean, bad = ingest.split_stale_rows(
        logs, F.broadcast(stale) if stale_urls <= BROADCAST_MAX_GROUPS else stale, logs.columns)
    return clean, bad_logs.unionByName(bad)


def _retry_after_waits(cfg: Config, logs):
    """(host, blocked_until, asked_interval_s) of the hosts whose 429/503 rows sent a
    Retry-After (:func:`jobs.core.host_health.retry_after_columns`, the header's full
    grammar). The spacing needs every row of those hosts (the gap before each 429); few hosts."""
    from pyspark.sql import functions as F

    max_block_s = cfg.health.max_retry_after_s
    asked_hosts = (logs.filter(F.col("status").isin(*host_health.RETRY_AFTER_STATUSES)
                               & F.col("retry_after").isNotNull())
                   .select("host").distinct())
    rows = (logs.join(asked_hosts, "host", "left_semi")
            .select("host", "status", "retry_after",
                    F.col("fetched_at").cast("double").alias("received_s")))

    def waits(pdf: pd.DataFrame) -> pd.DataFrame:
        return host_health.retry_after_columns(
            pdf["host"], pdf["status"], pdf["retry_after"], pdf["received_s"],
            max_block_s=max_block_s).rename_axis("host").reset_index()

    return (rows.groupBy(F.pmod(F.xxhash64("host"), F.lit(cfg.spark.state_buckets)))
            .applyInPandas(waits, "host string, blocked_until double, asked_interval_s double"))


def _write_hosts(spark, cfg: Config, run_date: str, folded, logs, hosts_prev) -> dict:
    from pyspark.sql import functions as F

    ev = folded.groupBy("host").agg(*[F.sum(c).cast("double").alias(c) for c in _EV],
                                    F.count("*").alias("urls_known"))
    st = F.col("status")
    health = logs.groupBy("host").agg(
        F.count("*").alias("fetches"), F.sum((st == 0).cast("long")).alias("timeouts"),
        F.sum((st >= 500).cast("long")).alias("errors_5xx"),
        F.sum((st == 429).cast("long")).alias("throttled_429"),
        F.sum(st.isin(429, 503).cast("long")).alias("throttled"),
        F.sum("elapsed_ms").cast("double").alias("latency_sum_ms"),
        F.count("elapsed_ms").alias("latency_n"))
    today = ev.join(health, "host", "full")
    # The politeness the host's served-rate limit is judged against, as allocate reads it,
    # and the latest wait its 429/503 responses asked for.
    policy, _ = ingest.read_host_policy(spark, cfg, run_date)  # allocate quarantines bad rows
    today = ingest.with_politeness(cfg, today, policy).join(_retry_after_waits(cfg, logs),
                                                            "host", "left")
    buckets = cfg.spark.state_buckets
    today = today.withColumn("_b", F.pmod(F.xxhash64("host"), F.lit(buckets)))
    prev = hosts_prev.withColumn("_b", F.pmod(F.xxhash64("host"), F.lit(buckets)))
    hosts = (prev.groupBy("_b").cogroup(today.groupBy("_b"))
             .applyInPandas(_hosts_fn(cfg, run_date), schemas.HOSTS.spark_ddl()))
    path = cfg.paths.table("hosts", run_date)
    partitions.write_committed(hosts, path, "hosts")
    files = partitions.committed_files(path, "hosts")
    written = spark.read.parquet(*files) if files else spark.createDataFrame(
        [], schemas.HOSTS.spark_ddl())
    return host_figures(written).get(None) or no_host_figures()


#: The run record's per-host figures (and the metrics columns among them, jobs.metrics).
HOST_FIGURES = ("hosts_cap_cut", "hosts_limited", "hosts_blocked", "host_fetches",
                "host_errors", "host_throttled")


def no_host_figures() -> dict:
    """:func:`host_figures` of a day without hosts."""
    return {"hosts_known": 0, "hosts_by_class": {}, **dict.fromkeys(HOST_FIGURES, 0)}


def host_figures(hosts, day_col: str | None = None) -> dict:
    """The run record's host figures of a hosts table, per value of ``day_col`` (None: one
    key, None): ``hosts_known``, ``hosts_by_class`` and :data:`HOST_FIGURES` (hosts with a
    cap cut, under a served-rate limit, blocked by a Retry-After; the day's fetches, errors
    (0/5xx/429) and 429/503s; allocate reports the visits the limits moved)."""
    from pyspark.sql import functions as F

    cap = F.col("nominal_cap")
    keys = ([day_col] if day_col else []) + ["validator_class"]
    rows = hosts.groupBy(*keys).agg(
        F.count("*").alias("n"),
        F.sum((F.col("cap_factor") < 1.0).cast("long")).alias("hosts_cap_cut"),
        F.sum((F.col("rate_limit") < cap).cast("long")).alias("hosts_limited"),
        F.sum(F.col("blocked_until").isNotNull().cast("long")).alias("hosts_blocked"),
        F.sum("fetches_today").alias("host_fetches"),
        F.sum(F.col("timeouts_today") + F.col("errors_5xx_today") + F.col("throttled_429_today"))
        .alias("host_errors"),
        F.sum("throttled_today").alias("host_throttled"),
    ).collect()  # one row per (day and) class
    out: dict = {}
    for r in rows:
        fig = out.setdefault(r[day_col] if day_col else None, no_host_figures())
        fig["hosts_by_class"][r["validator_class"]] = int(r["n"])
        fig["hosts_known"] += int(r["n"])
        for c in HOST_FIGURES:
            fig[c] += int(r[c] or 0)
    return out


def _audit_figures(cfg: Config, n: int, fresh: int) -> dict:
    """Achieved freshness on the audit sample with its Wilson interval."""
    p, lo, hi = observations.wilson_interval(fresh, n, cfg.audit.level)
    none = n == 0  # JSON has no NaN: report "no audit today" as null
    return {"audit_n": n, "audit_fresh": fresh, "audit_freshness": None if none else p,
            "audit_freshness_lo": None if none else lo, "audit_freshness_hi": None if none else hi}


def main(argv=None) -> int:
    return stage_main(run, __doc__, argv, flags={
        "--bootstrap": "first date of a deployment: start from no state (refused when the "
                       "previous day's state is committed)",
        "--no-fetches": "the fleet did not fetch on D (an outage): declare it "
                        "(fetch_logs/dt=D/_NO_FETCHES.json) and carry D-1's state and hosts "
                        "forward unchanged, without Spark (docs/operations.md)"})


if __name__ == "__main__":
    sys.exit(main())
