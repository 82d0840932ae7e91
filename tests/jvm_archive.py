"""A class-data-sharing archive for the test command's Spark driver JVMs.

The end-to-end tier starts a new driver JVM for every stage it runs as its own process (a
spark-submit, a ``python -m jobs.<stage>``, each DAG task), and each of them loads and
verifies the same tens of thousands of Spark classes from the jars. HotSpot's dynamic
class-data-sharing archive (JEP 350, JDK 13+) holds those classes as written out at the
exit of one JVM that ran a real day; a JVM started with ``-XX:SharedArchiveFile`` maps them
instead of loading them. The archive changes nothing a job computes, only its start.

``python -m tests.jvm_archive`` prints the ``SPARK_SUBMIT_OPTS`` words that use the archive
for this machine's JVM and jars, building it first if there is none (a tiny lab web: history,
rebuild_state, one day's plan_day, in one JVM; about a minute). infra/test.sh exports them.
Anything that goes wrong prints one line to stderr and nothing to stdout: the tests then run
without the archive, as before. An archive is written beside its final name and renamed only
after a JVM has started from it, since a truncated archive crashes the JVM that maps it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "jvm"
QUIET = "-Xlog:cds=off,cds+dynamic=off"  # HotSpot writes CDS warnings to stdout

WORKLOAD = """
import sys
from pathlib import Path
from jobs import plan_day, rebuild_state
from jobs.config import load_config
from jobs.paths import shift_day
from jobs.spark_session import get_spark
from lab.tools.demo import make_web, web_params

root = Path(sys.argv[1])
first, days = "2026-01-01", 4
make_web(root, web_params(300, 6, 0, first), days)
cfg = load_config(None, [f"paths.root={root}", "spark.master=local[2]",
                         "spark.state_buckets=2", "schedule.n_shards=2",
                         "spark.settings.spark.sql.shuffle.partitions=2"])
spark = get_spark(cfg, "jvm-archive")
last = shift_day(first, days - 1)
rebuild_state.run(cfg, first, shift_day(last, -1), spark)
plan_day.run(cfg, last, spark)
spark.stop()
"""

PROBE = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").appName("jvm-archive-probe").getOrCreate()
assert spark.range(3).count() == 3
spark.stop()
"""


def _key() -> str:
    """What the archive depends on: the JVM's build and the jars on Spark's class path."""
    import pyspark

    java = subprocess.run([_java(), "-version"], capture_output=True, text=True, check=True)
    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    text = "\n".join([java.stderr, pyspark.__version__, *listing])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _run(code: str, opts: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter whose Spark driver JVM gets ``opts``, after the caller's
    own SPARK_SUBMIT_OPTS less any archive they name (a JVM dumps only from the base one)."""
    env = dict(os.environ)
    given = [w for w in env.get("SPARK_SUBMIT_OPTS", "").split()
             if not w.startswith(("-XX:SharedArchiveFile=", "-Xlog:cds"))]
    env["SPARK_SUBMIT_OPTS"] = " ".join([*given, opts])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def build(path: Path, workload: str | None = None) -> None:
    """Write the archive of ``workload`` (Python code run with a work directory as its
    argument; :data:`WORKLOAD` if None) to ``path``: whole and started from once, or not at
    all (RuntimeError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as work:
        try:
            out = _run(workload or WORKLOAD, f"-XX:ArchiveClassesAtExit={part} {QUIET}", work)
            if out.returncode != 0 or not part.exists():
                raise RuntimeError(f"the workload failed (exit {out.returncode}): "
                                   f"{out.stderr.strip().splitlines()[-1:]}")
            probe = _run(PROBE, f"-XX:SharedArchiveFile={part} -Xshare:on {QUIET}")
            if probe.returncode != 0:
                raise RuntimeError(f"a JVM could not start from it (exit {probe.returncode})")
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)


def main() -> int:
    if shutil.which(_java()) is None:
        print("jvm_archive: no java: the tests run without the archive", file=sys.stderr)
        return 0
    try:
        path = CACHE / f"spark-{_key()}.jsa"
        if not path.exists():
            print(f"jvm_archive: building {path} for this machine's JVM and Spark jars "
                  "(about a minute, once)", file=sys.stderr, flush=True)
            build(path)
    except Exception as exc:  # an optimisation only: the tests run without it
        print(f"jvm_archive: not used: {exc}", file=sys.stderr)
        return 0
    print(f"-XX:SharedArchiveFile={path} {QUIET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
