"""The README's demo (e2e): several days planned with the simulated fleet executing each
schedule, and the summary's next commands run verbatim, each exiting 0 with output, in a
shell without any AWS credentials (the loopback S3 server needs none)."""
from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e


def _no_credentials_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_CONFIG_FILE": str(tmp_path / "none")})
    return env


def test_demo_summary_ends_with_next_commands_that_work_as_printed(demo_run, tmp_path):
    commands = demo_run["commands"]
    assert commands[0] == f"cd {REPO} && source infra/env.sh"
    kinds = [c.split()[1] if c.startswith("recrawl ") else c.split()[0] for c in commands[1:]]
    assert kinds == ["explain", "report", "python", "status", "stats"]
    env = _no_credentials_env(tmp_path)
    for command in commands[1:]:
        if command.startswith("#"):
            continue
        proc = subprocess.run(["bash", "-c", f"{commands[0]} && {command}"], env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
        assert proc.stdout.strip(), command
        if " explain " in command:  # the published schedule was read, over the loopback S3
            assert "NOT READABLE" not in proc.stdout and "Schedule 2026-11-30 (published" \
                in proc.stdout
            assert "State (state/dt=" in proc.stdout and "Plan (plan/dt=" in proc.stdout
        if " report " in command:
            out = command.split("--out ")[1].split()[0]
            page = open(os.path.join(REPO, out) if not os.path.isabs(out) else out).read()
            assert page.startswith("<!doctype html>")


def test_demo_plans_several_days_with_audits_and_alerts(demo_run):
    from jobs import metrics
    from jobs.config import load_config

    cfg = load_config(str(demo_run["workdir"] / "recrawl.toml"))
    audited = []
    for d in ("2026-11-27", "2026-11-28", "2026-11-29"):
        m = metrics.read(cfg, d)
        assert m["written_by"] == "build_schedule" and m["planned_total"] > 0, d
        if pd.notna(m.get("audit_freshness")):
            audited.append(d)
    assert len(audited) == 3
    assert "audited days: 3" in demo_run["stdout"]
    log = (demo_run["workdir"] / "demo-2026-11-29.log").read_text()
    # the DAG's report task ran each day and raised the threshold alert (floor 0.99)
    assert "recrawl alert threshold" in log
    for d in ("2026-11-26", "2026-11-29"):
        assert (demo_run["workdir"] / "data" / "reports" / f"dt={d}" / "report.html").exists()
