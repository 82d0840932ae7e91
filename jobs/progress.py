"""Progress lines of a running stage: a background thread on the driver.

A stage's Spark work can run for minutes with nothing to show. While a stage's function
runs inside :func:`reporting`, a daemon thread wakes every ``interval_s`` seconds
(``spark.progress_interval_s``) and logs one line to the ``recrawl.progress`` logger::

    update_state: 90 s, rows read 1,204,332 (13,380/s), shuffle rows read 310,000 (3,444/s);
    stage 14 tasks 3/8

The figures are the driver's own status store (what Spark's UI shows), summed over the Spark
stages submitted since the reporter started: rows read from the input files, rows read from
shuffles, and each running stage's tasks done/total. Reading them starts no Spark job and
touches no data; a stage's figures grow as its tasks finish. Without an active Spark context
(not started yet, or a stage without Spark) a line says only how long the stage has run. A
failure to read the figures never fails the stage: the line then carries the time only.

The thread is stopped and joined when the function returns or raises; a stage that logged
a line gets a last one saying how it ended (totals, average rates). A stage shorter than one
interval logs nothing.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

log = logging.getLogger("recrawl.progress")


@dataclass(frozen=True)
class Figures:
    """What the driver knows about the Spark work since the reporter started."""

    rows_read: int = 0
    shuffle_rows_read: int = 0
    running: tuple = field(default_factory=tuple)  # (stage id, tasks done, tasks total)


class SparkFigures:
    """Reads :class:`Figures` from the active SparkContext's status store.

    The first call sets the baseline: a context active then has its stages up to then left
    out (earlier work of a shared session: tests, the backtest); a context that appears
    later, or replaces it, is counted from its first stage. ``None`` without an active
    SparkContext.
    """

    def __init__(self):
        self._sc = None
        self._store = None
        self._after_stage: Optional[int] = None

    def __call__(self) -> Optional[Figures]:
        pyspark = sys.modules.get("pyspark")  # never import Spark for a stage without it
        sc = getattr(getattr(pyspark, "SparkContext", None), "_active_spark_context", None)
        first_call = self._after_stage is None
        if sc is None:
            self._after_stage = -1
            return None
        if sc is not self._sc:
            # private[spark] in Scala, public in the bytecode: the store Spark's UI reads.
            self._sc, self._store = sc, sc._jsc.sc().statusStore()
            self._after_stage = -1
        stages = self._new_stages()
        if first_call:
            newest = next(stages, None)
            self._after_stage = -1 if newest is None else newest.stageId()
            return Figures()
        rows = shuffle = 0
        running = []
        for s in stages:
            rows += s.inputRecords()
            shuffle += s.shuffleReadRecords()
            if s.status().toString() == "ACTIVE":
                running.append((s.stageId(), s.numCompleteTasks(), s.numTasks()))
        return Figures(rows, shuffle, tuple(sorted(running)))

    def _new_stages(self) -> Iterator:
        """The stages above the baseline (stageList gives the newest first)."""
        store = self._store
        # stageList(statuses=all, details=False, withSummaries=False, quantiles, task statuses)
        it = store.stageList(None, False, False, getattr(store, "stageList$default$4")(),
                             getattr(store, "stageList$default$5")()).iterator()
        while it.hasNext():
            stage = it.next()
            if stage.stageId() <= self._after_stage:
                return
            yield stage


def _rate(delta: float, seconds: float) -> str:
    return f"{delta / seconds:,.0f}/s" if seconds > 0 else "-"


def describe(stage: str, elapsed_s: float, now: Optional[Figures],
             before: Optional[Figures], since_s: float) -> str:
    """One progress line; rates are over the ``since_s`` seconds since ``before``."""
    text = f"{stage}: {elapsed_s:.0f} s"
    if now is None:
        return text + ", no Spark figures yet"
    before = before or Figures()
    text += (f", rows read {now.rows_read:,} "
             f"({_rate(now.rows_read - before.rows_read, since_s)}), shuffle rows read "
             f"{now.shuffle_rows_read:,} "
             f"({_rate(now.shuffle_rows_read - before.shuffle_rows_read, since_s)})")
    if now.running:
        text += "; " + ", ".join(f"stage {sid} tasks {done}/{total}"
                                 for sid, done, total in now.running)
    return text


class Reporter:
    """The background thread of :func:`reporting` (one per running stage)."""

    def __init__(self, stage: str, interval_s: float,
                 figures: Callable[[], Optional[Figures]],
                 clock: Callable[[], float] = time.monotonic):
        if not interval_s > 0:
            raise ValueError(f"progress interval must be > 0 s, not {interval_s!r}")
        self.stage, self.interval_s, self._figures, self._clock = stage, interval_s, figures, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"recrawl-progress-{stage}",
                                        daemon=True)
        self._start = self._last_t = 0.0
        self._last: Optional[Figures] = None
        self.lines = 0

    def start(self) -> None:
        self._start = self._last_t = self._clock()
        self._sample()  # the baseline: stages before this one are not counted
        self._last = None
        self._thread.start()

    def stop(self, outcome: str) -> None:
        self._stop.set()
        # A tick blocked in the JVM must not hold the stage's exit for ever (daemon thread).
        self._thread.join(timeout=max(60.0, 2 * self.interval_s))
        if self._thread.is_alive():
            log.warning("%s: progress thread still busy, left behind", self.stage)
        if self.lines:  # a stage shorter than one interval stays quiet
            elapsed = self._clock() - self._start
            log.info("%s (%s)", describe(self.stage, elapsed, self._sample(), None, elapsed),
                     outcome)

    def _sample(self) -> Optional[Figures]:
        try:
            return self._figures()
        except Exception as err:  # noqa: BLE001 -- progress must never fail the stage
            log.debug("%s: no Spark figures (%s)", self.stage, err)
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            now_t, now = self._clock(), self._sample()
            log.info("%s", describe(self.stage, now_t - self._start, now, self._last,
                                    now_t - self._last_t))
            self.lines += 1
            self._last, self._last_t = now, now_t


@contextmanager
def reporting(stage: str, interval_s: float,
              figures: Optional[Callable[[], Optional[Figures]]] = None) -> Iterator[Reporter]:
    """Log ``stage``'s progress every ``interval_s`` seconds while the ``with`` body runs.

    ``figures`` reads the work done so far (default: :class:`SparkFigures`, the active
    SparkContext's status store). The thread is stopped and joined on the way out, whether
    the body returns or raises; if it logged anything, a last line says which.
    """
    reporter = Reporter(stage, interval_s, figures or SparkFigures())
    reporter.start()
    outcome = "failed"
    try:
        yield reporter
        outcome = "done"
    finally:
        reporter.stop(outcome)


def log_to_stderr() -> None:
    """Send progress lines to stderr when nothing else handles them (a stage's command line:
    spark-submit's driver output is what Airflow keeps in the task log). Lines then go to that
    handler only, so a root handler set up later (py4j's ``logging.exception`` calls
    ``basicConfig``) does not print each line twice."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
