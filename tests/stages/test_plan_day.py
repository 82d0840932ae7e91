"""jobs.plan_day: the three Spark stages of a day in one session (airflow.spark_session = run)."""
from __future__ import annotations

import os

import pytest

from jobs import partitions, plan_day, validate_logs
from tests.conftest import make_config

D0, D1 = "2024-01-13", "2024-01-14"


@pytest.mark.e2e
def test_one_session_runs_the_three_stages_and_a_refusal_stops_the_chain(spark, tmp_path):
    from jobs import rebuild_state
    from lab.tools.generate_sample import generate_sample

    root = tmp_path / "data"
    generate_sample(str(root), urls=300, hosts=6, days=2, end_date=D1, seed=2)
    cfg = make_config(root, "budget.daily_fetches=100")
    for day in (D0, D1):
        validate_logs.run(cfg, day)
    rebuild_state.run(cfg, D0, D0, spark)
    records = plan_day.run(cfg, D1, spark)
    assert list(records) == ["update_state", "allocate", "build_schedule"]
    assert records["build_schedule"]["planned_total"] <= 100
    for table, dt in (("state", D1), ("hosts", D1), ("plan", D1), ("metrics", D1)):
        assert partitions.is_committed(cfg.paths.table(table, dt)), table
    assert os.listdir(cfg.paths.table("schedules", "2024-01-15"))

    # A day whose yesterday is not committed: update_state refuses, nothing after it runs.
    later = "2024-01-16"
    with pytest.raises(partitions.MissingPartitionError):
        plan_day.run(cfg, later, spark)
    for table in ("state", "plan", "metrics"):
        assert not os.path.exists(cfg.paths.table(table, later)), table
    assert not os.path.exists(cfg.paths.table("schedules", "2024-01-17"))
