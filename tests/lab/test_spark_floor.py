"""spark_floor moves the chain's rows with identity functions: each step's output holds
exactly the rows it read (so its seconds are the plumbing of the real stage, no less)."""
from __future__ import annotations

import pyarrow.parquet as pq

from jobs import partitions, update_state, validate_logs
from lab.studies.spark_floor import floor_steps, summarise
from tests import tiny_web
from tests.conftest import make_config


def _rows(files, columns):
    return sorted(map(tuple, pq.read_table(files, columns=columns).to_pandas()
                      .astype(str).to_numpy().tolist()))


def test_floor_steps_pass_every_row_through(spark, tmp_path):
    root = str(tmp_path / "root")
    tiny_web.build(root)
    cfg = make_config(root)
    for day in ("2026-11-01", "2026-11-02"):
        validate_logs.run(cfg, day)
        update_state.run(cfg, day, spark, bootstrap=(day == "2026-11-01"))
    scratch = tmp_path / "scratch"
    seconds = floor_steps(spark, cfg, "2026-11-02", scratch)
    assert set(seconds) == {"update_state", "allocate", "build_schedule"}
    assert all(s > 0 for s in seconds.values())

    def state(day, columns):
        return _rows(partitions.committed_files(cfg.paths.table("state", day), "state"),
                     columns)

    # The co-group hands back yesterday's state whole (every column), and the passes
    # today's pages with their rate.
    by_fetch = ["url", "n_fetches", "last_fetch_at", "updated_dt"]
    assert _rows(str(scratch / "state"), by_fetch) == state("2026-11-01", by_fetch)
    assert state("2026-11-01", by_fetch) != state("2026-11-02", by_fetch)
    assert (pq.read_table(str(scratch / "state")).num_columns
            == len(pq.read_schema(partitions.committed_files(
                cfg.paths.table("state", "2026-11-01"), "state")[0])))
    by_rate = ["url", "lambda_hat"]
    assert _rows(str(scratch / "candidates"), ["url", "rate"]) == state("2026-11-02", by_rate)
    assert _rows(str(scratch / "schedule"), ["url", "rate"]) == state("2026-11-02", by_rate)
    assert len(state("2026-11-02", by_rate)) > 0


def test_summarise_keeps_the_cold_run_apart_from_the_warm_median():
    runs = [{"a": 10.0, "b": 4.0}, {"a": 5.0, "b": 2.0}, {"a": 7.0, "b": 1.0},
            {"a": 6.0, "b": 3.0}]
    got = summarise(runs, io_seconds=2.0)
    assert got["cold"] == {"steps": {"a": 10.0, "b": 4.0}, "chain_s": 14.0, "ratio": 7.0}
    # Warm: each step's median over runs 2-4, never the cold run's.
    assert got["warm"] == {"steps": {"a": 6.0, "b": 2.0}, "chain_s": 8.0, "ratio": 4.0}
    assert "warm" not in summarise(runs[:1], io_seconds=2.0)
