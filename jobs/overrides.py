"""The operator's ``overrides/`` table, read for one run date (no Spark: pyarrow).

The table (:data:`jobs.schemas.OVERRIDES`, any Parquet files under ``paths.root/overrides``;
absent or empty: no override) is small and written by people, so it is read whole on the
driver, checked row by row (:func:`jobs.core.overrides.check`) and the rows in force for the
window D+1 kept (:func:`jobs.core.overrides.in_force`). allocate applies them to the page
table (:func:`apply`) and quarantines the bad rows (source ``overrides``); ``recrawl
explain`` and the report show the ones in force.

Write one with pandas, e.g. pin a URL at 4 visits/day through 2026-12-31 (the row's `until`)::

    pd.DataFrame({"action": ["pin"], "url": ["https://h.example/p"],
                  "visits_per_day": [4.0], "until": [date(2026, 12, 31)],
                  "note": ["ops: launch week"]}).to_parquet("DATA/overrides/ops-1.parquet")
"""
from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq

from jobs import schemas, storage
from jobs.config import Config
from jobs.core import overrides as core
from jobs.fleet.schedule import filesystem_for
from jobs.paths import schedule_date


def read_table(cfg: Config) -> pd.DataFrame:
    """Every row of ``overrides/`` (columns :data:`jobs.core.overrides.COLUMNS`); a file
    that breaks the contract is a :class:`jobs.schemas.SchemaError` naming it."""
    files = storage.list_parquet_files(cfg.paths.table("overrides"))
    schemas.check_files(schemas.OVERRIDES, files)
    frames = []
    for f in files:
        fs, path = filesystem_for(f)
        names = pq.read_schema(path, filesystem=fs).names
        cols = [c for c in core.COLUMNS if c in names]
        table = pq.read_table(path, filesystem=fs, columns=cols)
        frames.append(table.replace_schema_metadata(None).to_pandas())
    if not frames:
        return pd.DataFrame(columns=list(core.COLUMNS))
    return pd.concat(frames, ignore_index=True).reindex(columns=list(core.COLUMNS))


def load(cfg: Config, run_date: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(overrides in force for the run of ``run_date``, quarantined rows)."""
    valid, bad = core.check(read_table(cfg), cfg.ingest.max_url_length)
    return core.in_force(valid, schedule_date(run_date)), bad


def apply(spark, pages, active: pd.DataFrame):
    """``pages`` with the overrides in force: forgotten URLs removed, paused hosts at cap
    factor 0 (column ``paused``), ``pin_rate`` and ``force_after`` per URL (null: none)."""
    from pyspark.sql import functions as F

    per_url = core.page_columns(active)
    paused = core.paused_hosts(active)
    forget = per_url.loc[per_url["forget"], ["url"]]
    if len(forget):
        pages = pages.join(F.broadcast(spark.createDataFrame(forget, "url string")), "url",
                           "left_anti")
    pinned = per_url.loc[~per_url["forget"] & (per_url["pin_rate"].notna()
                                               | per_url["force_after"].notna()),
                         ["url", "pin_rate", "force_after"]]
    if len(pinned):
        frame = spark.createDataFrame(pinned.astype({"pin_rate": float, "force_after": float}),
                                      "url string, pin_rate double, force_after double")
        pages = pages.join(F.broadcast(frame), "url", "left")
    else:
        pages = (pages.withColumn("pin_rate", F.lit(None).cast("double"))
                 .withColumn("force_after", F.lit(None).cast("double")))
    is_paused = F.col("host").isin(*paused) if paused else F.lit(False)
    return (pages.withColumn("paused", is_paused)
            .withColumn("cap_factor", F.when(is_paused, F.lit(0.0)).otherwise(F.col("cap_factor"))))


def quarantine(spark, cfg: Config, run_date: str, bad: pd.DataFrame) -> int:
    """Write the bad override rows to ``quarantine/dt=D`` (source ``overrides``)."""
    from jobs import ingest

    if bad.empty:
        return ingest.write_quarantine(cfg, run_date, "overrides", None)
    frame = spark.createDataFrame(bad.assign(source="overrides"),
                                  "reason string, url string, row_json string, source string")
    return ingest.write_quarantine(cfg, run_date, "overrides", frame)


def for_target(active: pd.DataFrame, url: str | None, host: str | None) -> list[str]:
    """The overrides in force on ``url`` or ``host``, one line each (explain)."""
    if active.empty:
        return []
    mine = active[(active["target"] == url) | (active["target"] == host)
                  & (active["action"] == "pause_host")]
    return [core.describe(r) for r in mine.to_dict("records")]
