"""intake and import-warc killed half way, and two runs of one date at once.

As tests/stages/test_state_safety.py does for update_state: a real ``python -m`` process is
stopped at a commit point (``jobs.partitions``' test-only pause: between a partition's new
files and its marker, or just after the marker) and SIGKILLed there (its whole process group:
the driver and its JVM), or let go on while another run commits the same partition. Then
what readers see is compared with an undisturbed run, row for row: nothing partial is ever
readable, a rerun gives the undisturbed result, and two runs at once end as one run's result
(the other, when it lost, refused with ConcurrentWriteError, exit 3).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import ingest, partitions, schemas, snapshots, storage, validate_logs
from jobs.errors import EXIT_LOST, SchemaError
from jobs.import_archive import import_files
from tests.conftest import REPO, make_config
from tests.stages.archive_files import sample_warc

pytestmark = pytest.mark.e2e  # subprocess fault injection (tests/conftest.py)

SETS = ["spark.master=local[2]", "spark.state_buckets=2", "schedule.n_shards=4",
        "spark.settings.spark.sql.shuffle.partitions=2"]


# --- a stage as its own process, stopped at a commit point ---------------------------------

def _start(cmd: list[str], tmp_path, pause: str | None = None):
    """Start ``python -m <cmd>`` in its own process group; with ``pause`` ("table:point"),
    it stops there after writing the note (returned path)."""
    note = tmp_path / f"paused-{pause or 'none'}-{time.monotonic_ns()}.json".replace(":", "-")
    env = dict(os.environ)
    if pause:
        env.update({partitions.PAUSE_ENV: pause, partitions.PAUSE_NOTE_ENV: str(note)})
    with open(f"{note}.out", "w") as out:  # files, not pipes: a paused writer never blocks
        proc = subprocess.Popen([sys.executable, "-m", *cmd], cwd=REPO, start_new_session=True,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    proc.output = f"{note}.out"
    return proc, note


def _output(proc) -> str:
    with open(proc.output) as fh:
        return fh.read()[-3000:]


def _paused(proc, note, timeout_s=300) -> dict:
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline and not note.exists():
        time.sleep(0.02)
    if not note.exists():
        _kill(proc)
        raise AssertionError(f"never reached its pause (rc {proc.returncode}): {_output(proc)}")
    return json.loads(note.read_text())


def _kill(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _go_on(proc, note, timeout_s=300) -> tuple[int, str]:
    """Let a paused process go on (past every later pause too); its exit status and output."""
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if note.exists():
                note.unlink()
            time.sleep(0.02)
    finally:
        _kill(proc)
    return proc.returncode, _output(proc)


# --- import-warc ------------------------------------------------------------------------------

D1, D2 = "2026-11-20", "2026-11-21"


def _import_cmd(root, warc) -> list[str]:
    return ["jobs.console", "import-warc", str(warc), "--set", f"paths.root={root}"]


def _logs(cfg, day) -> list[dict]:
    """The day's fetch-log rows as every reader takes them (partitions.visible_files)."""
    files = partitions.visible_files(cfg.paths.table("fetch_logs", day))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: (r["fetched_at"], r["url"], r["status"]))


@pytest.fixture(scope="module")
def warc(tmp_path_factory):
    return sample_warc(tmp_path_factory.mktemp("warc") / "crawl.warc.gz")


@pytest.fixture(scope="module")
def clean_import(warc, tmp_path_factory):
    cfg = make_config(tmp_path_factory.mktemp("clean_import") / "data")
    import_files(cfg, [str(warc)], "warc")
    logs = {d: _logs(cfg, d) for d in (D1, D2)}
    assert len(logs[D1]) == len(logs[D2]) == 3
    return logs


def test_import_killed_before_its_marker_leaves_nothing_readable_then_a_rerun_is_whole(
        warc, clean_import, tmp_path):
    root = tmp_path / "data"
    cfg = make_config(root)
    proc, note = _start(_import_cmd(root, warc), tmp_path, "fetch_logs:files_written")
    where = _paused(proc, note)
    _kill(proc)
    # Where the kill landed: the file's parts of both days are on disk, no marker names them.
    day1 = cfg.paths.table("fetch_logs", D1)
    assert where["path"] == day1 and set(where["files"]) <= set(os.listdir(day1))
    assert not [n for n in os.listdir(day1) if n.startswith(partitions.IMPORT_MARKER_PREFIX)]
    for day in (D1, D2):  # every reader sees no day, not a part of one
        assert storage.list_parquet_files(cfg.paths.table("fetch_logs", day))
        assert _logs(cfg, day) == [] and not validate_logs.logs_present(cfg, day)
        with pytest.raises(SchemaError, match="no Parquet files found"):
            ingest.checked_footers(schemas.FETCH_LOG, cfg.paths.table("fetch_logs", day), True)
    import_files(cfg, [str(warc)], "warc")
    assert {d: _logs(cfg, d) for d in (D1, D2)} == clean_import


def test_ctrl_c_half_way_is_one_line_exit_130_and_leaves_nothing_readable(
        warc, clean_import, tmp_path):
    # Ctrl-C signals the terminal's foreground process group: the command and its children.
    root = tmp_path / "data"
    cfg = make_config(root)
    proc, note = _start(_import_cmd(root, warc), tmp_path, "fetch_logs:files_written")
    _paused(proc, note)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    said = _output(proc).strip().splitlines()
    assert "Traceback" not in _output(proc)
    assert said[-1] == ("recrawl import-warc: interrupted: what was committed stays committed; "
                        "rerun to finish")
    for day in (D1, D2):
        assert _logs(cfg, day) == [] and not validate_logs.logs_present(cfg, day)
    import_files(cfg, [str(warc)], "warc")
    assert {d: _logs(cfg, d) for d in (D1, D2)} == clean_import


def test_import_killed_between_its_days_commits_whole_days_only(warc, clean_import, tmp_path):
    root = tmp_path / "data"
    cfg = make_config(root)
    proc, note = _start(_import_cmd(root, warc), tmp_path, "fetch_logs:marker_written")
    where = _paused(proc, note)
    _kill(proc)
    assert where["path"] == cfg.paths.table("fetch_logs", D1)  # the first day's commit
    assert _logs(cfg, D1) == clean_import[D1]  # committed: whole
    assert _logs(cfg, D2) == []  # its parts are written, its marker never was
    import_files(cfg, [str(warc)], "warc")
    assert {d: _logs(cfg, d) for d in (D1, D2)} == clean_import
    for day in (D1, D2):  # one marker per day, naming files that are there
        base = cfg.paths.table("fetch_logs", day)
        (marker,) = [n for n in os.listdir(base) if n.startswith(partitions.IMPORT_MARKER_PREFIX)]
        named = {e["name"] for e in storage.read_json(f"{base}/{marker}")["files"]}
        assert named <= set(os.listdir(base))


def test_two_imports_of_one_file_at_once_end_as_one_import(warc, clean_import, tmp_path):
    """B has written its parts and is about to commit when A imports the same file from
    start to end; then B commits. B's parts must survive A's commit, and B's replace A's."""
    root = tmp_path / "data"
    cfg = make_config(root)
    proc, note = _start(_import_cmd(root, warc), tmp_path, "fetch_logs:files_written")
    b_parts = set(_paused(proc, note)["files"])
    import_files(cfg, [str(warc)], "warc")  # A, whole, while B waits at its commit
    assert {d: _logs(cfg, d) for d in (D1, D2)} == clean_import
    assert b_parts <= set(os.listdir(cfg.paths.table("fetch_logs", D1)))  # A left B's alone
    rc, err = _go_on(proc, note)
    assert rc == 0, err
    assert {d: _logs(cfg, d) for d in (D1, D2)} == clean_import
    files = {os.path.basename(f) for f in partitions.visible_files(cfg.paths.table("fetch_logs",
                                                                                   D1))}
    assert files == b_parts  # B's commit is the day's, and only it


def test_two_imports_started_together_end_as_one_import(warc, clean_import, tmp_path):
    root = tmp_path / "data"
    cfg = make_config(root)
    procs = [_start(_import_cmd(root, warc), tmp_path)[0] for _ in range(2)]
    outcomes = [(p.wait(timeout=120), _output(p)) for p in procs]
    assert [rc for rc, _ in outcomes] == [0, 0], outcomes
    assert {d: _logs(cfg, d) for d in (D1, D2)} == clean_import


# --- intake ---------------------------------------------------------------------------------

D, D0 = "2026-11-29", "2026-11-28"
AT = datetime(2026, 11, 29, 12, tzinfo=timezone.utc)
FIXTURES = os.path.join(REPO, "tests", "fixtures", "intake")
TABLES = ("signals", "host_policy", "document_refs")


def _intake_inputs(root) -> None:
    """A handful of documents, upstream's committed host_policy of D-1 and signals of D."""
    from jobs.fleet.documents import DocumentWriter

    def fixture(name):
        with open(os.path.join(FIXTURES, name), "rb") as fh:
            return fh.read()

    old = root / "host_policy" / f"dt={D0}"
    old.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([
        {"host": "ops.example", "crawl_delay_s": 20.0, "max_fetches_per_day": 100,
         "source": None},
        {"host": "b.example", "crawl_delay_s": 99.0, "max_fetches_per_day": None,
         "source": "robots"}], schema=schemas.HOST_POLICY.arrow_schema()),
        str(old / "part-upstream.parquet"))
    (old / "_SUCCESS").touch()
    (root / "signals" / f"dt={D}").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([
        {"url": "https://z.example/pushed", "signaled_at": AT, "source": "indexnow"}],
        schema=schemas.SIGNALS.arrow_schema()),
        str(root / "signals" / f"dt={D}" / "part-upstream.parquet"))
    with DocumentWriter(str(root / "documents" / f"dt={D}"), date=D) as w:
        for url, kind, body in (
                ("https://a.example/robots.txt", "robots", fixture("robots_1e9.txt")),
                ("https://b.example/robots.txt", "robots", fixture("robots_agent.txt")),
                ("https://a.example/sitemap.xml", "sitemap", fixture("sitemap.xml")),
                ("https://a.example/sitemap_index.xml", "sitemap", fixture("sitemap_index.xml")),
                ("https://a.example/feed.atom", "feed", fixture("atom.xml")),
                ("https://a.example/lol.xml", "sitemap", fixture("billion_laughs.xml"))):
            w.write({"url": url, "kind": kind, "fetched_at": AT, "status": 200, "body": body})


def _cfg(root):
    return make_config(root, "intake.enabled=true", *SETS[3:])


def _intake_cmd(root) -> list[str]:
    return (["jobs.intake", "--date", D, "--set", f"paths.root={root}", "--set",
             "intake.enabled=true"] + [a for s in SETS for a in ("--set", s)])


def _rows(files) -> list[tuple]:
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    return sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows)


def _table(root, table) -> list[tuple]:
    return _rows(partitions.committed_files(str(root / table / f"dt={D}"), table))


def _committed(root) -> dict:
    """What readers of D take: each table's committed rows, the day's quarantine."""
    out = {t: _table(root, t) for t in TABLES}
    out["quarantine"] = _rows(storage.list_parquet_files(
        str(root / "quarantine" / f"dt={D}" / "source=documents")))
    return out


@pytest.fixture(scope="module")
def intake_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("intake_inputs") / "data"
    _intake_inputs(root)
    return root


@pytest.fixture(scope="module")
def clean_intake(spark, intake_inputs, tmp_path_factory):
    from jobs import intake

    root = tmp_path_factory.mktemp("clean_intake") / "data"
    shutil.copytree(intake_inputs, root)
    record = intake.run(_cfg(root), D, spark)
    tables = _committed(root)
    assert tables["signals"] and tables["host_policy"] and tables["document_refs"]
    assert tables["quarantine"]  # the billion laughs
    return {"tables": tables, "record": record, "root": root}


def _copy(src, tmp_path):
    return shutil.copytree(src, tmp_path / "data")


@pytest.mark.parametrize("pause", ["host_policy:files_written", "document_refs:marker_written"])
def test_intake_killed_half_way_leaves_no_partial_table_then_a_rerun_is_whole(
        spark, intake_inputs, clean_intake, tmp_path, pause):
    from jobs import intake

    root = _copy(intake_inputs, tmp_path)
    cfg = _cfg(root)
    proc, note = _start(_intake_cmd(root), tmp_path, pause)
    where = _paused(proc, note)
    _kill(proc)
    table, point = pause.split(":")
    assert where["table"] == table and where["files"]
    # signals were committed before the kill: whole, upstream's row kept
    assert _table(root, "signals") == clean_intake["tables"]["signals"]
    part = str(root / table / f"dt={D}")
    if point == "files_written":  # the new snapshot's files, no marker yet
        assert not partitions.is_committed(part)
        with pytest.raises(partitions.MissingPartitionError, match="never committed"):
            partitions.committed_files(part, table)
        # What the day's run would read of host_policy: Spark's _SUCCESS, written after its
        # last file, makes the directory a snapshot (jobs.snapshots); it is whole.
        snap = snapshots.find(cfg, "host_policy", D)
        assert snap.dt == D and _rows(snap.files) == clean_intake["tables"]["host_policy"]
        assert not os.path.exists(root / "document_refs" / f"dt={D}")
    else:  # the marker is in place: the table is whole, the quarantine not yet written
        assert _table(root, "document_refs") == clean_intake["tables"]["document_refs"]
        assert not os.path.exists(root / "quarantine" / f"dt={D}")
    assert intake.run(cfg, D, spark) == clean_intake["record"]
    assert _committed(root) == clean_intake["tables"]
    for t in TABLES:  # the killed attempt's files are gone, and so is its note
        p = str(root / t / f"dt={D}")
        assert storage.list_parquet_files(p) == partitions.committed_files(p, t)
        assert not os.path.exists(os.path.join(p, intake.UPSTREAM_NOTE))


@pytest.mark.parametrize("first", [True, False], ids=["first_run", "rerun"])
def test_an_intake_overtaken_by_another_refuses_and_leaves_the_others_commit(
        spark, intake_inputs, clean_intake, tmp_path, first):
    """B is about to commit its signals when A runs the day from start to end (the day's
    first run, or a rerun over a committed day): A's commit deletes B's uncommitted files,
    so B refuses (ConcurrentWriteError, exit 3) and A's whole run stands."""
    from jobs import intake

    root = _copy(intake_inputs if first else clean_intake["root"], tmp_path)
    proc, note = _start(_intake_cmd(root), tmp_path, "signals:files_written")
    b_files = set(_paused(proc, note)["files"]) - {"part-upstream.parquet"}  # B's own
    assert intake.run(_cfg(root), D, spark) == clean_intake["record"]
    rc, err = _go_on(proc, note)
    assert rc == EXIT_LOST and "ConcurrentWriteError" in err and "vanished" in err, err
    assert "Traceback" not in err
    assert _committed(root) == clean_intake["tables"]
    signals = {os.path.basename(f) for f in partitions.committed_files(
        str(root / "signals" / f"dt={D}"), "signals")}
    assert b_files and not signals & b_files
    assert storage.list_parquet_files(str(root / "signals" / f"dt={D}")) == \
        partitions.committed_files(str(root / "signals" / f"dt={D}"), "signals")
