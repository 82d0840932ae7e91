"""infra/test.sh (what CI runs): a tier that collects no test fails unless the caller narrowed
the selection. Run against a stand-in venv whose ``python`` answers like pytest with a given
exit code, so the real script's logic is what is tested."""
from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from pathlib import Path

from tests.conftest import REPO as _REPO

REPO = Path(_REPO)


def _fake_venv(tmp_path, rc: int, archive_rc: int = 0):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    py = venv / "bin" / "python"
    # tests.jvm_archive prints the JVM words (or fails); pytest logs its arguments and the
    # SPARK_SUBMIT_OPTS it was given.
    py.write_text('#!/usr/bin/env bash\n'
                  'if [ "$*" = "-m tests.jvm_archive" ]; then\n'
                  f'  echo "-XX:SharedArchiveFile=/x.jsa"; exit {archive_rc}\n'
                  'fi\n'
                  f'echo "$@ | ${{SPARK_SUBMIT_OPTS:-}}" >> {log}\nexit {rc}\n')
    py.chmod(0o755)
    (venv / "bin" / "recrawl").write_text("#!/bin/sh\n")
    (venv / "bin" / "recrawl").chmod(0o755)
    # setup.sh's stamps, so it finds the stand-in venv current and leaves it alone
    req = (REPO / "requirements.txt").read_bytes() + (REPO / "constraints.txt").read_bytes()
    want = hashlib.sha256(req).hexdigest()[:16]
    (venv / ".recrawl-stamp").write_text(want + "\n")
    project = (want + "\n").encode() + (REPO / "pyproject.toml").read_bytes()
    (venv / ".recrawl-project-stamp").write_text(hashlib.sha256(project).hexdigest()[:16] + "\n")
    return venv, log


def _run(tmp_path, rc, *args, archive_rc=0, opts=None):
    venv, log = _fake_venv(tmp_path, rc, archive_rc)
    env = {**os.environ, "RECRAWL_VENV": str(venv)}
    env.pop("SPARK_SUBMIT_OPTS", None)
    if opts is not None:
        env["SPARK_SUBMIT_OPTS"] = opts
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

    def test_both_tiers_get_the_jvm_archive_after_the_callers_options(self, tmp_path):
        out, calls = _run(tmp_path, 0, opts="-Xmx2g")
        assert out.returncode == 0, out.stderr
        assert [c.split(" | ")[1] for c in calls] == ["-Xmx2g -XX:SharedArchiveFile=/x.jsa"] * 2

    def test_the_tiers_run_without_the_archive_when_it_cannot_be_had(self, tmp_path):
        out, calls = _run(tmp_path, 0, archive_rc=1)
        assert out.returncode == 0, out.stderr
        assert [c.split(" | ")[1] for c in calls] == ["", ""]
