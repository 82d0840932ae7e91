"""lab.studies.stage_times reads a Spark event log's jobs, tasks and uncovered driver time."""
import json

from lab.studies import stage_times


def _events():
    return [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 1_000},
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 2_000,
         "Stage IDs": [0, 1], "Properties": {"callSite.short": "count at a.py:1"}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 1, "Task Info": {"Finish Time": 3_000},
         "Task Metrics": {"Executor Run Time": 700,
                          "Shuffle Read Metrics": {"Remote Bytes Read": 0,
                                                   "Local Bytes Read": 2 * 2**20},
                          "Shuffle Write Metrics": {"Shuffle Bytes Written": 2**20},
                          "Input Metrics": {"Records Read": 10}}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Info": {"Finish Time": 3_500},
         "Task Metrics": {"Executor Run Time": 300, "Input Metrics": {"Records Read": 5}}},
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 4_000},
        # Overlaps job 0 by 1 s, then a 2 s gap of driver time before job 2.
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 3_000,
         "Stage IDs": [2], "Properties": {"callSite.short": "parquet at b.py:9"}},
        {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": 5_000},
        {"Event": "SparkListenerJobStart", "Job ID": 2, "Submission Time": 7_000,
         "Stage IDs": [3], "Properties": {}},
        {"Event": "SparkListenerJobEnd", "Job ID": 2, "Completion Time": 7_500},
    ]


def test_jobs_tasks_and_driver_gaps_are_summed(tmp_path, capsys):
    jobs, first, last = stage_times.read_jobs(json.dumps(e) for e in _events())
    assert [j.job_id for j in jobs] == [0, 1, 2]
    assert (first, last) == (1_000, 7_500)
    j0 = jobs[0]
    assert j0.wall_s == 2.0 and j0.run_ms == 1_000 and j0.tasks == 2
    assert (j0.shuffle_read, j0.shuffle_write, j0.rows_read) == (2 * 2**20, 2**20, 15)
    assert jobs[1].call_site == "parquet at b.py:9"
    assert stage_times.covered_ms(jobs) == 3_000 + 500  # 2-5 s and 7-7.5 s
    log = tmp_path / "app"
    log.write_text("\n".join(json.dumps(e) for e in _events()))
    assert stage_times.main([str(log), "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:2] == ["1", "2.0"] or out[1].split()[:2] == ["0", "2.0"]
    assert out[-1].startswith("jobs 3, wall from first job to last end 5.5 s, covered by "
                              "jobs 3.5 s, not covered (driver) 2.0 s")


def test_stages_of_a_rolling_compressed_log_directory(tmp_path, capsys):
    """Spark 4 writes ``eventlog_v2_*/events_N_*.zstd``: the parts are read in order, and a
    stage line sums its accumulables (Python time, traffic, output rows)."""
    import pyarrow as pa

    stage = {"Event": "SparkListenerStageCompleted", "Stage Info": {
        "Stage ID": 3, "Number of Tasks": 8, "Submission Time": 7_000, "Completion Time": 7_400,
        "Accumulables": [
            {"Name": "time to execute Python code", "Value": "1500"},
            {"Name": "time to execute Python code", "Value": "500"},
            {"Name": "data sent to Python workers", "Value": str(3 * 2**20)},
            {"Name": "internal.metrics.output.recordsWritten", "Value": 42},
            {"Name": "not a number", "Value": "x"}]}}
    events = _events()
    parts = [events[:4], events[4:] + [stage]]
    log = tmp_path / "eventlog_v2_local-1"
    log.mkdir()
    for i, part in enumerate(parts, start=1):   # out of order on purpose: 10 sorts after 2
        name = log / f"events_{i if i == 1 else 10}_local-1.zstd"
        with pa.CompressedOutputStream(str(name), "zstd") as out:
            out.write("\n".join(json.dumps(e) for e in part).encode() + b"\n")
    jobs, _, _ = stage_times.read_jobs(stage_times.event_lines(str(log)))
    assert [j.job_id for j in jobs] == [0, 1, 2]
    stages = stage_times.read_stages(stage_times.event_lines(str(log)))
    assert [(s.stage_id, s.job_id, s.wall_s, s.tasks) for s in stages] == [(3, 2, 0.4, 8)]
    m = stages[0].metrics
    assert (m["python_s"], m["to_py_MB"], m["rows_out"]) == (2.0, 3.0, 42)
    assert stage_times.main([str(log), "--stages"]) == 0
    line = capsys.readouterr().out.splitlines()[1].split()
    assert line[:5] == ["3", "2", "0.4", "8", "2.0"] and line[-1] == "42"
