"""Attach each page's visit rate (visits/day) under the configured policy (Spark glue).

``adaptive`` needs no global solve: its rate is 1/interval from the backoff rule.
Budget-aware policies find their global level from per-host demand curves.
"""
from __future__ import annotations

from jobs.config import Config

DAY_S = 86400.0


def attach_rates(spark, cfg: Config, pages):
    from pyspark.sql import functions as F

    iv = cfg.intervals
    f_min, f_max = DAY_S / iv.cap_s, DAY_S / iv.floor_s
    gone_rate = 1.0 / cfg.policy.gone_recheck_days
    name = cfg.policy.name
    if name != "adaptive":
        raise NotImplementedError(f"policy {name!r} is not wired into Spark yet")
    rate = F.lit(DAY_S) / F.coalesce("interval_s", F.lit(iv.initial_s))
    rate = F.least(F.greatest(rate, F.lit(f_min)), F.lit(f_max))
    rate = (F.when(F.col("lane") == "discovery", F.lit(1.0))
            .when(F.col("gone"), F.lit(gone_rate)).otherwise(rate))
    pages = pages.withColumn("lambda_hat", F.coalesce("lambda_hat", F.lit(0.0)))
    return pages.withColumn("rate", rate), {"policy_level": None}
