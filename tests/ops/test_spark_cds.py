"""The Spark driver's class-data archive (``infra/spark_cds.py``): ``infra/env.sh`` points
``spark-submit`` at it when set-up recorded one, the driver JVM then maps its classes from it,
and a JVM that cannot use it (another class path) starts as before without a word."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

ARCHIVE = Path(sys.prefix) / "spark-driver.jsa"


def _sourced(venv: Path, twice: bool = False, extra: str | None = None) -> str:
    """SPARK_SUBMIT_OPTS after sourcing infra/env.sh with RECRAWL_VENV=venv."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    env["RECRAWL_VENV"] = str(venv)
    if extra is not None:
        env["SPARK_SUBMIT_OPTS"] = extra
    src = f"source {REPO}/infra/env.sh"
    out = subprocess.run(["bash", "-c", f"{src}; {src if twice else ':'}; "
                          'printf %s "${SPARK_SUBMIT_OPTS:-}"'],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def test_env_sh_uses_the_archive_only_when_set_up_recorded_one(tmp_path):
    assert _sourced(tmp_path) == ""
    (tmp_path / "spark-driver.jsa").write_bytes(b"")
    opts = _sourced(tmp_path)
    assert opts == (f"-XX:SharedArchiveFile={tmp_path}/spark-driver.jsa "
                    "-Xlog:cds=off,cds+dynamic=off")
    assert _sourced(tmp_path, twice=True) == opts  # sourced again: not added twice
    assert _sourced(tmp_path, extra="-Xmx2g") == opts + " -Xmx2g"  # the user's own kept


def _session(tmp_path: Path, opts: str, conf_dir: Path | None = None):
    env = {**os.environ, "SPARK_SUBMIT_OPTS": opts}
    env.pop("SPARK_CONF_DIR", None)
    if conf_dir is not None:
        env["SPARK_CONF_DIR"] = str(conf_dir)
    code = ("from pyspark.sql import SparkSession\n"
            "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
            ".getOrCreate()\n"
            "print('rows', s.range(7).count())\n"
            "s.stop()\n")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)


@pytest.mark.e2e
def test_the_driver_maps_its_classes_from_the_archive_and_ignores_it_silently_elsewhere(
        tmp_path):
    assert ARCHIVE.is_file(), f"{ARCHIVE}: infra/setup.sh records it (about a minute)"
    use = f"-XX:SharedArchiveFile={ARCHIVE} -Xlog:cds=off,cds+dynamic=off"
    log = tmp_path / "classes.log"
    run = _session(tmp_path, f"{use} -Xlog:class+load=info:file={log}")
    assert run.returncode == 0 and "rows 7" in run.stdout, run.stderr[-2000:]
    loaded = log.read_text()
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in loaded

    # Another class path (a SPARK_CONF_DIR of its own): the archive cannot be used, the JVM
    # starts anyway, and says nothing about it.
    conf = tmp_path / "conf"
    conf.mkdir()
    log.unlink()
    other = _session(tmp_path, f"{use} -Xlog:class+load=info:file={log}", conf)
    assert other.returncode == 0 and "rows 7" in other.stdout, other.stderr[-2000:]
    assert "shared objects file (top)" not in log.read_text()
    assert "cds" not in other.stdout + other.stderr
