"""infra/test.sh (what CI runs): a tier that collects no test fails unless the caller narrowed
the selection. Run against a stand-in venv whose ``python`` answers like pytest with a given
exit code, so the real script's logic is what is tested."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess

import pytest

from pathlib import Path

from tests.conftest import REPO as _REPO

REPO = Path(_REPO)


def _fake_venv(tmp_path, rc: int):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    py = venv / "bin" / "python"
    py.write_text(f'#!/usr/bin/env bash\necho "$@" >> {log}\nexit {rc}\n')
    py.chmod(0o755)
    (venv / "bin" / "recrawl").write_text("#!/bin/sh\n")
    (venv / "bin" / "recrawl").chmod(0o755)
    # setup.sh's stamps, so it finds the stand-in venv current and leaves it alone
    req = (REPO / "requirements.txt").read_bytes() + (REPO / "constraints.txt").read_bytes()
    want = hashlib.sha256(req).hexdigest()[:16]
    (venv / ".recrawl-stamp").write_text(want + "\n")
    project = (want + "\n").encode() + (REPO / "pyproject.toml").read_bytes()
    (venv / ".recrawl-project-stamp").write_text(hashlib.sha256(project).hexdigest()[:16] + "\n")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    cds = ((java.stdout + java.stderr + want + "\n").encode()
           + (REPO / "infra" / "spark_cds.py").read_bytes())
    (venv / ".recrawl-cds-stamp").write_text(hashlib.sha256(cds).hexdigest()[:16] + "\n")
    (venv / "spark-driver.jsa").write_bytes(b"")
    return venv, log


def _run(tmp_path, rc, *args):
    venv, log = _fake_venv(tmp_path, rc)
    env = {**os.environ, "RECRAWL_VENV": str(venv)}
    out = subprocess.run(["bash", str(REPO / "infra" / "test.sh"), *args], env=env,
                         capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines() if log.exists() else []
    return out, calls


@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium") or
                    subprocess.run(["sh", "-c", "command -v java"]).returncode != 0,
                    reason="setup.sh would try to install java/chromium")
class TestTiers:
    def test_an_empty_tier_fails_when_nothing_narrowed_it(self, tmp_path):
        out, calls = _run(tmp_path, 5)
        assert out.returncode != 0
        assert "no test collected" in out.stderr
        assert len(calls) == 1  # the fast tier failed; the e2e tier never ran

    def test_an_empty_tier_is_skipped_when_the_caller_narrowed_it(self, tmp_path):
        out, calls = _run(tmp_path, 5, "-k", "nothing_matches")
        assert out.returncode == 0, out.stderr
        assert "no test selected by the arguments given" in out.stdout
        assert len(calls) == 2 and "-m e2e" in calls[1]

    def test_both_tiers_run_and_a_failure_propagates(self, tmp_path):
        out, calls = _run(tmp_path, 0)
        assert out.returncode == 0 and len(calls) == 2
        out, _ = _run(tmp_path / "again", 1)
        assert out.returncode == 1

    def test_tiers_run_on_two_workers_unless_told_otherwise(self, tmp_path, monkeypatch):
        monkeypatch.delenv("RECRAWL_TEST_WORKERS", raising=False)
        _, calls = _run(tmp_path, 0)
        assert all(" -n 2 " in f" {c} " for c in calls), calls
        monkeypatch.setenv("RECRAWL_TEST_WORKERS", "0")
        _, calls = _run(tmp_path / "one", 0)
        assert len(calls) == 2 and all(" -n 0 " in f" {c} " for c in calls), calls


def test_files_sharing_the_demo_run_are_one_unit_of_work():
    """Parallel workers build a session fixture once each: every file that takes the demo's
    run (minutes of Spark and Airflow) must map to one scope, or the demo runs twice."""
    from tests.conftest import scope_of

    takes = re.compile(r"def \w+\([^)]*\bdemo_run\b")
    users = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                   if takes.search(p.read_text(encoding="utf-8")))
    assert len(users) >= 2, users
    assert len({scope_of(f"{u}::test_x") for u in users}) == 1, users
    assert scope_of("tests/core/test_plan.py::test_x[a::b]") == "tests/core/test_plan.py"


def test_the_longest_files_named_for_the_parallel_order_exist():
    from tests.conftest import LONGEST_FIRST

    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert all((REPO / path).is_file() for path in LONGEST_FIRST), LONGEST_FIRST
