"""Where a Spark application's wall time went, from its event log.

Usage::

    python -m lab.studies.stage_times EVENT_LOG [--top N] [--since-job K]

EVENT_LOG is a log file or Spark 4's rolling event-log directory (``eventlog_v2_*``),
compressed or not.

Run a stage with ``--set spark.settings.spark.eventLog.enabled=true
--set spark.settings.spark.eventLog.dir=/tmp/ev`` (a directory that exists); the log is the
one file Spark writes there. Prints one line per Spark job, longest first: wall seconds
(submission to end), the tasks' summed run time (executor seconds), shuffle read and write
(MB), rows read from files, and the job's call site (the Python line that started it, as
PySpark records it). A last line sums the jobs and counts the wall time no job covered
(driver work: planning, footers, pandas on the driver).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field


@dataclass
class Job:
    job_id: int
    start_ms: int
    call_site: str
    stage_ids: tuple
    end_ms: int | None = None
    run_ms: int = 0
    shuffle_read: int = 0
    shuffle_write: int = 0
    rows_read: int = 0
    tasks: int = 0
    stages: set = field(default_factory=set)

    @property
    def wall_s(self) -> float:
        return ((self.end_ms or self.start_ms) - self.start_ms) / 1000.0


def read_jobs(lines) -> tuple[list[Job], int, int]:
    """The jobs of an event log's lines, with the application's first and last event times
    (ms)."""
    jobs: dict[int, Job] = {}
    stage_job: dict[int, int] = {}
    first = last = None
    for line in lines:
        ev = json.loads(line)
        kind = ev.get("Event", "")
        t = ev.get("Submission Time") or ev.get("Completion Time") or ev.get("Timestamp")
        if kind == "SparkListenerTaskEnd":
            t = (ev.get("Task Info") or {}).get("Finish Time")
        if isinstance(t, int):
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
        if kind == "SparkListenerJobStart":
            props = ev.get("Properties") or {}
            site = (props.get("callSite.short") or props.get("spark.job.description")
                    or (ev.get("Stage Infos") or [{}])[0].get("Stage Name", ""))
            ids = tuple(ev.get("Stage IDs") or ())
            jobs[ev["Job ID"]] = Job(ev["Job ID"], ev["Submission Time"], site, ids)
            for s in ids:
                stage_job[s] = ev["Job ID"]
        elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
            jobs[ev["Job ID"]].end_ms = ev["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            job = jobs.get(stage_job.get(ev.get("Stage ID"), -1))
            metrics = ev.get("Task Metrics") or {}
            if job is None or not metrics:
                continue
            job.tasks += 1
            job.run_ms += int(metrics.get("Executor Run Time", 0))
            job.shuffle_read += int((metrics.get("Shuffle Read Metrics") or {})
                                    .get("Remote Bytes Read", 0)) + int(
                (metrics.get("Shuffle Read Metrics") or {}).get("Local Bytes Read", 0))
            job.shuffle_write += int((metrics.get("Shuffle Write Metrics") or {})
                                     .get("Shuffle Bytes Written", 0))
            job.rows_read += int((metrics.get("Input Metrics") or {}).get("Records Read", 0))
    return sorted(jobs.values(), key=lambda j: j.job_id), first or 0, last or 0


@dataclass
class Stage:
    stage_id: int
    job_id: int
    wall_s: float
    tasks: int
    metrics: dict  # SQL and task accumulables by name, summed over the stage's tasks


_STAGE_METRICS = (("python_s", "time to execute Python code", 1e-3),
                  ("to_py_MB", "data sent to Python workers", 2.0**-20),
                  ("from_py_MB", "data returned from Python workers", 2.0**-20),
                  ("shuf_r_MB", "internal.metrics.shuffle.read.localBytesRead", 2.0**-20),
                  ("shuf_w_MB", "internal.metrics.shuffle.write.bytesWritten", 2.0**-20),
                  ("rows_in", "internal.metrics.input.recordsRead", 1),
                  ("spill_MB", "internal.metrics.diskBytesSpilled", 2.0**-20),
                  ("rows_out", "internal.metrics.output.recordsWritten", 1))


def read_stages(lines) -> list[Stage]:
    """The completed stages of an event log's lines, with their job and the figures of
    :data:`_STAGE_METRICS` (Python time and traffic, shuffle, input and output rows)."""
    stage_job: dict[int, int] = {}
    stages = []
    for line in lines:
        ev = json.loads(line)
        kind = ev.get("Event", "")
        if kind == "SparkListenerJobStart":
            for s in ev.get("Stage IDs") or ():
                stage_job.setdefault(s, ev["Job ID"])
        elif kind == "SparkListenerStageCompleted":
            info = ev["Stage Info"]
            sums: dict = {}
            for acc in info.get("Accumulables") or ():
                try:
                    sums[acc["Name"]] = sums.get(acc["Name"], 0) + float(acc.get("Value"))
                except (TypeError, ValueError):
                    continue
            wall = ((info.get("Completion Time") or 0) - (info.get("Submission Time") or 0))
            stages.append(Stage(info["Stage ID"], stage_job.get(info["Stage ID"], -1),
                                wall / 1000.0, int(info.get("Number of Tasks") or 0),
                                {k: sums.get(name, 0.0) * scale
                                 for k, name, scale in _STAGE_METRICS}))
    return sorted(stages, key=lambda s: s.stage_id)


def event_lines(path: str):
    """The JSON lines of an event log: one file, or Spark 4's rolling directory
    (``eventlog_v2_*``, its ``events_N_*`` files in order); ``.zstd``, ``.lz4`` and ``.gz``
    files (``spark.eventLog.compress``) are decompressed with pyarrow's codecs."""
    import io
    import os

    import pyarrow as pa

    if os.path.isdir(path):
        parts = [n for n in os.listdir(path) if n.startswith("events_")]
        files = [os.path.join(path, n)
                 for n in sorted(parts, key=lambda n: int(n.split("_")[1]))]
    else:
        files = [path]
    codecs = {".zstd": "zstd", ".lz4": "lz4", ".gz": "gzip"}
    for name in files:
        codec = codecs.get(os.path.splitext(name)[1])
        raw = (pa.CompressedInputStream(pa.OSFile(name), codec) if codec
               else pa.OSFile(name))
        with io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8") as text:
            for line in text:
                if line.strip():
                    yield line


def covered_ms(jobs: list[Job]) -> int:
    """Wall time during which at least one job ran (jobs can overlap)."""
    spans = sorted((j.start_ms, j.end_ms or j.start_ms) for j in jobs)
    total, cur_start, cur_end = 0, None, None
    for s, e in spans:
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    return total + ((cur_end - cur_start) if cur_end is not None else 0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("event_log")
    parser.add_argument("--top", type=int, default=25, help="lines to print (longest jobs)")
    parser.add_argument("--since-job", type=int, default=0,
                        help="ignore jobs before this id (an earlier stage of the session)")
    parser.add_argument("--stages", action="store_true",
                        help="one line per completed stage instead, in order: wall, Python "
                             "time and traffic, shuffle, rows in and out")
    args = parser.parse_args(argv)
    if args.stages:
        stages = [s for s in read_stages(event_lines(args.event_log))
                  if s.job_id >= args.since_job]
        print(f"{'stage':>5} {'job':>5} {'wall_s':>7} {'tasks':>5} "
              + " ".join(f"{k:>10}" for k, _, _ in _STAGE_METRICS))
        for st in stages:
            print(f"{st.stage_id:>5} {st.job_id:>5} {st.wall_s:>7.1f} {st.tasks:>5} "
                  + " ".join(f"{st.metrics[k]:>10.1f}" if isinstance(st.metrics[k], float)
                             and k.endswith(("_s", "_MB")) else f"{int(st.metrics[k]):>10,}"
                             for k, _, _ in _STAGE_METRICS))
        return 0
    jobs, first, last = read_jobs(event_lines(args.event_log))
    jobs = [j for j in jobs if j.job_id >= args.since_job]
    if not jobs:
        print("no jobs", file=sys.stderr)
        return 1
    mb = 1 / 2**20
    print(f"{'job':>5} {'wall_s':>8} {'exec_s':>8} {'tasks':>6} {'shuf_r_MB':>10} "
          f"{'shuf_w_MB':>10} {'rows_read':>11}  call site")
    for j in sorted(jobs, key=lambda j: -j.wall_s)[:args.top]:
        print(f"{j.job_id:>5} {j.wall_s:>8.1f} {j.run_ms / 1000:>8.1f} {j.tasks:>6} "
              f"{j.shuffle_read * mb:>10.1f} {j.shuffle_write * mb:>10.1f} "
              f"{j.rows_read:>11,}  {j.call_site}")
    span_ms = (max(j.end_ms or j.start_ms for j in jobs) - min(j.start_ms for j in jobs))
    busy = covered_ms(jobs)
    print(f"jobs {len(jobs)}, wall from first job to last end {span_ms / 1000:.1f} s, "
          f"covered by jobs {busy / 1000:.1f} s, not covered (driver) "
          f"{(span_ms - busy) / 1000:.1f} s, executor {sum(j.run_ms for j in jobs) / 1000:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
