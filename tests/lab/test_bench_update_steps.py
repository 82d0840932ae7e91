"""bench_update_steps' fold on a root whose yesterday's state predates an optional column
(as the kept benchmark roots do): the column is read as null, as update_state reads it."""
from __future__ import annotations

import glob

import pyarrow as pa
import pyarrow.parquet as pq

from jobs import update_state, validate_logs
from lab.studies import bench_update_steps
from tests import tiny_web
from tests.conftest import make_config


def test_fold_step_reads_a_state_written_before_an_optional_column(spark, tmp_path):
    root = str(tmp_path)
    tiny_web.build(root)
    cfg = make_config(root)
    for day in ("2026-11-01", "2026-11-02"):
        validate_logs.run(cfg, day)
        update_state.run(cfg, day, spark, bootstrap=(day == "2026-11-01"))
    rows = 0
    for f in glob.glob(f"{root}/state/dt=2026-11-01/*.parquet"):
        table = pq.read_table(f)
        pq.write_table(table.drop_columns(["tod_off_n"]), f)  # an older writer's file
        rows += table.num_rows
    # The study reads the logs raw, as the generator writes them: valid rows with their
    # host (tiny_web also holds hostile rows, which update_state quarantined).
    host_of = dict(map(tuple, pq.read_table(
        glob.glob(f"{root}/state/dt=2026-11-02/*.parquet"), columns=["url", "host"])
        .to_pandas().to_numpy().tolist()))
    for f in glob.glob(f"{root}/fetch_logs/dt=2026-11-02/*.parquet"):
        logs = pq.read_table(f).to_pandas()
        logs = logs[logs["url"].isin(host_of)].assign(host=lambda d: d["url"].map(host_of))
        pq.write_table(pa.Table.from_pandas(logs, preserve_index=False), f)
    got = bench_update_steps.fold(root, "2026-11-02", repeats=1)
    assert got["state_rows"] == rows > 0
    assert got["seconds"] > 0
