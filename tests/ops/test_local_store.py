"""The local object store (a schedules or data root on a path): a writer killed between its
temp file and the rename leaves no object, and the next write in that directory deletes the
dead writer's temp file while a live writer's stays."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.conftest import REPO

WRITER = """
import os, sys, time
from jobs.objstore import LocalStore
def stuck(src, dst):  # the temp file is written: stop before the rename
    print("written", flush=True)
    time.sleep(120)
os.replace = stuck
LocalStore(sys.argv[1]).put_bytes("schedules/dt=2026-12-07/part-0.jsonl", b"x" * 100000,
                                  content_type="application/x-ndjson")
"""


def test_a_killed_writers_temp_file_is_swept_by_the_next_write(tmp_path):
    from jobs.objstore import LocalStore

    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    day = tmp_path / "schedules" / "dt=2026-12-07"
    orphans = list(day.glob(".tmp-*"))
    assert len(orphans) == 1 and orphans[0].stat().st_size == 100000
    live = day / f".tmp-{os.getpid()}-abcd1234part-1.jsonl"  # a writer still at work
    live.write_bytes(b"y")

    store = LocalStore(str(tmp_path))
    assert [o.key for o in store.list("schedules/")] == []  # never listed as an object
    store.put_bytes("schedules/dt=2026-12-07/part-0.jsonl", b"z", content_type="text/plain")
    assert sorted(p.name for p in day.iterdir()) == [live.name, "part-0.jsonl"]
    assert store.get_bytes("schedules/dt=2026-12-07/part-0.jsonl") == b"z"
