"""What the Spark benchmarks share: the peak-memory sampler and the per-stage JSON line.

Peak memory is the largest sum of RSS over this process and all its children (the JVM
driver/executor and the Python workers), sampled every 0.2 s with psutil: the driver
alone would miss most of a Spark stage's memory. Beside it, where that peak sat (the JVM,
the Python workers, this process) and the peak sum of PSS: forked Python workers share
pages with their daemon, which RSS counts once per process and PSS divides among them.
PSS is read every ``pss_every``-th sample only: reading it walks the page tables of an
8 GB JVM, and every 0.2 s that cost the benchmark a third of a core.

Beside the wall seconds, the CPU seconds (user + system) the same process tree spent in the
stage: on a shared machine another job's load stretches the wall time of a side-by-side pair
far more than it moves the work done. A process that started before the stage counts from
its first sample; one that ends between two samples loses at most its last 0.2 s.
"""
from __future__ import annotations

import json
import threading
import time

import psutil


def process_kind(proc, me) -> str:
    """``driver`` (this Python process), ``jvm`` (Spark's driver and executors in local
    mode), ``python_workers`` (the pyspark daemon and its workers) or ``spawned``
    (anything else: the ``chmod`` and ``jspawnhelper`` processes Hadoop's local file
    system starts for every file it commits).

    ``spawned`` is left out of the sums: between its clone and its exec such a child is
    named after the JVM thread that starts it and its RSS is the JVM's own pages, so one
    0.2 s sample could count the JVM twice (3.5 GB "Python workers" at 1M URLs)."""
    if proc.pid == me.pid:
        return "driver"
    name = proc.name()
    if name == "java":
        return "jvm"
    return "python_workers" if name.startswith("python") else "spawned"


class PeakRSS:
    """Peak of the summed RSS of this process tree, sampled in a thread; ``parts``: the
    RSS per :func:`process_kind` at that peak; ``peak_pss``: the peak summed PSS."""

    def __init__(self, interval=0.2, pss_every=25):
        self.interval, self.pss_every, self.peak, self.peak_pss = interval, pss_every, 0, 0
        self.parts: dict[str, int] = {}
        self._cpu: dict[int, list[float]] = {}  # pid -> [at the start, at the last sample]
        self._stop = threading.Event()

    @property
    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the process tree between the start and the stop."""
        return sum(last - first for first, last in self._cpu.values())

    def _cpu_sample(self, p, started: float) -> None:
        t = p.cpu_times()
        used = t.user + t.system
        if p.pid not in self._cpu:  # a process born during the stage counts from zero
            self._cpu[p.pid] = [used if p.create_time() < started else 0.0, used]
        self._cpu[p.pid][1] = used

    def _sample(self):
        me = psutil.Process()
        n, started = 0, time.time()
        while True:
            stopping = self._stop.is_set()
            parts, pss, with_pss = {}, 0, n % self.pss_every == 0
            for p in [me] + me.children(recursive=True):
                try:
                    kind = process_kind(p, me)
                    self._cpu_sample(p, started)
                    if kind == "spawned":
                        continue
                    rss = p.memory_info().rss
                    if with_pss:
                        pss += getattr(p.memory_full_info(), "pss", rss)
                except psutil.Error:
                    continue
                parts[kind] = parts.get(kind, 0) + rss
            total = sum(parts.values())
            if total > self.peak:
                self.peak, self.parts = total, parts
            self.peak_pss = max(self.peak_pss, pss)
            n += 1
            if stopping:
                break
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measure(fn):
    """Run ``fn()``; return (its result, wall seconds, the :class:`PeakRSS` sampler)."""
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        out = fn()
        secs = time.perf_counter() - t0
    return out, secs, mem


def gb(n_bytes) -> float:
    return round(n_bytes / 2**30, 2)


def stage_line(name: str, secs: float, rows, mem: PeakRSS) -> dict:
    """One stage's figures: seconds, state rows, state rows/s, peak RSS (GB), where that
    peak sat, and the peak PSS (GB)."""
    return {"stage": name, "seconds": round(secs, 1), "state_rows": rows,
            "rows_per_s": round(rows / secs) if rows and secs else None,
            "cpu_seconds": round(mem.cpu_seconds, 1),
            "peak_rss_gb": gb(mem.peak),
            "peak_rss_parts_gb": {k: gb(v) for k, v in sorted(mem.parts.items())},
            "peak_pss_gb": gb(mem.peak_pss)}


def timed(name, fn, rows):
    """Measure ``fn()``, print its stage line as JSON; return (result, line)."""
    out, secs, mem = measure(fn)
    line = stage_line(name, secs, rows, mem)
    print(json.dumps(line), flush=True)
    return out, line
