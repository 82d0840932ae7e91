"""Reading inputs at the boundary: footer checks, row validation, quarantine.

A file that breaks its contract fails the run with a SchemaError naming the file and
column. A row that breaks a rule goes to ``quarantine/dt=D/source=<table>/`` with its
reason, and is counted in metrics; nothing is dropped silently.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from jobs import schemas, storage
from jobs.config import Config


def day_bounds(run_date: str):
    d = date.fromisoformat(run_date)
    start = datetime(d.year, d.month, d.day, tzinfo=timezone.utc)
    return start, start + timedelta(days=1)


def checked_files(contract: schemas.Contract, uri: str, required: bool) -> list[str]:
    files = storage.list_parquet_files(uri)
    if not files and required:
        raise schemas.SchemaError(contract.name, uri, None, "no Parquet files found")
    schemas.check_files(contract, files)
    return files


def _read(spark, contract: schemas.Contract, files: list[str]):
    """Read ``files`` projecting the contract's columns; optional ones become null."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(*files)
    cols = []
    for col in contract.columns:
        spark_type = schemas._SPARK[col.kind]
        if col.name in df.columns:
            cols.append(F.col(col.name).cast(spark_type).alias(col.name))
        else:
            cols.append(F.lit(None).cast(spark_type).alias(col.name))
    return df.select(*cols)


def _split(df, reason_expr, source: str):
    from pyspark.sql import functions as F

    tagged = df.withColumn("_reason", reason_expr)
    clean = tagged.filter(F.col("_reason").isNull()).drop("_reason")
    bad = tagged.filter(F.col("_reason").isNotNull()).select(
        F.lit(source).alias("source"), F.col("_reason").alias("reason"),
        F.col("url").cast("string").alias("url"),
        F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("row_json"))
    return clean, bad


def read_fetch_logs(spark, cfg: Config, run_date: str):
    """Today's fetch logs as (clean, quarantined) DataFrames."""
    from pyspark.sql import functions as F

    files = checked_files(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", run_date), True)
    df = _read(spark, schemas.FETCH_LOG, files)
    _, day_end = day_bounds(run_date)
    proto = F.expr("lower(try_parse_url(url, 'PROTOCOL'))")
    parsed_host = F.expr("lower(try_parse_url(url, 'HOST'))")
    df = df.withColumn("host", F.coalesce(F.lower(F.col("host")), parsed_host))
    reason = (F.when(F.col("url").isNull(), "null_url")
              .when(~proto.isin("http", "https") | proto.isNull() | parsed_host.isNull()
                    | (parsed_host == ""), "bad_url")
              .when(F.col("fetched_at").isNull(), "null_fetched_at")
              .when(F.col("fetched_at") >= F.lit(day_end), "future_fetched_at")
              .when(F.col("status").isNull() | ~((F.col("status") == 0)
                    | F.col("status").between(100, 599)), "bad_status")
              .when(F.col("bytes").isNull() | (F.col("bytes") < 0), "negative_bytes"))
    return _split(df, reason, "fetch_logs")


def read_importance(spark, cfg: Config):
    from pyspark.sql import functions as F

    files = checked_files(schemas.IMPORTANCE, cfg.paths.table("importance"), False)
    if not files:
        return None, None
    df = _read(spark, schemas.IMPORTANCE, files)
    reason = (F.when(F.col("url").isNull(), "null_url")
              .when(F.col("importance").isNull() | F.isnan("importance")
                    | (F.col("importance") < 0), "bad_importance"))
    clean, bad = _split(df, reason, "importance")
    # One weight per URL: duplicates resolve to the largest, deterministically.
    return clean.groupBy("url").agg(F.max("importance").alias("importance")), bad


def read_host_policy(spark, cfg: Config):
    from pyspark.sql import functions as F

    files = checked_files(schemas.HOST_POLICY, cfg.paths.table("host_policy"), False)
    if not files:
        return None, None
    df = _read(spark, schemas.HOST_POLICY, files).withColumn("url", F.lit(None).cast("string"))
    reason = (F.when(F.col("host").isNull(), "null_host")
              .when(F.col("crawl_delay_s").isNull() | F.isnan("crawl_delay_s")
                    | (F.col("crawl_delay_s") <= 0), "bad_crawl_delay")
              .when(F.col("max_fetches_per_day") < 0, "bad_max_fetches"))
    clean, bad = _split(df, reason, "host_policy")
    clean = clean.withColumn("host", F.lower("host")).groupBy("host").agg(
        F.max("crawl_delay_s").alias("crawl_delay_s"),
        F.min("max_fetches_per_day").alias("max_fetches_per_day"))
    return clean, bad


def read_frontier(spark, cfg: Config, run_date: str):
    from pyspark.sql import functions as F

    files = checked_files(schemas.FRONTIER, cfg.paths.table("frontier", run_date), False)
    if not files:
        return None, None
    df = _read(spark, schemas.FRONTIER, files)
    parsed_host = F.expr("lower(try_parse_url(url, 'HOST'))")
    proto = F.expr("lower(try_parse_url(url, 'PROTOCOL'))")
    df = df.withColumn("host", parsed_host)
    reason = (F.when(F.col("url").isNull(), "null_url")
              .when(~proto.isin("http", "https") | proto.isNull() | F.col("host").isNull(),
                    "bad_url")
              .when(F.col("importance") < 0, "bad_importance"))
    return _split(df, reason, "frontier")


SIGNAL_SOURCES = ("sitemap", "feed", "websub", "indexnow")


def read_signals(spark, cfg: Config, run_date: str):
    """Today's push signals as (clean, quarantined), or (None, None) without a partition.

    Rules: ``null_url``; ``bad_url`` (not http(s) or no host); ``null_signaled_at``;
    ``future_signaled_at`` (at or after D+1 00:00 UTC: a claim about the future is not a
    change); ``bad_source`` (not one of ``SIGNAL_SOURCES``). ``host`` is derived from the URL.
    """
    from pyspark.sql import functions as F

    files = checked_files(schemas.SIGNALS, cfg.paths.table("signals", run_date), False)
    if not files:
        return None, None
    df = _read(spark, schemas.SIGNALS, files)
    _, day_end = day_bounds(run_date)
    parsed_host = F.expr("lower(try_parse_url(url, 'HOST'))")
    proto = F.expr("lower(try_parse_url(url, 'PROTOCOL'))")
    df = df.withColumn("host", parsed_host)
    reason = (F.when(F.col("url").isNull(), "null_url")
              .when(~proto.isin("http", "https") | proto.isNull() | F.col("host").isNull()
                    | (F.col("host") == ""), "bad_url")
              .when(F.col("signaled_at").isNull(), "null_signaled_at")
              .when(F.col("signaled_at") >= F.lit(day_end), "future_signaled_at")
              .when(F.col("source").isNull() | ~F.lower("source").isin(*SIGNAL_SOURCES),
                    "bad_source"))
    return _split(df, reason, "signals")


def write_quarantine(cfg: Config, run_date: str, source: str, bad) -> int:
    """Write ``bad`` rows for one source table (replacing that source's rows) and count them."""
    path = f"{cfg.paths.table('quarantine', run_date)}/source={source}"
    if bad is None:
        return 0
    bad = bad.drop("source").cache()
    count = bad.count()
    bad.coalesce(1).write.mode("overwrite").parquet(path)
    bad.unpersist()
    return count
