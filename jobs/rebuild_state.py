"""Recompute state from the whole fetch-log history, day by day.

Used after a bug fix or a change to the estimators: it replays update_state for every
date in [--from, --to] starting from empty state, so the result is exactly what the
daily incremental runs would have produced (a test checks this).

Run: ``python -m jobs.rebuild_state --from 2026-11-01 --to 2026-11-29 [--config ...]``.
Output goes to the configured root's ``state/``; point ``paths.root`` at a copy to
compare before replacing production state.
"""
from __future__ import annotations

import argparse
import sys

from jobs import update_state
from jobs.config import Config, add_config_args, config_from_args
from jobs.paths import date_range
from jobs.spark_session import get_spark


def run(cfg: Config, first: str, last: str, spark=None) -> list[dict]:
    spark = spark or get_spark(cfg, "rebuild_state")
    days = date_range(first, last)
    # The first day starts from nothing, whatever state exists for the day before.
    return [update_state.run(cfg, day, spark, from_empty=(day == days[0])) for day in days]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="first", required=True)
    parser.add_argument("--to", dest="last", required=True)
    add_config_args(parser)
    args = parser.parse_args(argv)
    for record in run(config_from_args(args), args.first, args.last):
        print(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
