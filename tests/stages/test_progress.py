"""Progress lines of a running stage (jobs.progress): logged while it runs, stopped after."""
from __future__ import annotations

import logging
import threading
import time

import pandas as pd
import pytest

from jobs import cli, progress
from jobs.config import ConfigError, load_config
from jobs.progress import Figures


def _progress_threads():
    return [t for t in threading.enumerate() if t.name.startswith("recrawl-progress-")]


class GrowingFigures:
    """A fake status store: 1,000 more rows read on every call, one stage running."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return Figures(rows_read=1000 * self.calls, shuffle_rows_read=10 * self.calls,
                       running=((7, self.calls, 8),))


def test_a_slow_stage_logs_its_progress_and_the_thread_stops(caplog):
    caplog.set_level(logging.INFO, logger="recrawl.progress")
    with progress.reporting("slow_stage", 0.05, GrowingFigures()) as reporter:
        time.sleep(0.5)  # the deliberately slow stage
        assert _progress_threads()
    assert reporter.lines >= 1 and not _progress_threads()
    lines = [r.getMessage() for r in caplog.records if r.name == "recrawl.progress"]
    ticks = [line for line in lines if "tasks" in line]
    assert len(ticks) >= 1 and ticks[0].startswith("slow_stage: ")
    # The first call is the baseline, so the first line reports the second call's figures.
    assert "rows read 2,000 (" in ticks[0] and "stage 7 tasks 2/8" in ticks[0]
    assert lines[-1].startswith("slow_stage: ") and lines[-1].endswith("(done)")


def test_a_stage_that_raises_still_stops_its_thread(caplog):
    caplog.set_level(logging.INFO, logger="recrawl.progress")
    with pytest.raises(RuntimeError, match="boom"):
        with progress.reporting("bad_stage", 0.02, GrowingFigures()):
            time.sleep(0.2)
            raise RuntimeError("boom")
    assert not _progress_threads()
    lines = [r.getMessage() for r in caplog.records if r.name == "recrawl.progress"]
    assert any("tasks" in line for line in lines) and lines[-1].endswith("(failed)")


def test_figures_that_cannot_be_read_never_fail_the_stage(caplog):
    caplog.set_level(logging.INFO, logger="recrawl.progress")

    def broken():
        raise ConnectionError("JVM gone")

    with progress.reporting("stage", 0.02, broken) as reporter:
        time.sleep(0.15)
    assert reporter.lines >= 1 and not _progress_threads()
    lines = [r.getMessage() for r in caplog.records if r.name == "recrawl.progress"]
    assert all("no Spark figures yet" in line for line in lines)


def test_without_a_spark_context_the_line_says_how_long_it_ran(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="recrawl.progress")
    monkeypatch.delitem(__import__("sys").modules, "pyspark", raising=False)
    with progress.reporting("publish", 0.02) as reporter:
        time.sleep(0.1)
    assert reporter.lines >= 1
    assert caplog.records[0].getMessage().startswith("publish: 0 s, no Spark figures yet")


def test_a_line_gives_totals_rates_and_running_stages():
    before = Figures(rows_read=1_000, shuffle_rows_read=0)
    now = Figures(rows_read=61_000, shuffle_rows_read=3_000, running=((3, 5, 8), (4, 0, 2)))
    assert progress.describe("update_state", 95.4, now, before, 30.0) == (
        "update_state: 95 s, rows read 61,000 (2,000/s), shuffle rows read 3,000 (100/s); "
        "stage 3 tasks 5/8, stage 4 tasks 0/2")
    assert progress.describe("allocate", 2.0, None, None, 2.0) == \
        "allocate: 2 s, no Spark figures yet"


def test_the_interval_must_be_positive():
    with pytest.raises(ValueError):
        progress.Reporter("s", 0, GrowingFigures())
    with pytest.raises(ConfigError, match="progress_interval_s"):
        load_config(None, ["spark.progress_interval_s=0"])
    assert load_config(None, []).spark.progress_interval_s == 30.0


def run(cfg, run_date):
    """A stage for stage_main: slow, no Spark."""
    time.sleep(0.3)
    return {"dt": run_date}


def test_every_stage_main_reports_progress_at_the_configured_interval(caplog, capsys):
    caplog.set_level(logging.INFO, logger="recrawl.progress")
    assert cli.stage_main(run, "A slow stage.", ["--date", "2026-11-29",
                                                 "--set", "spark.progress_interval_s=0.05"]) == 0
    assert '"dt": "2026-11-29"' in capsys.readouterr().out
    lines = [r.getMessage() for r in caplog.records if r.name == "recrawl.progress"]
    assert len(lines) >= 2 and all(line.startswith("test_progress: ") for line in lines)
    assert not _progress_threads()


def test_stage_names_of_the_entry_points():
    from jobs import allocate, build_schedule, dag_tasks, update_state

    assert [cli._stage_name(f) for f in (update_state.run, allocate.run, build_schedule.run,
                                         dag_tasks.run_publish)] == \
        ["update_state", "allocate", "build_schedule", "publish"]


def test_spark_figures_count_the_stages_of_this_run_only(spark, tmp_path, caplog):
    """The real status store: rows read and tasks of a slow job, none of earlier jobs."""
    caplog.set_level(logging.INFO, logger="recrawl.progress")
    for part in range(4):
        pd.DataFrame({"k": range(part * 500, part * 500 + 500)}).to_parquet(
            tmp_path / f"part-{part}.parquet")
    df = spark.read.parquet(str(tmp_path))
    assert df.count() == 2000  # an earlier job of the shared session: not counted below

    def slow(batches):
        for batch in batches:
            time.sleep(0.4)
            yield batch

    figures = progress.SparkFigures()
    with progress.reporting("spark_stage", 0.1, figures):
        rows = df.repartition(4).mapInPandas(slow, "k long").groupBy().count().first()[0]
    assert rows == 2000
    final = figures()
    assert final.rows_read == 2000 and final.shuffle_rows_read >= 2000 and not final.running
    lines = [r.getMessage() for r in caplog.records if r.name == "recrawl.progress"]
    assert any("tasks" in line for line in lines), lines
    assert not _progress_threads()


def test_a_stage_shorter_than_the_interval_logs_nothing(caplog):
    caplog.set_level(logging.INFO, logger="recrawl.progress")
    with pytest.raises(KeyError):
        with progress.reporting("quick", 30.0, GrowingFigures()):
            raise KeyError("refused at once")
    with progress.reporting("quick", 30.0, GrowingFigures()):
        pass
    assert not caplog.records and not _progress_threads()


def test_a_root_handler_set_up_later_does_not_print_each_line_twice():
    # As after a Ctrl-C inside a JVM call: py4j's logging.exception runs basicConfig.
    import subprocess
    import sys

    code = ("import logging; from jobs import progress; progress.log_to_stderr(); "
            "logging.basicConfig(); progress.log.info('30 s, rows read 5')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert len(out.stderr.splitlines()) == 1 and "30 s, rows read 5" in out.stderr
