"""Packaging (issue 10 §2): the installed `recrawl` command runs every stage, and the example
production config is a valid, complete config."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO

RECRAWL = os.path.join(os.path.dirname(sys.executable), "recrawl")
PRODUCTION_TOML = os.path.join(REPO, "infra", "production", "recrawl.production.toml")

# every subcommand and an option its --help must document
SUBCOMMANDS = {
    "validate-logs": ["--date", "--config", "--set"],
    "update-state": ["--date", "--bootstrap", "--config"],
    "allocate": ["--date", "--config"],
    "build-schedule": ["--date", "--config"],
    "publish": ["--date", "--config", "publish.target"],
    "verify": ["--date", "--config", "publish.target"],
    "rebuild-state": ["--from", "--to", "--config"],
    "partitions": ["paths"],
    "explain": ["url", "--date", "--json", "--days", "--schedule", "--config", "--set"],
    "report": ["--date", "--days", "--top", "--out", "--config", "--set"],
    "status": ["--from", "--to", "--json", "--no-published", "--config", "--debug"],
    "stats": ["--date", "--host", "--top", "--json", "--config"],
    "dump": ["--date", "--table", "--host", "--where", "--format", "--out", "--config"],
    "intake": ["--date", "--config", "--set"],
    "import-warc": ["FILE", "--config"],
    "import-cdx": ["FILE", "--config"],
    "canonicalize-state": ["--date", "--config"],
    "plan-day": ["--date", "--config"],
    "preflight": ["--config"],
    "config": ["--config"],
    "dag-file": ["usage"],
}


def test_every_command_of_the_console_is_checked_here():
    from jobs.console import COMMANDS

    assert set(COMMANDS) == set(SUBCOMMANDS)


def _run(*args, cwd=None, env=None):
    """The console script as an operator runs it: outside the checkout, no PYTHONPATH."""
    env = dict(env or os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run([RECRAWL, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd or "/", env=env)


def test_console_script_is_installed_in_the_venv():
    assert os.access(RECRAWL, os.X_OK), "run infra/setup.sh (pip install -e . --no-deps)"
    with open(RECRAWL) as fh:
        assert "jobs.console" in fh.read()
    assert shutil.which("recrawl", path=os.path.dirname(sys.executable)) == RECRAWL


def test_recrawl_help_lists_every_stage():
    out = _run("--help")
    assert out.returncode == 0, out.stderr
    for name in SUBCOMMANDS:
        assert f"  {name} " in out.stdout, name
    assert "Exit status" in out.stdout
    assert _run().returncode == 0  # no command: the same help


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_each_subcommand_documents_itself(command):
    out = _run(command, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: recrawl {command} ")
    for option in SUBCOMMANDS[command]:
        assert option in out.stdout, (command, option)


def test_unknown_command_and_missing_date_fail_as_usage_errors():
    bad = _run("nosuch")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    no_date = _run("allocate")
    assert no_date.returncode == 2 and "--date" in no_date.stderr


def test_a_refusal_exits_2_through_the_console(tmp_path):
    """A real stage through the installed command: validate-logs on a root without the day's
    fetch logs is a named refusal (exit 2, one line), as with python -m jobs.validate_logs."""
    out = _run("validate-logs", "--date", "2026-11-05", "--set", f"paths.root={tmp_path}")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.startswith("recrawl validate-logs: error: ") and "fetch_logs" in out.stderr


def test_verify_of_a_missing_day_exits_4(tmp_path):
    out = _run("verify", "--date", "2026-11-05", "--set", f"publish.target={tmp_path / 'pub'}")
    assert out.returncode == 4, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and ": error: VerificationError: " in out.stderr


def test_python_dash_m_jobs_console_is_the_same_command():
    out = subprocess.run([sys.executable, "-m", "jobs.console", "--help"], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0 and "rebuild-state" in out.stdout


# --- infra/production/recrawl.production.toml -----------------------------------------------

def test_production_config_loads_and_sets_what_production_must_change():
    from jobs.config import Config, load_config

    cfg = load_config(PRODUCTION_TOML)  # unknown or mistyped keys raise ConfigError
    default = Config()
    assert cfg.paths.root.startswith("s3a://")
    assert cfg.publish.target.startswith("s3://")
    assert cfg.publish.endpoint_url is None and cfg.publish.allow_insecure_endpoint is False
    assert cfg.publish.sse_kms_key_id.startswith("arn:aws:kms:")
    assert cfg.airflow.py_files and cfg.airflow.py_files != default.airflow.py_files
    assert cfg.airflow.spark_conn_id == "recrawl_spark"
    assert cfg.airflow.alert_conn_id
    # the laptop's Spark settings must not override the cluster's spark-defaults.conf
    assert "spark.sql.shuffle.partitions" not in cfg.spark.settings
    assert "spark.ui.enabled" not in cfg.spark.settings
    assert not cfg.spark.master.startswith("local")
    for section, key in [("budget", "daily_fetches"), ("schedule", "n_shards"),
                         ("spark", "state_buckets"), ("airflow", "start_date")]:
        assert getattr(getattr(cfg, section), key) != getattr(getattr(default, section), key), key


def test_production_config_names_every_key_production_must_change():
    with open(PRODUCTION_TOML, "rb") as fh:
        raw = tomllib.load(fh)
    must = {"paths": {"root"},
            "publish": {"target", "endpoint_url", "sse_kms_key_id", "allow_insecure_endpoint"},
            "spark": {"master", "settings", "state_buckets"},
            "schedule": {"n_shards"}, "budget": {"daily_fetches"},
            "airflow": {"spark_conn_id", "py_files", "start_date", "catchup", "alert_conn_id",
                        "publish_deadline_h"}}
    for section, keys in must.items():
        assert keys <= set(raw.get(section, {})), (section, keys - set(raw.get(section, {})))
