"""What the Spark benchmarks share: the peak-memory sampler and the per-stage JSON line.

Peak memory is the largest sum of RSS over this process and all its children (the JVM
driver/executor and the Python workers), sampled every 0.2 s with psutil: the driver
alone would miss most of a Spark stage's memory.
"""
from __future__ import annotations

import json
import threading
import time

import psutil


class PeakRSS:
    """Peak of the summed RSS of this process tree, sampled in a thread."""

    def __init__(self, interval=0.2):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    def _sample(self):
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me] + me.children(recursive=True):
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measure(fn):
    """Run ``fn()``; return (its result, wall seconds, peak tree RSS in bytes)."""
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        out = fn()
        secs = time.perf_counter() - t0
    return out, secs, mem.peak


def stage_line(name: str, secs: float, rows, peak_bytes: int) -> dict:
    """One stage's figures: seconds, state rows, state rows/s, peak RSS (GB)."""
    return {"stage": name, "seconds": round(secs, 1), "state_rows": rows,
            "rows_per_s": round(rows / secs) if rows and secs else None,
            "peak_rss_gb": round(peak_bytes / 2**30, 2)}


def timed(name, fn, rows):
    """Measure ``fn()``, print its stage line as JSON; return (result, line)."""
    out, secs, peak = measure(fn)
    line = stage_line(name, secs, rows, peak)
    print(json.dumps(line), flush=True)
    return out, line
