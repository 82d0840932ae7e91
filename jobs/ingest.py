"""Reading inputs at the boundary: footer checks, row validation, quarantine.

A file that breaks its contract fails the run with a SchemaError naming the file and
column. A row that breaks a rule goes to ``quarantine/dt=D/source=<table>/`` with its
reason, and is counted in metrics; nothing is dropped silently.
"""
from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from typing import Optional

from jobs import partitions, schemas, storage
from jobs.errors import MixedFingerprintVersions  # noqa: F401  (its home: jobs.errors)
from jobs.config import Config
from jobs.core import hosts, state_update
from jobs.paths import day_bounds, quarantine_path


#: No input time (fetched_at, signaled_at) is older: a time before Unix time 0 is a
#: zero-value date (Go's 0001-01-01, a parser's default), never a fetch or a web page's
#: change, and before 1677-09-21 no timestamp of the fold can hold it (Arrow refuses it as
#: datetime64[ns]: a 0001 signal or fetch crashed update_state).
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)


def lateness_horizon(cfg: Config, run_date: str) -> datetime:
    """Oldest fetched_at a run accepts: ``ingest.max_lateness_days`` before D 00:00 UTC, and
    never before :data:`EARLIEST_TIME` (also when the lateness is unbounded).

    Older rows are not late arrivals but a broken clock (a 1970 fetch once rewound a URL's
    history and cut its rate ~4,900-fold).
    """
    start, _ = day_bounds(run_date)
    try:
        return max(start - timedelta(days=cfg.ingest.max_lateness_days), EARLIEST_TIME)
    except OverflowError:
        return EARLIEST_TIME


# A fetch-log file without the column, or a null in it, was written before the column
# existed, when version 1 was the only fingerprint version (docs/fingerprint.md).
LEGACY_FINGERPRINT_VERSION = state_update.LEGACY_FINGERPRINT_VERSION


def fingerprint_versions(footer: schemas.Footer) -> set[int]:
    """The fingerprint versions in one fetch-log file: from its row-group statistics when
    every row group has them, else from its ``fingerprint_version`` column alone."""
    name = "fingerprint_version"
    idx = footer.schema.get_field_index(name)
    if idx < 0 or footer.num_rows == 0:
        return {LEGACY_FINGERPRINT_VERSION} if footer.num_rows else set()
    meta, found = footer.metadata, set()
    leaf = meta.schema.names.index(name) if meta is not None and name in meta.schema.names else -1
    for g in range(meta.num_row_groups if leaf >= 0 else 0):
        column = meta.row_group(g).column(leaf)
        stats = column.statistics
        if stats is None or not stats.has_null_count or (
                stats.null_count < column.num_values and not stats.has_min_max):
            break
        if stats.null_count:
            found.add(LEGACY_FINGERPRINT_VERSION)
        if stats.has_min_max:
            found.update({int(stats.min), int(stats.max)})
    else:
        if leaf >= 0:
            return found
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    fs = storage.filesystem_for(footer.path)
    path = footer.path.split("://", 1)[1] if "://" in footer.path else footer.path
    values = pq.read_table(path, columns=[name], filesystem=fs)[name]
    found = {int(v) for v in pc.unique(values.drop_null()).to_pylist()}
    return found | ({LEGACY_FINGERPRINT_VERSION} if values.null_count else set())


def check_fingerprint_versions(uri: str, footers: list[schemas.Footer]) -> int | None:
    """The files' one fingerprint version (None: no rows), or MixedFingerprintVersions: a
    producer's check of its own output (a fetch-log day may mix versions: each fetch is
    compared with the stored hash of its own version, jobs.core.state_update)."""
    versions: dict[int, list[str]] = {}
    for footer in footers:
        found = fingerprint_versions(footer)
        for version in found:
            versions.setdefault(version, []).append(footer.path)
        if len(versions) > 1 or len(found) > 1:
            raise MixedFingerprintVersions(uri, versions)
    return next(iter(versions), None)


def checked_footers(contract: schemas.Contract, uri: str, required: bool) -> list[schemas.Footer]:
    """Every file of ``uri`` checked against ``contract``; a required partition must hold
    at least one row (a lone 0-row file is an empty partition, not an empty day). Of a
    fetch-log day, the files readers take (:func:`jobs.partitions.visible_files`)."""
    files = (partitions.visible_files(uri) if contract is schemas.FETCH_LOG
             else storage.list_parquet_files(uri))
    if not files and required:
        hint = ("; a day the fleet did not fetch is declared with `recrawl update-state "
                "--date D --no-fetches` (docs/operations.md)" if contract is schemas.FETCH_LOG
                else "")
        raise schemas.SchemaError(contract.name, uri, None, f"no Parquet files found{hint}")
    footers = schemas.check_files(contract, files)
    if required and sum(f.num_rows for f in footers) == 0:
        raise schemas.SchemaError(contract.name, uri, None,
                                  f"empty partition (0 rows in {len(footers)} file(s))")
    return footers


def checked_files(contract: schemas.Contract, uri: str, required: bool) -> list[str]:
    return [f.path for f in checked_footers(contract, uri, required)]


def _physical_key(contract: schemas.Contract, schema) -> tuple:
    """The contract columns a file has, with their physical types: files that agree on
    it can share one Spark read (Spark fails on mismatched widths within one read)."""
    return tuple((c.name, str(schema.field(c.name).type)) for c in contract.columns
                 if schema.get_field_index(c.name) >= 0)


def _contract_columns(df, contract: schemas.Contract) -> list:
    """``df``'s columns cast to the contract's types, in contract order; optional ones null."""
    from pyspark.sql import functions as F

    cols = []
    for col in contract.columns:
        spark_type = schemas._SPARK[col.kind]
        if col.name in df.columns:
            cols.append(F.col(col.name).cast(spark_type).alias(col.name))
        else:
            cols.append(F.lit(None).cast(spark_type).alias(col.name))
    return cols


def project(df, contract: schemas.Contract):
    """``df`` cast to the contract's types, columns in contract order; optional ones null."""
    return df.select(*_contract_columns(df, contract))


def _read(spark, contract: schemas.Contract, footers: list[schemas.Footer]):
    """Read the files cast to the contract: one Spark read per group of files with the same
    physical schema (one read in the usual case where all agree), unioned by name."""
    groups: dict[tuple, list[str]] = {}
    for f in footers:
        groups.setdefault(_physical_key(contract, f.schema), []).append(f.path)
    frames = [project(spark.read.parquet(*paths), contract) for paths in groups.values()]
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _read_days(spark, contract: schemas.Contract, table_root: str,
               footers_by_day: dict[str, list[schemas.Footer]]):
    """Several days' files of one table as one frame (one Spark read per physical schema,
    not one per day), cast to the contract, with each row's day in ``dt`` (the file's
    ``dt=`` directory, by Spark's partition discovery under ``table_root``)."""
    from pyspark.sql import functions as F

    groups: dict[tuple, list[str]] = {}
    for footers in footers_by_day.values():
        for f in footers:
            groups.setdefault(_physical_key(contract, f.schema), []).append(f.path)
    frames = []
    for paths in groups.values():
        raw = spark.read.option("basePath", table_root).parquet(*paths)
        frames.append(raw.select(*_contract_columns(raw, contract),
                                 F.date_format(F.col("dt"), "yyyy-MM-dd").alias("dt")))
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _by_day(values: dict):
    """A literal per day, looked up by each row's ``dt``: the daily rules' bounds (python
    datetimes, computed as for one day) for rows of many days."""
    from pyspark.sql import functions as F

    pairs = [x for day, v in values.items() for x in (F.lit(day), F.lit(v))]
    return F.element_at(F.create_map(*pairs), F.col("dt"))


def _split(df, reason_expr, source: str, cols: Optional[list[str]] = None, keep=()):
    """(clean, bad): rows whose reason is null, and the others as quarantine rows whose
    row_json holds ``cols`` (default: every column) as read; ``keep`` columns (e.g. ``dt``)
    stay beside them."""
    from pyspark.sql import functions as F

    cols = cols or df.columns
    tagged = df.withColumn("_reason", reason_expr)
    clean = tagged.filter(F.col("_reason").isNull()).drop("_reason")
    bad = tagged.filter(F.col("_reason").isNotNull()).select(
        F.lit(source).alias("source"), F.col("_reason").alias("reason"),
        F.col("url").cast("string").alias("url"),
        F.to_json(F.struct(*[F.col(c) for c in cols])).alias("row_json"), *keep)
    return clean, bad


def with_normalized_host(df, col, name: str):
    """``df`` plus ``name``, the Spark twin of jobs.core.hosts.normalize_host of ``col`` (a
    test checks they agree): trim, lowercase, strip one trailing dot, IDNA via
    java.net.IDN, then the host syntax.

    Each step is its own column: as one nested expression every step repeats inside the
    next (27 copies of the trim regex per row), and ``try_reflect`` is non-deterministic,
    so Spark cannot share them; the fetch-log checks cost seconds per 300k rows that way.
    """
    from pyspark.sql import functions as F

    trimmed = F.regexp_replace(col, rf"^{hosts.TRIM_CLASS}+|{hosts.TRIM_CLASS}+\z", "")
    df = df.withColumn("_nh_low", F.regexp_replace(F.lower(trimmed), r"\.\z", ""))
    low = F.col("_nh_low")
    df = df.withColumn("_nh_ace", F.when(low.rlike(r"[^\x00-\x7F]"), F.call_function(
        "try_reflect", F.lit("java.net.IDN"), F.lit("toASCII"), low)).otherwise(low))
    ace = F.col("_nh_ace")
    ok = (F.length(ace) <= hosts.MAX_HOST_LENGTH) & ace.rlike(rf"^(?:{hosts.HOST_SYNTAX})\z")
    return df.withColumn(name, F.when(ok, ace)).drop("_nh_low", "_nh_ace")


def with_url_checks(df, cfg: Config):
    """Add ``_host`` (the URL's normalised host) and ``_url_reason`` (the reason of
    jobs.core.hosts.url_problem, null when valid): the one URL rule of every input."""
    from pyspark.sql import functions as F

    url = F.col("url")
    scheme = F.lower(F.regexp_extract(url, hosts.SCHEME, 1))
    df = df.withColumn("_authority", F.regexp_extract(url, hosts.AUTHORITY, 1))
    authority = F.col("_authority")
    host_port = F.substring_index(authority, "@", -1)
    raw = F.regexp_extract(host_port, rf"^(?:{hosts.HOST_PORT})\z", 1)
    df = with_normalized_host(df, raw, "_host")
    reason = (F.when(url.isNull(), "null_url")
              .when(F.length(url) > F.lit(cfg.ingest.max_url_length), "url_too_long")
              .when(~scheme.isin(*hosts.HTTP_SCHEMES) | url.rlike(hosts.BAD_URL_CHARS)
                    | F.col("_host").isNull(), "bad_url")
              .when(authority.contains("@"), "url_userinfo"))
    return df.withColumn("_url_reason", reason).drop("_authority")


def _clean_host(clean):
    """The clean rows with ``host`` = the URL's normalised host and ``url`` in its canonical
    form (jobs.core.urls; the quarantine keeps rows as received), helper columns dropped."""
    from jobs.canonical import with_canonical_url

    return with_canonical_url(clean.withColumn("host", clean["_host"]).drop("_host",
                                                                           "_url_reason"))


def _bad_importance(col: str, nullable: bool):
    """NaN, +-inf or negative (and null unless ``nullable``): +inf once gave a priority of
    4.8e307 and took its host's whole share."""
    from pyspark.sql import functions as F

    c = F.col(col)
    bad = F.isnan(c) | (c < 0) | (c == F.lit(float("inf")))
    return (c.isNull() | bad) if not nullable else bad


def read_fetch_logs(spark, cfg: Config, run_date: str, cached: list | None = None):
    """Today's fetch logs as (clean, quarantined) DataFrames.

    With ``cached`` (a list), the checked rows are persisted and appended to it for the
    caller to unpersist: clean and quarantined rows then come from one read and one
    evaluation of the URL rules.

    ``host`` is always the URL's normalised host; a row whose own host column names
    another host is quarantined (``host_mismatch``) rather than filed under either.
    Rows older than yesterday's last fetch of their URL need the previous state: the fold
    finds them, :func:`split_stale_rows` quarantines them.
    """
    from pyspark.sql import functions as F

    footers = checked_footers(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", run_date), True)
    df = _read(spark, schemas.FETCH_LOG, footers)
    _, day_end = day_bounds(run_date)
    return _checked_logs(cfg, df, F.lit(day_end), F.lit(lateness_horizon(cfg, run_date)), cached)


def read_fetch_logs_days(spark, cfg: Config, days: list[str], cached: list | None = None):
    """The fetch logs of every day of ``days`` in one read, as (clean, quarantined, rows
    per day), each row with its day in ``dt``: :func:`read_fetch_logs`' rules with each
    row's own day bounds (``rebuild_state``: a read per day costs a Spark job and a plan
    branch per day)."""
    footers = {d: checked_footers(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", d), True)
               for d in days}
    df = _read_days(spark, schemas.FETCH_LOG, cfg.paths.table("fetch_logs"), footers)
    horizon = _by_day({d: lateness_horizon(cfg, d) for d in days})
    clean, bad = _checked_logs(cfg, df, _by_day({d: day_bounds(d)[1] for d in days}), horizon,
                               cached, keep=("dt",))
    return clean, bad, {d: sum(f.num_rows for f in footers[d]) for d in days}


def _checked_logs(cfg: Config, df, day_end, horizon, cached, keep=()):
    """(clean, quarantined) fetch-log rows: the rules of a day's logs, with the day's end
    and lateness horizon given as columns."""
    from pyspark.sql import functions as F

    cols = [c for c in df.columns if c not in keep]
    df = with_normalized_host(with_url_checks(df, cfg), F.col("host"), "_given_host")
    given = F.col("host")
    at = F.col("fetched_at")
    reason = (F.when(F.col("_url_reason").isNotNull(), F.col("_url_reason"))
              .when(given.isNotNull() & F.coalesce(F.col("_given_host") != F.col("_host"),
                                                   F.lit(True)), "host_mismatch")
              .when(at.isNull(), "null_fetched_at")
              .when(at >= day_end, "future_fetched_at")
              .when(at < horizon, "late_fetched_at")
              .when(F.col("status").isNull() | ~((F.col("status") == 0)
                    | F.col("status").between(100, 599)), "bad_status")
              .when(F.col("bytes").isNull() | (F.col("bytes") < 0), "negative_bytes"))
    if cached is not None:
        df = df.withColumn("_reason_checked", reason).persist()
        cached.append(df)
        reason = F.col("_reason_checked")
    clean, bad = _split(df, reason, "fetch_logs", cols, keep)
    # Each fetch's fingerprint version goes to the fold (null: the legacy version).
    clean = clean.withColumn("fingerprint_version", F.coalesce(
        F.col("fingerprint_version"), F.lit(LEGACY_FINGERPRINT_VERSION)).cast("int"))
    return _clean_host(clean.drop("_reason_checked", "_given_host")), bad


def split_stale_rows(logs, stale, columns: list[str], keys=("url",)):
    """(clean, quarantined) fetch-log rows, given ``stale``: ``keys`` and ``_prev_fetch_at``
    (the URL's last fetch of the day before) of the URLs that have stale rows, as the fold
    found them (jobs.core.replay.split_stale, the rule's one home). Their rows older than
    ``_prev_fetch_at`` are quarantined (``stale_fetched_at``, ``columns`` in row_json): the
    fold left them out, since folding them would rewind last_fetch_at and last_known_at.

    ``stale`` is small on any normal day (late re-deliveries); the caller broadcasts it when
    it knows so. The clean rows keep ``logs``' columns."""
    from pyspark.sql import functions as F

    joined = logs.join(stale, list(keys), "left")
    reason = F.when(F.col("fetched_at") < F.col("_prev_fetch_at"), "stale_fetched_at")
    clean, bad = _split(joined, reason, "fetch_logs", columns, keep=[k for k in keys
                                                                     if k != "url"])
    return clean.select(*logs.columns), bad


def snapshot_footers(cfg: Config, contract: schemas.Contract, run_date: str):
    """The checked files of the table's snapshot as of ``run_date`` (:mod:`jobs.snapshots`:
    one version, never the whole prefix), or [] when the table is absent."""
    from jobs import snapshots

    snap = snapshots.find(cfg, contract.name, run_date)
    return schemas.check_files(contract, list(snap.files)) if snap is not None else []


def read_importance(spark, cfg: Config, run_date: str):
    """The importance snapshot as of ``run_date`` (:mod:`jobs.snapshots`) as (clean rows,
    quarantined rows), or (None, None) without one.

    A URL may have more than one clean row within the snapshot: its weight is the largest
    (:func:`importance_by_url`, and the fold's pandas twin
    jobs.core.state_update.importance_by_url). update_state hands the rows to its fold as
    they are (an aggregate here would shuffle all of them once more every day)."""
    from pyspark.sql import functions as F

    footers = snapshot_footers(cfg, schemas.IMPORTANCE, run_date)
    if not footers:
        return None, None
    df = _read(spark, schemas.IMPORTANCE, footers)
    reason = (F.when(F.col("url").isNull(), "null_url")
              .when(_bad_importance("importance", nullable=False), "bad_importance"))
    clean, bad = _split(df, reason, "importance")
    from jobs.canonical import canonical_url_col  # importance names pages in canonical form

    url = F.coalesce(canonical_url_col("url"), F.col("url")).alias("url")
    return clean.select(url, F.col("importance").cast("double")), bad


def importance_by_url(clean):
    """One weight per URL: duplicates resolve to the largest, deterministically."""
    from pyspark.sql import functions as F

    return clean.groupBy("url").agg(F.max("importance").alias("importance"))


def _host_policy_rows(spark, cfg: Config, run_date: str):
    """host_policy rows of the snapshot as of ``run_date`` as (valid with normalised host,
    quarantined), delays not yet bounded.

    Rules: ``null_host``; ``bad_host`` (not a host name once normalised); ``bad_crawl_delay``
    (null, NaN, inf or <= 0); ``bad_max_fetches`` (< 0).
    """
    from pyspark.sql import functions as F

    footers = snapshot_footers(cfg, schemas.HOST_POLICY, run_date)
    if not footers:
        return None, None
    df = _read(spark, schemas.HOST_POLICY, footers).withColumn("url", F.lit(None).cast("string"))
    cols = df.columns
    df = with_normalized_host(df, F.col("host"), "_host")
    delay = F.col("crawl_delay_s")
    reason = (F.when(F.col("host").isNull(), "null_host")
              .when(F.col("_host").isNull(), "bad_host")
              .when(delay.isNull() | F.isnan(delay) | (delay <= 0)
                    | (delay == F.lit(float("inf"))), "bad_crawl_delay")
              .when(F.col("max_fetches_per_day") < 0, "bad_max_fetches"))
    clean, bad = _split(df, reason, "host_policy", cols)
    return clean.withColumn("host", F.col("_host")).drop("_host", "url"), bad


def read_host_policy(spark, cfg: Config, run_date: str):
    """Valid host policy of the snapshot as of ``run_date`` (:mod:`jobs.snapshots`), one row
    per normalised host, and the quarantined rows.

    Finite delays outside ``[politeness.min_crawl_delay_s, max_crawl_delay_s]`` are clamped
    (a 1e-12 delay overflowed the host cap; 1e9 silently planned nothing): the host keeps a
    usable, polite delay. :func:`crawl_delay_figures` counts them for the run record.
    Duplicate hosts within the snapshot (also after normalising) keep the largest delay and
    the smallest cap.
    """
    from pyspark.sql import functions as F

    clean, bad = _host_policy_rows(spark, cfg, run_date)
    if clean is None:
        return None, None
    pol = cfg.politeness
    bounded = F.least(F.greatest("crawl_delay_s", F.lit(pol.min_crawl_delay_s)),
                      F.lit(pol.max_crawl_delay_s))
    clean = clean.withColumn("crawl_delay_s", bounded).groupBy("host").agg(
        F.max("crawl_delay_s").alias("crawl_delay_s"),
        F.min("max_fetches_per_day").alias("max_fetches_per_day"))
    return clean, bad


def read_host_policy_days(spark, cfg: Config, days: list[str]):
    """Each day's host policy (:func:`read_host_policy` as of that day), one row per host and
    day with the day in ``dt``; None when no day has a host_policy table. Each distinct
    snapshot is read once (``rebuild_state``: the politeness of each replayed day is the one
    its daily run read)."""
    from pyspark.sql import functions as F

    from jobs import snapshots

    by_path: dict[str, list[str]] = {}
    for d in days:
        snap = snapshots.find(cfg, "host_policy", d)
        if snap is not None:
            by_path.setdefault(snap.path, []).append(d)
    frames = []
    for dated in by_path.values():
        clean, _ = read_host_policy(spark, cfg, dated[0])
        frames.append(clean.crossJoin(F.broadcast(
            spark.createDataFrame([(d,) for d in dated], "dt string"))))
    return functools.reduce(lambda a, b: a.unionByName(b), frames) if frames else None


def with_politeness(cfg: Config, frame, policy, keys=("host",)):
    """``frame`` (with ``host``) with its host's ``crawl_delay_s`` and ``max_fetches_per_day``
    from ``policy`` (:func:`read_host_policy`'s clean rows, or None), and the
    ``[politeness]`` defaults for hosts it does not list: what allocate caps a host by, and
    what update_state judges its served-rate limit against. ``keys``: the join columns
    (``("host", "dt")`` with :func:`read_host_policy_days`)."""
    from pyspark.sql import functions as F

    pol = cfg.politeness
    if policy is not None:
        frame = frame.join(policy, list(keys), "left")
    else:
        frame = (frame.withColumn("crawl_delay_s", F.lit(None).cast("double"))
                 .withColumn("max_fetches_per_day", F.lit(None).cast("long")))
    return (frame.withColumn("crawl_delay_s",
                             F.coalesce("crawl_delay_s", F.lit(pol.default_crawl_delay_s)))
            .withColumn("max_fetches_per_day",
                        F.coalesce("max_fetches_per_day",
                                   F.lit(pol.default_max_fetches_per_day).cast("long"))))


def crawl_delay_figures(spark, cfg: Config, run_date: str) -> dict:
    """Hosts whose host_policy delay was raised to the minimum or lowered to the maximum."""
    from pyspark.sql import functions as F

    clean, _ = _host_policy_rows(spark, cfg, run_date)
    if clean is None:
        return {"crawl_delay_raised": 0, "crawl_delay_lowered": 0}
    pol, delay = cfg.politeness, F.col("crawl_delay_s")
    row = clean.agg(
        F.count_distinct(F.when(delay < pol.min_crawl_delay_s, F.col("host"))).alias("raised"),
        F.count_distinct(F.when(delay > pol.max_crawl_delay_s, F.col("host"))).alias("lowered"),
    ).first()
    return {"crawl_delay_raised": int(row["raised"]), "crawl_delay_lowered": int(row["lowered"])}


def read_frontier(spark, cfg: Config, run_date: str):
    """Today's frontier as (clean, quarantined): the URL rule, and ``bad_importance`` for a
    NaN, infinite or negative importance (null is fine: the host prior fills it)."""
    from pyspark.sql import functions as F

    footers = checked_footers(schemas.FRONTIER, cfg.paths.table("frontier", run_date), False)
    if not footers:
        return None, None
    df = _read(spark, schemas.FRONTIER, footers)
    cols = df.columns
    df = with_url_checks(df, cfg)
    reason = (F.when(F.col("_url_reason").isNotNull(), F.col("_url_reason"))
              .when(_bad_importance("importance", nullable=True), "bad_importance"))
    clean, bad = _split(df, reason, "frontier", cols)
    return _clean_host(clean), bad


SIGNAL_SOURCES = ("sitemap", "feed", "websub", "indexnow")


def read_signals(spark, cfg: Config, run_date: str):
    """Today's push signals as (clean, quarantined), or (None, None) without a partition.

    Rules: the URL rule (``null_url``, ``url_too_long``, ``bad_url``, ``url_userinfo``);
    ``null_signaled_at``; ``future_signaled_at`` (at or after D+1 00:00 UTC: a claim about
    the future is not a change); ``bad_signaled_at`` (before :data:`EARLIEST_TIME`);
    ``bad_source`` (not one of ``SIGNAL_SOURCES``). ``host`` is the URL's normalised host.
    """
    from pyspark.sql import functions as F

    footers = checked_footers(schemas.SIGNALS, cfg.paths.table("signals", run_date), False)
    if not footers:
        return None, None
    df = _read(spark, schemas.SIGNALS, footers)
    _, day_end = day_bounds(run_date)
    return _checked_signals(cfg, df, F.lit(day_end))


def read_signals_days(spark, cfg: Config, days: list[str]):
    """The push signals of ``days`` in one read, as (clean, quarantined, the days with a
    signals partition), each row with its day in ``dt``; (None, None, []) when no day has
    one. :func:`read_signals`' rules with each row's own day bounds."""
    footers = {d: checked_footers(schemas.SIGNALS, cfg.paths.table("signals", d), False)
               for d in days}
    footers = {d: f for d, f in footers.items() if f}
    if not footers:
        return None, None, []
    df = _read_days(spark, schemas.SIGNALS, cfg.paths.table("signals"), footers)
    clean, bad = _checked_signals(cfg, df, _by_day({d: day_bounds(d)[1] for d in footers}),
                                  keep=("dt",))
    return clean, bad, list(footers)


def _checked_signals(cfg: Config, df, day_end, keep=()):
    """(clean, quarantined) push-signal rows, the day's end given as a column."""
    from pyspark.sql import functions as F

    cols = [c for c in df.columns if c not in keep]
    df = with_url_checks(df, cfg)
    reason = (F.when(F.col("_url_reason").isNotNull(), F.col("_url_reason"))
              .when(F.col("signaled_at").isNull(), "null_signaled_at")
              .when(F.col("signaled_at") >= day_end, "future_signaled_at")
              .when(F.col("signaled_at") < F.lit(EARLIEST_TIME), "bad_signaled_at")
              .when(F.col("source").isNull() | ~F.lower("source").isin(*SIGNAL_SOURCES),
                    "bad_source"))
    clean, bad = _split(df, reason, "signals", cols, keep)
    return _clean_host(clean), bad


def write_quarantine(cfg: Config, run_date: str, source: str, bad) -> int:
    """Write ``bad`` rows for one source table (replacing that source's rows) and count them."""
    path = quarantine_path(cfg, run_date, source)
    if bad is None:
        return 0
    bad = bad.drop("source").cache()
    count = bad.count()
    bad.coalesce(1).write.mode("overwrite").parquet(path)
    bad.unpersist()
    return count
