"""The fleet's install on its own: the project's wheel with ``recrawl[fleet]`` in a fresh venv
(no system site-packages, no PYTHONPATH), where pyspark, Airflow and scipy are absent, runs
docs/fleet.md's program: it reads a day the planner published to the S3 server on loopback and
writes the fetcher's log back.

The wheel is built from a copy of the package (``pip wheel --no-deps``); the fleet's
dependencies come from a wheelhouse under ``var/wheelhouse`` (filled once with ``pip
download`` from the package index at constraints.txt's pins, then used offline).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.s3server import MotoS3Server, dummy_aws_env
from tests.fleet.test_fleet_docs import code_blocks, fetch_log_rows, fetcher_env, publish_today

pytestmark = pytest.mark.e2e

WHEELHOUSE = Path(REPO, "var", "wheelhouse")
ABSENT = ("pyspark", "airflow", "scipy", "moto", "pytest")
CHECK = f"""
import importlib.util, sys
import jobs, jobs.fleet.reader, jobs.fleet.fetch_log, jobs.fleet.fingerprint
from jobs.fleet.schedule import shard_of
assert jobs.__file__.startswith(sys.prefix), jobs.__file__
present = [m for m in {ABSENT!r} if importlib.util.find_spec(m) is not None]
assert not present, present
print(jobs.__file__)
"""


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=1200,
                          **kwargs)
    assert done.returncode == 0, f"{args}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


def fleet_requirements() -> list[str]:
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        meta = tomllib.load(fh)["project"]
    return meta["dependencies"] + meta["optional-dependencies"]["fleet"]


@pytest.fixture(scope="module")
def fleet_venv(tmp_path_factory):
    work = tmp_path_factory.mktemp("fleet_install")
    src = work / "src"
    shutil.copytree(os.path.join(REPO, "jobs"), src / "jobs",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), src / name)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "dist", src)
    (wheel,) = (work / "dist").glob("recrawl-*.whl")
    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv)  # no --system-site-packages
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS")}
    install = [python, "-m", "pip", "install", "-q", "--no-index", "--find-links", WHEELHOUSE,
               "-c", os.path.join(REPO, "constraints.txt"), f"{wheel}[fleet]"]
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    if subprocess.run([str(a) for a in install], env=env, capture_output=True).returncode:
        run(sys.executable, "-m", "pip", "download", "-q", "--dest", WHEELHOUSE,
            "-c", os.path.join(REPO, "constraints.txt"), *fleet_requirements())
        run(*install, env=env)
    return python


def test_the_fleet_install_imports_the_sdk_without_spark_airflow_or_scipy(fleet_venv):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = run(fleet_venv, "-c", CHECK, env=env, cwd=fleet_venv.parent).stdout
    assert "site-packages" in out and REPO not in out


def test_the_fleet_install_reads_a_published_day_from_s3_and_writes_its_log(fleet_venv,
                                                                             tmp_path):
    program = "\n".join(text for _, text in code_blocks("fleet.md"))
    with dummy_aws_env(), MotoS3Server() as server:
        day, rows = publish_today(server.endpoint_url, str(tmp_path / "staging"))
        run(fleet_venv, "-c", program, env=fetcher_env(server.endpoint_url), cwd=tmp_path)
        log = fetch_log_rows(server, day)
    assert log.num_rows == rows
