"""Print, every second, the RSS of a Spark job's JVM and of its Python workers.

Usage (beside a running stage; the PID is the stage's Python driver)::

    python -m lab.studies.rss_series PID > series.log

One line per second until the process ends: ``HH:MM:SS jvm <GB> workers <GB> n <workers>``.
Read beside the stage's progress lines (``spark.progress_interval_s``), it says which Spark
stage holds the memory that :mod:`lab.studies.bench_common` reports as one peak.
"""
from __future__ import annotations

import sys
import time

import psutil

from lab.studies.bench_common import process_kind


def sample(root: psutil.Process) -> dict[str, float]:
    """RSS (GB) per kind of ``root``'s children, and the number of Python workers."""
    out = {"jvm": 0.0, "python_workers": 0.0, "n": 0}
    for p in root.children(recursive=True):
        try:
            kind = process_kind(p, root)
            if kind == "spawned":
                continue
            rss = p.memory_info().rss
        except psutil.Error:
            continue
        out[kind] += rss / 2**30
        out["n"] += kind == "python_workers"
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    root = psutil.Process(int(argv[0]))
    while root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
        s = sample(root)
        print(f"{time.strftime('%H:%M:%S')} jvm {s['jvm']:.2f} workers "
              f"{s['python_workers']:.2f} n {s['n']}", flush=True)
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
