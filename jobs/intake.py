"""Intake: the day's robots.txt, sitemaps and feeds -> host_policy, signals and sitemap refs.

Reads ``documents/dt=D`` (what the fleet fetched, bodies included; written with
``jobs.fleet.documents.DocumentWriter``), checks each document's row in Spark (the URL rule,
``host_mismatch``, ``bad_kind``, ``null_fetched_at``, ``future_fetched_at``,
``late_fetched_at``, ``bad_status``, ``body_too_large``: such a body never reaches a Python
worker), parses the rest per document on the executors (``jobs.core.intake``: protego,
defusedxml, feedparser; ``mapInPandas`` in batches of ``intake.docs_per_batch`` documents),
and writes, each committed:

* ``signals/dt=D``: a sitemap ``<lastmod>`` or feed entry date per URL (the latest per URL
  and source), in the signals contract, beside any upstream (WebSub, IndexNow) files;
* ``host_policy/dt=D``: the snapshot as of the day before (``jobs.snapshots``) carried
  forward, with the robots rows of the hosts whose robots.txt answered today replaced
  (Crawl-delay, clamped to the ``politeness`` bounds; a 4xx or no Crawl-delay ends the robots
  row; a 5xx keeps it). A flat (undated) ``host_policy/`` is refused (SchemaError): intake's
  dated snapshot beside it would be both layouts at once;
* ``document_refs/dt=D``: sitemaps named by robots.txt and sitemap indexes, for the fleet;
* ``quarantine/dt=D/source=documents``: every refused document or entry, with its reason.

Upstream's files in ``signals/dt=D`` and ``host_policy/dt=D`` are the ones present before
intake's first attempt at D (noted in ``_INTAKE_UPSTREAM.json`` until the commit's marker
names them): a killed attempt's files are never taken for upstream's, and a rerun replaces
them (tests/stages/test_stage_safety.py).

Run: ``python -m jobs.intake --date D`` (``recrawl intake --date D``); docs/operations.md.
"""
from __future__ import annotations

import sys

from jobs import ingest, outage, partitions, schemas, snapshots, storage
from jobs.cli import stage_main
from jobs.config import Config
from jobs.core import intake as core
from jobs.paths import day_bounds
from jobs.runlog import write_stage_record
from jobs.spark_session import get_spark

ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def limits(cfg: Config) -> core.Limits:
    i, pol = cfg.intake, cfg.politeness
    return core.Limits(user_agent=i.user_agent, max_body_bytes=i.max_body_bytes,
                       max_robots_bytes=i.max_robots_bytes,
                       max_urls_per_sitemap=i.max_urls_per_sitemap,
                       max_clock_skew_s=i.max_clock_skew_s,
                       min_crawl_delay_s=pol.min_crawl_delay_s,
                       max_crawl_delay_s=pol.max_crawl_delay_s,
                       max_url_length=cfg.ingest.max_url_length)


def read_documents(spark, cfg: Config, run_date: str):
    """(clean, quarantined) document rows; bodies of quarantined rows stay out of row_json
    (their length is there instead)."""
    from pyspark.sql import functions as F

    footers = ingest.checked_footers(schemas.DOCUMENTS, cfg.paths.table("documents", run_date),
                                     True)
    df = ingest._read(spark, schemas.DOCUMENTS, footers)
    df = df.withColumn("body_bytes", F.length("body"))
    cols = [c for c in df.columns if c != "body"]
    df = ingest.with_normalized_host(ingest.with_url_checks(df, cfg), F.col("host"),
                                     "_given_host")
    _, day_end = day_bounds(run_date)
    at, status = F.col("fetched_at"), F.col("status")
    reason = (F.when(F.col("_url_reason").isNotNull(), F.col("_url_reason"))
              .when(F.col("host").isNotNull() & F.coalesce(
                  F.col("_given_host") != F.col("_host"), F.lit(True)), "host_mismatch")
              .when(F.col("kind").isNull() | ~F.col("kind").isin(*core.KINDS), "bad_kind")
              .when(at.isNull(), "null_fetched_at")
              .when(at >= F.lit(day_end), "future_fetched_at")
              .when(at < F.lit(ingest.lateness_horizon(cfg, run_date)), "late_fetched_at")
              .when(status.isNull() | ~((status == 0) | status.between(100, 599)), "bad_status")
              .when(F.col("body_bytes") > cfg.intake.max_body_bytes, "body_too_large"))
    clean, bad = ingest._split(df, reason, "documents", cols)
    clean = clean.select("url", F.col("_host").alias("host"), "kind", "fetched_at", "status",
                         "body")
    return clean, bad


def _parse(lim: core.Limits):
    def parse(batches):
        for pdf in batches:
            yield core.documents_frame(pdf, lim)
    return parse


UPSTREAM_NOTE = "_INTAKE_UPSTREAM.json"


def _upstream_files(path: str) -> list[str]:
    """The data files of ``path`` that this stage did not write: named as upstream's by an
    earlier intake commit, else by the note its first attempt wrote before writing anything
    (so a killed attempt's files are never taken for upstream's), else all present now (and
    the note is written)."""
    marker = partitions.read_marker(path)
    present = storage.list_parquet_files(path)
    base = path.rstrip("/")
    if marker is not None:
        names = marker.get("extra", {}).get("upstream_files", [])
    else:
        note = storage.read_json(f"{base}/{UPSTREAM_NOTE}")
        if note is None:
            storage.write_json(f"{base}/{UPSTREAM_NOTE}", {"upstream_files": [
                f[len(base) + 1:] for f in present]})
            return present
        names = note["upstream_files"]
    kept = {f"{base}/{name}" for name in names}
    return [f for f in present if f in kept]


def _commit_beside(df, path: str, table: str, extra: dict) -> int:
    """Write ``df`` into ``path`` and commit it together with upstream's files there;
    returns the rows this stage wrote."""
    upstream = _upstream_files(path)
    ours = partitions.append_files(df, path)
    base = path.rstrip("/") + "/"
    names = [f[len(base):] for f in upstream]
    marker = partitions.commit_files(path, table, upstream + ours,
                                     {**extra, "upstream_files": names})
    if storage.exists(f"{base}{UPSTREAM_NOTE}"):  # the marker names upstream's files now
        storage.delete_file(f"{base}{UPSTREAM_NOTE}")
    return sum(e["rows"] for e in marker["files"] if e["name"] not in names)


def _base_policy(spark, cfg: Config, run_date: str):
    """The host_policy snapshot a run of the day before D reads (:func:`jobs.snapshots.previous`),
    which intake carries forward; None when there is none, or when upstream wrote its own
    snapshot of D (kept beside intake's rows as written)."""
    if _upstream_files(cfg.paths.table("host_policy", run_date)):
        return None
    snap = snapshots.previous(cfg, "host_policy", run_date)
    if snap is None or not snap.files:
        return None
    return ingest._read(spark, schemas.HOST_POLICY,
                        schemas.check_files(schemas.HOST_POLICY, list(snap.files)))


def _host_policy(spark, cfg: Config, run_date: str, policy_rows):
    """Today's snapshot: the base with the robots rows of today's answering hosts replaced."""
    from pyspark.sql import functions as F
    from pyspark.sql import Window

    latest = Window.partitionBy("host").orderBy(F.col("at").desc(),
                                                F.col("crawl_delay_s").desc_nulls_last())
    today = (policy_rows.filter(F.col("note").isNull() | (F.col("note") != "keep"))
             .withColumn("_n", F.row_number().over(latest)).filter("_n = 1").drop("_n"))
    robots = today.filter(F.col("crawl_delay_s").isNotNull()).select(
        "host", "crawl_delay_s", F.lit(None).cast("bigint").alias("max_fetches_per_day"),
        F.lit("robots").alias("source"))
    base = _base_policy(spark, cfg, run_date)
    if base is None:
        return robots
    base = ingest.with_normalized_host(base, F.col("host"), "_nh")
    answered = today.select(F.col("host").alias("_nh"), F.lit(True).alias("_answered"))
    replaced = F.coalesce(F.col("source"), F.lit("")) == "robots"
    kept = (base.join(answered, "_nh", "left")
            .filter(~(replaced & F.col("_answered").isNotNull()))
            .drop("_nh", "_answered"))
    return ingest.project(kept, schemas.HOST_POLICY).unionByName(robots)


def run(cfg: Config, run_date: str, spark=None) -> dict:
    snapshots.require_dated(cfg, "host_policy", "intake")  # it writes host_policy/dt=D
    if outage.declared(cfg, run_date) and not storage.list_parquet_files(
            cfg.paths.table("documents", run_date)):
        record = {"no_fetches": True}
        write_stage_record(cfg, run_date, "intake", record)
        return record
    ingest.checked_footers(schemas.DOCUMENTS, cfg.paths.table("documents", run_date), True)
    spark = spark or get_spark(cfg, "intake")
    previous = spark.conf.get(ARROW_BATCH, None)
    spark.conf.set(ARROW_BATCH, str(cfg.intake.docs_per_batch))
    try:
        return _run(spark, cfg, run_date)
    finally:
        if previous is None:
            spark.conf.unset(ARROW_BATCH)
        else:
            spark.conf.set(ARROW_BATCH, previous)


def _run(spark, cfg: Config, run_date: str) -> dict:
    from pyspark.sql import functions as F

    docs, bad_docs = read_documents(spark, cfg, run_date)
    docs = docs.repartition(max(1, spark.sparkContext.defaultParallelism), "host")
    out = docs.mapInPandas(_parse(limits(cfg)), core.OUT_DDL).persist()
    try:
        counts = {(r["out"], r["why"] or ""): r["n"] for r in
                  out.groupBy("out", F.coalesce("reason", "note").alias("why"))
                  .agg(F.count("*").alias("n")).collect()}
        counts.update({("quarantine", r["reason"]): counts.get(("quarantine", r["reason"]), 0)
                       + r["n"] for r in bad_docs.groupBy("reason")
                       .agg(F.count("*").alias("n")).collect()})
        signals = (out.filter(F.col("out") == "signal")
                   .groupBy("url", "source").agg(F.max("signaled_at").alias("signaled_at"))
                   .select("url", "signaled_at", "source"))
        n_signals = _commit_beside(signals.coalesce(1), cfg.paths.table("signals", run_date),
                                    "signals", {"writer": "intake"})
        policy = _host_policy(spark, cfg, run_date, out.filter(F.col("out") == "policy"))
        n_policy = _commit_beside(policy.coalesce(1),
                                    cfg.paths.table("host_policy", run_date), "host_policy",
                                    {"writer": "intake"})
        refs = (out.filter(F.col("out") == "ref").groupBy("url", "host").agg(
            F.min("referrer").alias("referrer"), F.min("at").alias("found_at"))
            .select("url", "host", F.lit("sitemap").alias("kind"), "referrer", "found_at"))
        ref_marker = partitions.write_committed(
            refs.coalesce(1), cfg.paths.table("document_refs", run_date), "document_refs")
        entry_bad = out.filter(F.col("out") == "quarantine").select(
            F.lit("documents").alias("source"), "reason", "url", "row_json")
        quarantined = ingest.write_quarantine(cfg, run_date, "documents",
                                              bad_docs.unionByName(entry_bad))
    finally:
        out.unpersist()
    by_reason: dict[str, int] = {}
    for (kind, reason), n in counts.items():
        if kind in ("quarantine", "skipped"):
            by_reason[reason] = by_reason.get(reason, 0) + n
    policy_notes = {reason or "set": n for (kind, reason), n in counts.items()
                    if kind == "policy"}
    record = {
        "signals": n_signals, "host_policy_rows": n_policy,
        "document_refs": ref_marker["rows"], "quarantined_rows": quarantined,
        "entries_skipped_no_date": by_reason.pop("no_date", 0),
        "robots": policy_notes, "quarantine_reasons": by_reason,
    }
    write_stage_record(cfg, run_date, "intake", record)
    return record


def main(argv=None) -> int:
    return stage_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
