"""bench_daily's pure parts: the pyarrow I/O limit, the summary arithmetic, the --keep rules."""
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import partitions
from jobs.config import load_config
from lab.studies.bench_common import PeakRSS, process_kind, stage_line
from lab.studies.bench_daily import (commit_context, copy_files, git_commit, io_limit,
                                      prepare_data, setup_todo, summary)


def _write(path, n, start=0, row_group_size=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"url": [f"https://h/{i}" for i in range(start, start + n)],
                      "x": [float(i) for i in range(start, start + n)]})
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def test_io_limit_reads_and_writes_every_row_of_every_part(tmp_path):
    prev = [_write(tmp_path / "in" / "s0.parquet", 300, row_group_size=100),
            _write(tmp_path / "in" / "s1.parquet", 50, start=300)]
    logs = [_write(tmp_path / "in" / "l0.parquet", 120)]
    state = [_write(tmp_path / "in" / "t0.parquet", 400, row_group_size=64)]
    scratch = tmp_path / "scratch"
    io = io_limit({"state_prev": prev, "fetch_logs": logs, "state": state}, scratch)
    assert {k: (p["files"], p["rows"]) for k, p in io["parts"].items()} == {
        "state_prev": (2, 350), "fetch_logs": (1, 120), "state": (1, 400)}
    for p in io["parts"].values():
        assert p["read_s"] > 0 and p["write_s"] > 0
    assert io["seconds"] == pytest.approx(sum(p["read_s"] + p["write_s"]
                                              for p in io["parts"].values()))
    assert not scratch.exists()  # the scratch copies are not left behind


def test_copy_files_writes_the_same_rows(tmp_path):
    src = [_write(tmp_path / "a.parquet", 250, row_group_size=100),
           _write(tmp_path / "b.parquet", 10, start=250)]
    got = copy_files(src, tmp_path / "out")
    assert got["rows"] == 260 and got["files"] == 2
    copied = pq.read_table(tmp_path / "out").sort_by("x")
    assert copied.equals(pa.concat_tables([pq.read_table(f) for f in src]).sort_by("x"))


def test_summary_sums_the_chain_and_divides_by_the_io_time():
    stages = {"validate_logs": 0.5, "update_state": 20.0, "allocate": 30.0,
              "build_schedule": 8.0, "publish": 1.5}
    s = summary(stages, 4.0, [1.2, 2.5, 2.0], nproc=2)
    assert s["chain_s"] == 60.0 and s["ratio"] == 15.0 and s["io_s"] == 4.0
    assert s["peak_rss_gb"] == 2.5 and s["nproc"] == 2
    assert s["stage_seconds"]["allocate"] == 30.0
    assert summary(stages, 0.0, [])["ratio"] is None  # no division by a zero I/O time


def _mem(peak, parts=None, pss=0):
    mem = PeakRSS()
    mem.peak, mem.parts, mem.peak_pss = peak, parts or {}, pss
    return mem


def test_stage_line_rows_per_second():
    line = stage_line("allocate", 2.0, 1000,
                      _mem(3 * 2**30, {"jvm": 2 * 2**30, "python_workers": 2**30}, 2.5 * 2**30))
    assert line == {"stage": "allocate", "seconds": 2.0, "state_rows": 1000,
                    "rows_per_s": 500, "peak_rss_gb": 3.0,
                    "peak_rss_parts_gb": {"jvm": 2.0, "python_workers": 1.0},
                    "peak_pss_gb": 2.5, "cpu_seconds": 0.0}
    assert stage_line("x", 1.0, None, _mem(0))["rows_per_s"] is None


def test_peak_sampler_sees_a_child_process_and_splits_it_from_the_driver():
    import subprocess
    import sys
    import time

    # A child holding ~200 MB: its RSS must show under python_workers, not the driver.
    code = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(3)"
    with PeakRSS(interval=0.05, pss_every=1) as mem:
        child = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(2.0)
        child.wait()
    assert mem.parts["python_workers"] > 190 * 2**20
    assert mem.parts["driver"] > 0 and mem.peak == sum(mem.parts.values())
    assert 0 < mem.peak_pss <= mem.peak


def test_cpu_seconds_count_a_busy_child_and_not_a_sleeping_one():
    import subprocess
    import sys

    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\ntime.sleep(0.5)"
    with PeakRSS(interval=0.05) as mem:
        subprocess.run([sys.executable, "-c", busy], check=True)
    with PeakRSS(interval=0.05) as idle:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], check=True)
    # The busy child burnt 1.0 s of CPU (+ its start-up), the sleeping one only its start-up.
    assert 0.9 < mem.cpu_seconds < 3.0
    assert idle.cpu_seconds < mem.cpu_seconds - 0.7


def test_setup_todo_restarts_at_the_first_uncommitted_day(tmp_path):
    cfg = load_config(None, [f"paths.root={tmp_path}"])
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert setup_todo(cfg, days) == days
    for d in days[:2]:
        for table in ("state", "hosts"):
            path = cfg.paths.table(table, d)
            partitions.commit_files(path, table, [_write(tmp_path / table / f"dt={d}" /
                                                         "part-0.parquet", 3)])
    assert setup_todo(cfg, days) == days[2:]
    partitions.commit_files(cfg.paths.table("state", days[2]), "state", [])
    assert setup_todo(cfg, days) == days[2:]  # hosts of that day still missing
    partitions.commit_files(cfg.paths.table("hosts", days[2]), "hosts", [])
    assert setup_todo(cfg, days) == []


def test_keep_refuses_a_root_generated_with_other_arguments(tmp_path):
    args = SimpleNamespace(root=str(tmp_path), urls=100, hosts=2, days=2,
                           end_date="2024-01-02", seed=0, keep=True)
    (tmp_path / "_bench").mkdir()
    (tmp_path / "_bench" / "generated.json").write_text(json.dumps(
        {"urls": 200, "hosts": 2, "days": 2, "end_date": "2024-01-02", "seed": 0}))
    with pytest.raises(SystemExit, match="generated with"):
        prepare_data(args)
    args.urls = 200
    prepare_data(args)  # the same arguments: reused as it is, nothing generated or deleted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_bench"]
    args.keep = False
    (tmp_path / "_bench" / "generated.json").unlink()
    (tmp_path / "precious.txt").write_text("not ours")
    with pytest.raises(SystemExit, match="refusing to delete"):
        prepare_data(args)
    assert (tmp_path / "precious.txt").exists()


def test_rss_series_counts_a_child_as_a_python_worker():
    import subprocess
    import sys
    import time

    import psutil

    from lab.studies.rss_series import sample

    code = "b = bytearray(100 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(3)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(1.5)
        s = sample(psutil.Process())
        assert s["n"] >= 1 and s["python_workers"] > 0.09 and s["jvm"] == 0.0
    finally:
        child.wait()


def test_commit_context_reports_the_start_commit_and_flags_an_edit_during_the_run():
    clean = {"commit": "abc1234", "dirty": False, "diff": None}
    assert commit_context(clean, dict(clean)) == {
        "commit": "abc1234", "dirty": False, "code_changed_during_run": False}
    moved = commit_context(clean, {"commit": "def5678", "dirty": False, "diff": None})
    assert moved["commit"] == "abc1234" and moved["code_changed_during_run"]
    edited = {"commit": "abc1234", "dirty": True, "diff": "1f0e"}
    assert commit_context(clean, edited)["code_changed_during_run"]
    # A file already dirty at the start and edited again during the run is a change too.
    again = {"commit": "abc1234", "dirty": True, "diff": "9a2c"}
    assert commit_context(edited, again)["code_changed_during_run"]
    here = git_commit()  # this checkout: a real HEAD
    assert len(here["commit"]) >= 7 and isinstance(here["dirty"], bool)
    assert here == git_commit()  # nothing changed between two calls: no change flagged


def test_helpers_the_jvm_spawns_are_left_out_of_the_peak_and_python_children_are_not():
    # Between clone and exec a chmod started by the JVM is named after the JVM thread and
    # shows the JVM's RSS: counted, it doubled the JVM for one sample.
    me = psutil.Process()
    helper = subprocess.Popen(["sleep", "30"])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        kinds = {process_kind(psutil.Process(p.pid), me) for p in (helper, worker)}
        assert process_kind(me, me) == "driver"
        assert kinds == {"spawned", "python_workers"}
        assert process_kind(SimpleNamespace(pid=-1, name=lambda: "Executor task l"),
                            me) == "spawned"
        assert process_kind(SimpleNamespace(pid=-1, name=lambda: "java"), me) == "jvm"
        with PeakRSS(interval=0.01, pss_every=1) as mem:
            time.sleep(0.3)
        assert set(mem.parts) == {"driver", "python_workers"}  # the sleep is not summed
    finally:
        for p in (helper, worker):
            p.kill()
            p.wait()
