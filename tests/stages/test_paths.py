"""jobs.paths: the date rules and the partition/key layout, by known answers (no Spark)."""
from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from jobs import paths


def test_previous_and_schedule_day_cross_month_and_year_ends():
    assert paths.previous_day("2027-01-01") == "2026-12-31"
    assert paths.previous_day("2024-03-01") == "2024-02-29"  # leap year
    assert paths.previous_day("2026-03-01") == "2026-02-28"
    assert paths.schedule_date("2026-12-31") == "2027-01-01"
    assert paths.schedule_date("2024-02-28") == "2024-02-29"
    assert paths.shift_day("2026-11-29", -13) == "2026-11-16"


def test_day_bounds_are_utc_midnights():
    start, end = paths.day_bounds("2026-12-31")
    assert start == datetime(2026, 12, 31, tzinfo=timezone.utc)
    assert end == datetime(2027, 1, 1, tzinfo=timezone.utc)


def test_planning_window_is_the_next_utc_day_across_a_month_end():
    start, end = paths.planning_window("2026-11-30")  # plans 2026-12-01 00:00 .. 12-02 00:00
    assert start == datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp() == 1796083200.0
    assert end == start + 86400.0 == datetime(2026, 12, 2, tzinfo=timezone.utc).timestamp()
    assert isinstance(start, float) and isinstance(end, float)
    # the window starts on the schedule date, whatever the month
    assert datetime.fromtimestamp(start, timezone.utc).date().isoformat() == \
        paths.schedule_date("2026-11-30")


def test_date_range_is_inclusive_and_refuses_a_reversed_range():
    assert paths.date_range("2026-12-30", "2027-01-02") == [
        "2026-12-30", "2026-12-31", "2027-01-01", "2027-01-02"]
    assert paths.date_range("2026-01-01", "2026-01-01") == ["2026-01-01"]
    with pytest.raises(ValueError, match="before"):
        paths.date_range("2026-01-02", "2026-01-01")


@pytest.mark.parametrize("bad", ["2026-13-01", "2026-02-30", "20261101", "2026-1-01", None, 20261101])
def test_check_date_refuses_anything_but_a_real_yyyy_mm_dd(bad):
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        paths.check_date(bad)
    assert paths.check_date("2024-02-29") == "2024-02-29"


def test_table_partitions_and_working_paths():
    cfg = SimpleNamespace(paths=SimpleNamespace(
        table=lambda name, dt=None: paths.partition("s3a://b/root/", name, dt)))
    assert paths.partition("var/data", "state") == "var/data/state"
    assert paths.partition("var/data/", "state", "2026-11-02") == "var/data/state/dt=2026-11-02"
    assert paths.work_path(cfg, "2026-11-02", "candidates") == \
        "s3a://b/root/_work/dt=2026-11-02/candidates"
    assert paths.run_record_path(cfg, "2026-11-02", "allocate") == \
        "s3a://b/root/_runs/dt=2026-11-02/allocate.json"
    assert paths.quarantine_path(cfg, "2026-11-02", "frontier") == \
        "s3a://b/root/quarantine/dt=2026-11-02/source=frontier"


def test_the_config_builds_partitions_with_the_same_rule():
    from jobs.config import Config, PathsConfig

    cfg = Config(paths=PathsConfig(root="/data/"))
    assert cfg.paths.table("metrics", "2026-11-02") == paths.partition("/data/", "metrics", "2026-11-02")
    assert cfg.paths.table("host_policy") == "/data/host_policy"


def test_published_keys():
    assert paths.join_key("", "/a/", "b//", "", "c") == "a/b/c"
    assert paths.schedule_day_prefix("crawl/", "2026-11-03") == "crawl/schedules/dt=2026-11-03"
    assert paths.schedule_day_prefix("", "2026-11-03") == "schedules/dt=2026-11-03"
    assert paths.schedule_manifest_key("crawl", "2026-11-03") == \
        "crawl/schedules/dt=2026-11-03/_manifest.json"
    assert paths.schedule_manifest_key("s3://bkt/p", "2026-11-03") == \
        "s3://bkt/p/schedules/dt=2026-11-03/_manifest.json"
    assert paths.schedule_lock_key("crawl", "2026-11-03") == "crawl/schedules/_locks/dt=2026-11-03.json"
    with pytest.raises(ValueError):
        paths.schedule_day_prefix("crawl", "2026-11-3")


def test_paths_is_pure_standard_library():
    """The DAG file imports it at parse time (through jobs.dag_tasks)."""
    tree = ast.parse(Path(paths.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "datetime", "typing"}, imported
