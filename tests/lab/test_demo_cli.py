"""The README demo's command line: a bad date or --set is one line and exit 2, before the
local S3 server starts."""
import subprocess
import sys

import pytest

from jobs.cli import guarded
from lab.tools import demo


@pytest.mark.parametrize("argv, cause", [
    (["--set", "timing.week_min_dated_changes=nan"], "week_min_dated_changes"),
    (["--set", "nosuch.key=1"], "nosuch"),
    (["--date", "2026-13-01"], "not a date of the calendar"),
])
def test_a_bad_argument_is_one_line_and_exit_2(argv, cause, tmp_path):
    out = subprocess.run([sys.executable, "-m", "lab.tools.demo", *argv,
                          "--workdir", str(tmp_path / "demo")], capture_output=True, text=True)
    err = out.stderr.strip()
    assert out.returncode == 2 and cause in err and err.startswith("demo.py: error:")
    assert len(err.splitlines()) == 1 and not out.stdout


def test_a_bad_set_is_refused_before_the_s3_server_starts(monkeypatch, tmp_path):
    def no_s3(port):
        raise AssertionError("the S3 server was started")

    monkeypatch.setattr(demo, "start_s3", no_s3)
    assert guarded(demo.main, ["--set", "timing.week_min_dated_changes=-1",
                               "--workdir", str(tmp_path / "demo")], "demo.py") == 2
