"""The one place a SparkSession is made; master and settings come from config.

Which settings a session gets depends on its master, never on where it was started from:

- embedded master (``local[...]``): ``spark.settings`` (8 shuffle partitions, UI off, ...),
  the laptop/CI defaults; executors run this interpreter;
- a cluster master (``yarn``, ``spark://...``): only ``spark.cluster_settings`` (empty by
  default); every other key keeps the cluster's ``spark-defaults.conf``, and the executors'
  Python is ``spark.python`` or, when empty, the cluster's own.

Under spark-submit (``PYSPARK_GATEWAY_PORT`` set) the master comes from the command line, and
on the embedded master a key the command line (or spark-defaults.conf) set is never overridden.
The DAG builds that command line by the same rule (``jobs/airflow_dag.py``,
``submit_options``).

One key is the jobs' own, on every master: ``spark.sql.session.timeZone=UTC`` (date partitions,
planning windows and naive schedule timestamps are UTC).

Ctrl-C: PySpark's handler cancels the running jobs over py4j, which, when the interrupt lands
inside another py4j call, logs the clash with two tracebacks. A batch command that stops needs
no cancelling (the driver's JVM ends with it), so the session's handler only raises
KeyboardInterrupt, for :func:`jobs.cli.guarded` to print one line and exit 130; what py4j logs
about the calls that interrupt broke is not shown.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

from jobs.config import Config, embedded_master

REQUIRED = {"spark.sql.session.timeZone": "UTC"}


def session_settings(cfg: Config, master: str) -> dict[str, str]:
    """The settings recrawl asks for on ``master``: embedded defaults, or only the operator's
    explicit cluster keys (plus the required time zone)."""
    chosen = dict(cfg.spark.settings if embedded_master(master) else cfg.spark.cluster_settings)
    chosen.update(REQUIRED)
    return {key: str(value) for key, value in chosen.items()}


def _submitted_conf() -> dict[str, str]:
    """spark-submit's resolved settings (command line + spark-defaults.conf), from its JVM."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the gateway spark-submit started; no context yet
    return dict(SparkConf().getAll())


_interrupted = threading.Event()


def _interrupt(signum, frame):
    _interrupted.set()
    # The interrupt reaches the Python workers too; the JVM then hangs up on the driver's
    # accumulator server, whose handler would print that as an EOFError.
    server = _accumulator_server()
    if server is not None:
        server.handle_error = lambda request, client_address: None
    raise KeyboardInterrupt


def _accumulator_server():
    from pyspark import SparkContext

    return getattr(SparkContext._active_spark_context, "_accumulatorServer", None)


def _not_broken_by_an_interrupt(record: logging.LogRecord) -> bool:
    """py4j logs each JVM call and connection an interrupt broke, with its traceback (the
    calls on the root logger)."""
    return not (_interrupted.is_set() and f"{os.sep}py4j{os.sep}" in record.pathname)


PY4J_LOGGERS = ("", "py4j.clientserver", "py4j.java_gateway")


def end_jvm_after_interrupt() -> None:
    """After a Ctrl-C, end the JVM this process started (its tasks, whose Python workers the
    interrupt reached too, would log their failures while it winds down). Every write is a
    transaction, so this ends the run as a kill would."""
    if not _interrupted.is_set() or "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)  # None under spark-submit
    if proc is None or proc.poll() is not None:
        return
    server = _accumulator_server()
    if server is not None:  # stops within its 1 s poll, before the JVM hangs up
        server.shutdown()
    proc.kill()
    proc.wait(timeout=60)


@contextlib.contextmanager
def _sigint_kept(handler):
    """``handler`` for SIGINT from now on, even while PySpark starts its context (which
    installs its own at the end of its start; the SparkSession's takes seconds more)."""
    install = signal.signal

    def refuse_sigint(signum, new):
        return signal.getsignal(signum) if signum == signal.SIGINT else install(signum, new)

    install(signal.SIGINT, handler)
    signal.signal = refuse_sigint
    try:
        yield
    finally:
        signal.signal = install


def get_spark(cfg: Config, stage: str):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"{cfg.spark.app_name}-{stage}")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if submitted:
        # Under spark-submit the master comes from the command line; the embedded defaults
        # fill only keys nothing set, the operator's cluster keys are applied as the DAG's
        # --conf would apply them.
        given = _submitted_conf()
        master = given.get("spark.master", "")
        settings = session_settings(cfg, master)
        if embedded_master(master):
            settings = {k: v for k, v in settings.items() if k not in given or k in REQUIRED}
    else:
        master = cfg.spark.master
        builder = builder.master(master)
        settings = session_settings(cfg, master)
    # Executors run the interpreter named by the driver's PYSPARK_PYTHON (spark-submit sets it
    # from spark.pyspark.python). Embedded executors are this machine's: this interpreter.
    if embedded_master(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    elif cfg.spark.python and not submitted:
        os.environ["PYSPARK_PYTHON"] = cfg.spark.python
    for key, value in settings.items():
        builder = builder.config(key, value)
    if threading.current_thread() is threading.main_thread():
        for name in PY4J_LOGGERS:
            logging.getLogger(name).addFilter(_not_broken_by_an_interrupt)
        with _sigint_kept(_interrupt):
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
