"""One errors module, one line per refusal: every case a person can cause runs the real
command (``python -m jobs.console ...`` in a subprocess) and must print exactly one line on
stderr, no traceback, and exit with the documented code. No Spark: each is refused first."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pandas as pd
import pytest

from jobs import errors, partitions, storage
from tests.conftest import REPO

D = "2026-11-29"


def _recrawl(*args, cwd=None, env=None):
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "jobs.console", *args], capture_output=True,
                         text=True, timeout=300, cwd=cwd or "/",
                         env={**os.environ, **(env or {})})
    out.seconds = time.monotonic() - started
    return out


def _one_line_refusal(out, code=2, *needles):
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and lines[0].startswith("recrawl ")
    assert ": error: " in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _commit(root, table, day, frame):
    """A committed partition of ``frame`` written with pandas (no Spark)."""
    path = f"{root}/{table}/dt={day}"
    os.makedirs(path, exist_ok=True)
    name = f"{path}/part-00000-00000000-0000-0000-0000-000000000000-c000.snappy.parquet"
    frame.to_parquet(name, index=False)
    partitions.commit_files(path, table, [name])
    return path


# --- the module and the README's table --------------------------------------------------------

def test_readme_exit_code_table_is_the_generated_one():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    found = re.search(r"<!-- exit-codes:start -->\n(.*?)\n<!-- exit-codes:end -->", readme, re.S)
    assert found, "README.md lost its exit-code table markers"
    assert found.group(1).strip() == errors.markdown().strip(), \
        "regenerate: python -m jobs.errors --markdown"


def test_every_refusal_has_a_documented_exit_code_and_old_import_paths_still_work():
    for cls in errors.classes():
        assert cls.exit_code in errors.EXIT_CODES and cls.exit_code not in (0, 1), cls
    from jobs.build_schedule import AbsurdScheduleError
    from jobs.config import ConfigError
    from jobs.ingest import MixedFingerprintVersions
    from jobs.notify import WebhookError
    from jobs.objstore import ObjectAccessDenied, ObjectNotFound, PreconditionFailed
    from jobs.partitions import ConcurrentWriteError, MissingPartitionError
    from jobs.publish import PublishConflict, PublishError
    from jobs.schemas import SchemaError
    from jobs.verify import VerificationError

    for cls in (AbsurdScheduleError, ConfigError, MixedFingerprintVersions, WebhookError,
                ObjectAccessDenied, ObjectNotFound, PreconditionFailed, ConcurrentWriteError,
                MissingPartitionError, PublishConflict, PublishError, SchemaError,
                VerificationError):
        assert cls.__module__ == "jobs.errors" and issubclass(cls, errors.RecrawlError), cls
    assert errors.exit_code(PublishConflict("x")) == errors.EXIT_LOST
    assert errors.exit_code(KeyError("x")) is None
    from jobs.core.times import TimestampOutOfRange

    assert errors.exit_code(TimestampOutOfRange("c", 1, 1e30)) == errors.EXIT_REFUSED


def test_every_foreign_refusal_names_a_real_exception_class():
    import importlib

    for name in errors.FOREIGN:
        module, _, cls = name.rpartition(".")
        found = getattr(importlib.import_module(module), cls)
        assert isinstance(found, type) and issubclass(found, Exception), name


def test_a_multi_line_message_becomes_one_line():
    line = errors.one_line(errors.VerificationError(["a is wrong", "b is wrong"]))
    assert line == "VerificationError: 2 problem(s): a is wrong; b is wrong"


# --- the error list, each through the real command -------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["update-state", "--date", "2026-11-31"], "'2026-11-31' is not a date"),
    (["validate-logs", "--date", "29/11/2026"], "'29/11/2026' is not a date"),
    (["explain", "https://a.example/", "--date", "2026-02-30"], "is not a date"),
    (["rebuild-state", "--from", "2026-11-01", "--to", "2026-13-01"], "is not a date"),
    (["status", "--to", "yesterday"], "is not a date"),
])
def test_a_date_that_is_not_a_calendar_date_is_refused_at_parsing(args, needle):
    _one_line_refusal(_recrawl(*args), 2, needle, "--")


def test_config_refusals_are_one_line(tmp_path):
    out = _recrawl("update-state", "--date", D, "--set", "budget.daily_fetchez=10")
    _one_line_refusal(out, 2, "ConfigError", "daily_fetchez")
    out = _recrawl("allocate", "--date", D, "--set", "budget.daily_fetches=many")
    _one_line_refusal(out, 2, "ConfigError", "budget.daily_fetches")
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\ndaily_fetchez = 10\n")
    _one_line_refusal(_recrawl("report", "--date", D, "--config", str(bad)), 2, "ConfigError")
    bad.write_text("[budget]\nfast_share = 2.0\n")
    _one_line_refusal(_recrawl("stats", "--date", D, "--config", str(bad)), 2,
                      "budget.fast_share")
    bad.write_text("[budget\n")
    _one_line_refusal(_recrawl("status", "--config", str(bad)), 2, "ConfigError", str(bad))
    _one_line_refusal(_recrawl("dump", "--date", D, "--table", "state", "--config",
                               str(tmp_path / "none.toml")), 2, "ConfigError")


def test_missing_inputs_are_refused_before_spark_starts(tmp_path):
    root = str(tmp_path)
    sets = ["--set", f"paths.root={root}"]
    out = _recrawl("validate-logs", "--date", D, *sets)
    _one_line_refusal(out, 2, "SchemaError", "fetch_logs", "--no-fetches")
    out = _recrawl("update-state", "--date", D, *sets)
    _one_line_refusal(out, 2, "MissingPartitionError", f"state/dt=2026-11-28")
    # Yesterday committed but no logs today: refused from the footers, before any JVM.
    _commit(root, "state", "2026-11-28", pd.DataFrame({"url": ["https://a.example/"]}))
    _commit(root, "hosts", "2026-11-28", pd.DataFrame({"host": ["a.example"]}))
    out = _recrawl("update-state", "--date", D, *sets)
    _one_line_refusal(out, 2, "SchemaError", f"fetch_logs/dt={D}", "no Parquet files")
    assert out.seconds < 60  # a Spark session alone takes longer on this machine's 2 cores
    for table in ("allocate", "build-schedule"):
        _one_line_refusal(_recrawl(table, "--date", D, *sets), 2, "MissingPartitionError")
    for args in (["report", "--date", D], ["stats", "--date", D],
                 ["dump", "--date", D, "--table", "plan"], ["explain", "https://a.example/",
                                                            "--date", D]):
        _one_line_refusal(_recrawl(*args, *sets), 2, "MissingPartitionError")
    assert not os.path.exists(f"{root}/_runs/dt={D}"), "a refusal wrote a run record"


def test_bootstrap_on_top_of_history_is_refused(tmp_path):
    root = str(tmp_path)
    _commit(root, "state", "2026-11-28", pd.DataFrame({"url": ["https://a.example/"]}))
    out = _recrawl("update-state", "--date", D, "--bootstrap", "--set", f"paths.root={root}")
    _one_line_refusal(out, 2, "BootstrapRefused", "rebuild-state")


def test_partitions_on_a_committed_or_missing_path(tmp_path):
    committed = _commit(str(tmp_path), "state", D, pd.DataFrame({"url": ["x"]}))
    _one_line_refusal(_recrawl("partitions", committed), 2, "AlreadyCommitted")
    _one_line_refusal(_recrawl("partitions", str(tmp_path / "state" / "dt=2026-01-01")), 2,
                      "MissingPartitionError", "_SUCCESS")


def test_explain_an_unknown_url_says_url_not_known(tmp_path):
    root = str(tmp_path)
    row = pd.DataFrame({"url": ["https://a.example/p"], "host": ["a.example"]})
    _commit(root, "state", D, row)
    _commit(root, "plan", D, row)
    out = _recrawl("explain", "https://b.example/q", "--date", D, "--set", f"paths.root={root}")
    _one_line_refusal(out, 2, "URL not known", "https://b.example/q")


def test_debug_shows_the_traceback_and_keeps_the_exit_code(tmp_path):
    out = _recrawl("--debug", "update-state", "--date", D, "--set", f"paths.root={tmp_path}")
    assert out.returncode == 2 and "Traceback" in out.stderr
    assert out.stderr.splitlines()[-1].startswith("recrawl update-state: error: ")
    out = _recrawl("update-state", "--date", D, "--set", f"paths.root={tmp_path}",
                   env={"RECRAWL_DEBUG": "1"})
    assert out.returncode == 2 and "Traceback" in out.stderr


def test_rebuild_and_outage_refusals(tmp_path):
    sets = ["--set", f"paths.root={tmp_path}"]
    out = _recrawl("rebuild-state", "--from", D, "--to", "2026-11-01", *sets)
    _one_line_refusal(out, 2, "UsageError", "before")
    out = _recrawl("rebuild-state", "--from", "2026-11-01", "--to", "2026-11-02", *sets)
    _one_line_refusal(out, 2, "SchemaError", "fetch_logs/dt=2026-11-01")
    # A day with logs cannot be declared an outage.
    logs = tmp_path / "fetch_logs" / f"dt={D}"
    logs.mkdir(parents=True)
    pd.DataFrame({"url": ["https://a.example/"]}).to_parquet(logs / "part-0.parquet")
    out = _recrawl("update-state", "--date", D, "--no-fetches", *sets)
    _one_line_refusal(out, 2, "OutageRefused", "did fetch")
    assert not os.path.exists(logs / "_NO_FETCHES.json")


def test_dump_where_cannot_read_files(tmp_path):
    root = str(tmp_path)
    _commit(root, "state", D, pd.DataFrame({"url": ["https://a.example/p"],
                                            "host": ["a.example"], "lambda_hat": [0.5]}))
    for where in ("url IN (SELECT * FROM read_text('/etc/passwd'))",
                  "lambda_hat > 0) UNION ALL (SELECT * FROM read_csv('/etc/passwd')",
                  "no_such_column = 1"):
        out = _recrawl("dump", "--date", D, "--table", "state", "--where", where,
                       "--set", f"paths.root={root}")
        _one_line_refusal(out, 2, "UsageError", "--where")
        assert "root:" not in out.stdout


def _full_disk_at(limit_bytes):
    """A ``preexec_fn``: files of the child process cannot grow past ``limit_bytes`` (as on a
    full disk, the write fails with EFBIG instead of the process being killed)."""
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return limit


def test_an_output_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path):
    root = str(tmp_path / "root")
    _commit(root, "state", D, pd.DataFrame({"url": [f"https://a.example/p{i}" for i in range(4000)],
                                            "host": ["a.example"] * 4000,
                                            "lambda_hat": [0.5] * 4000}))
    sets = ["--date", D, "--table", "state", "--set", f"paths.root={root}"]
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    for out, reason in ((tmp_path, "is a directory"),
                        (tmp_path / "no-such-dir" / "s.csv", "No such file or directory"),
                        (a_file / "s.csv", "Not a directory")):
        _one_line_refusal(_recrawl("dump", *sets, "--out", str(out)), 2, "OutputError",
                          f"--out {out}", reason)
    assert sorted(os.listdir(tmp_path)) == ["a-file", "root"]
    # The disk fills half way: the earlier file at --out is left whole, no part file stays.
    out = tmp_path / "s.parquet"
    out.write_bytes(b"yesterday's export")
    cmd = [sys.executable, "-m", "jobs.console", "dump", *sets, "--format", "parquet",
           "--out", str(out)]
    full = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/",
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                          preexec_fn=_full_disk_at(8_000))
    _one_line_refusal(full, 2, "OutputError", f"--out {out}", "File too large")
    assert out.read_bytes() == b"yesterday's export"
    assert sorted(os.listdir(tmp_path)) == ["a-file", "root", "s.parquet"]
    # With room, the same command replaces it whole.
    done = _recrawl("dump", *sets, "--format", "parquet", "--out", str(out))
    assert done.returncode == 0 and done.stdout.strip() == f"4000 rows -> {out}", done.stderr
    assert pd.read_parquet(out)["url"].tolist() == [f"https://a.example/p{i}" for i in range(4000)]


def test_a_part_file_a_killed_writer_left_is_removed_by_the_next_write(tmp_path):
    from jobs.cli import ABANDONED_PART_S, output_file

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead, live = int(gone.stdout), os.getpid()
    old = time.time() - ABANDONED_PART_S - 60
    parts = {"abandoned": f".s.csv.{dead}.k2j4.part", "recent": f".s.csv.{dead}.x9q1.part",
             "running": f".s.csv.{live}.a8b7.part", "other output": f".t.csv.{dead}.z1.part",
             "not ours": ".s.csv.notes.part"}
    for label, name in parts.items():
        (tmp_path / name).write_text(label)
        if label != "recent":
            os.utime(tmp_path / name, (old, old))
    with output_file(str(tmp_path / "s.csv")) as fh:
        fh.write(b"url\n")
    left = set(os.listdir(tmp_path))
    assert left == {"s.csv", *parts.values()} - {parts["abandoned"]}


def test_an_object_store_that_does_not_answer_is_one_line_and_exit_5(tmp_path):
    import socket

    from jobs.paths import schedule_date
    from tests.s3server import sample_schedule, stage_schedule

    with socket.socket() as sock:  # a loopback port nobody listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sets = ["--date", D, "--set", f"paths.root={tmp_path}", "--set", "publish.target=s3://b/p",
            "--set", f"publish.endpoint_url=http://127.0.0.1:{port}", "--set",
            "publish.retries=2"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    staged = tmp_path / "schedules" / f"dt={schedule_date(D)}" / "_shards.json"
    _one_line_refusal(_recrawl("publish", *sets, env=env), 2, "MissingPartitionError",
                      f"[schedules] {staged}: no staged schedule")
    stage_schedule(sample_schedule(), str(staged.parent))
    for command in ("publish", "verify"):
        _one_line_refusal(_recrawl(command, *sets, env=env), errors.EXIT_INCOMPLETE,
                          "EndpointConnectionError", f"http://127.0.0.1:{port}/b/")


def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(tmp_path):
    # recrawl dump ... | head -1: no BrokenPipeError traceback, exit 0.
    root = str(tmp_path)
    _commit(root, "state", D, pd.DataFrame({"url": [f"https://a.example/p{i}" for i in range(20000)],
                                            "host": ["a.example"] * 20000}))
    proc = subprocess.Popen([sys.executable, "-m", "jobs.console", "dump", "--date", D, "--table",
                             "state", "--set", f"paths.root={root}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd="/")
    first = proc.stdout.readline()
    proc.stdout.close()  # 20,000 rows are far more than a pipe's buffer: the next write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0 and err == "", err
    assert first.startswith(b'"url","host"')
