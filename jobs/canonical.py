"""Canonical URLs in Spark: the twin of :func:`jobs.core.urls.canonical_url`, and the one-time
migration of a state partition written before URLs were canonical.

The twin is the pure function itself through a pandas UDF (Arrow batches of the column, one
Python call per batch), so both engines apply one rule; a test compares them on generated
URLs. ``jobs.ingest`` applies it to every clean row of fetch_logs, frontier and signals, and
to importance; the overrides, ``recrawl explain`` and the WARC/CDX import call the pure
function.

``recrawl canonicalize-state --date D`` rewrites the committed ``state/dt=D`` with canonical
URLs; the rows of one page under several spellings merge by the rule of
:func:`jobs.core.urls.merge_spellings` (docs/contract.md, "Canonical URLs"). Run it once,
on the last state partition, before the first run of the release that canonicalises
(docs/operations.md); it is idempotent (a state already canonical is rewritten unchanged).
"""
from __future__ import annotations

import inspect
import sys

import pandas as pd

from jobs import partitions
from jobs.config import Config, add_config_args, config_from_args
from jobs.core.urls import canonical_url, merge_spellings


def canonical_series(urls: pd.Series) -> pd.Series:
    """:func:`canonical_url` of every value of a pandas Series (None stays None)."""
    return pd.Series([canonical_url(u) for u in urls], index=urls.index, dtype=object)


def canonical_url_col(col):
    """A Spark column: ``canonical_url`` of ``col`` (a string column or its name); null where
    the URL has no canonical form (callers apply it to rows the URL rule passed)."""
    from pyspark.sql import functions as F

    udf = F.pandas_udf(canonical_series, "string")
    return udf(F.col(col) if isinstance(col, str) else col)


def with_canonical_url(df, col: str = "url"):
    """``df`` with ``col`` replaced by its canonical form (the original where it has none:
    those rows were quarantined by the URL rule already)."""
    from pyspark.sql import functions as F

    return df.withColumn(col, F.coalesce(canonical_url_col(col), F.col(col)))


def canonicalize_state(spark, cfg: Config, run_date: str) -> dict:
    """Rewrite the committed ``state/dt=run_date`` with canonical URLs, merging the rows of
    one page; returns the run record (rows before and after, URLs rewritten, pages merged)."""
    from pyspark.sql import functions as F

    path = cfg.paths.table("state", run_date)
    files = partitions.committed_files(path, "state")
    df = spark.read.parquet(*files)
    columns = df.columns
    df = df.withColumn("_canonical", F.coalesce(canonical_url_col("url"), F.col("url")))
    counts = df.groupBy("_canonical").agg(F.count(F.lit(1)).alias("_n"))
    df = df.join(counts, "_canonical").cache()
    figures = df.agg(F.count(F.lit(1)).alias("rows"),
                     F.sum((F.col("url") != F.col("_canonical")).cast("long")).alias("rewritten"),
                     F.sum((F.col("_n") > 1).cast("long")).alias("in_groups"),
                     F.count_distinct(F.when(F.col("_n") > 1, F.col("_canonical")))
                     .alias("merged_pages")).first()
    single = df.filter(F.col("_n") == 1).withColumn("url", F.col("_canonical")).select(*columns)
    schema = df.select(*columns).schema
    merged = (df.filter(F.col("_n") > 1).drop("_n").groupBy("_canonical")
              .applyInPandas(lambda g: merge_spellings(g)[columns], schema))
    out = single.unionByName(merged)
    marker = partitions.write_committed(out.coalesce(max(1, len(files))), path, "state")
    df.unpersist()
    return {"date": run_date, "rows_before": int(figures["rows"]), "rows_after": marker["rows"],
            "urls_rewritten": int(figures["rewritten"] or 0),
            "rows_merged": int(figures["in_groups"] or 0),
            "pages_merged": int(figures["merged_pages"] or 0)}


def main(argv=None) -> int:
    """Rewrite state/dt=D with canonical URLs, merging the rows of one page (run once).

    Rows whose URLs are spellings of one canonical URL (host case, trailing dot, default
    port, empty path, fragment, percent-encoding: jobs/core/urls.py) become one row: the one
    with the latest last_success_at, with the earliest first_seen, the fetch and error
    counts summed and the largest importance (docs/contract.md, "Canonical URLs").
    """
    import json

    from jobs.cli import Parser, add_date_arg
    from jobs.spark_session import get_spark

    summary, _, details = inspect.getdoc(main).partition("\n")
    parser = Parser(description=summary, epilog=details.strip())
    add_date_arg(parser)
    add_config_args(parser)
    args = parser.parse_args(argv)
    cfg = config_from_args(args)
    partitions.committed_files(cfg.paths.table("state", args.date), "state")  # before Spark
    record = canonicalize_state(get_spark(cfg, "canonicalize_state"), cfg, args.date)
    print(json.dumps(record, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    from jobs.cli import guarded

    sys.exit(guarded(main))
