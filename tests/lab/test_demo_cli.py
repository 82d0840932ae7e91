"""The README demo's command line: a bad date, --set, web size, seed or port is one line and
exit 2, before the local S3 server starts; a port another program holds is one line too."""
import os
import socket
import subprocess
import sys

import pytest

from jobs.cli import guarded
from lab.tools import demo


@pytest.mark.parametrize("argv, cause", [
    (["--set", "timing.week_min_dated_changes=nan"], "week_min_dated_changes"),
    (["--set", "nosuch.key=1"], "nosuch"),
    (["--date", "2026-13-01"], "not a date of the calendar"),
    (["--urls", "-5"], "n_urls >= 2*n_hosts"),
    (["--hosts", "0"], "need n_hosts >= 1"),
    (["--urls", "10", "--hosts", "20"], "got n_urls=10, n_hosts=20"),
    (["--seed", "-2"], "seed must be >= 0"),
    (["--port", "99999"], "--port must lie in 1..65535"),
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


def test_a_port_another_program_holds_is_one_line_from_the_demo_and_the_script(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()  # a listener that is not an HTTP server
        port = held.getsockname()[1]
        env = {**os.environ, "LOCAL_S3_STATE_DIR": str(tmp_path / "s3")}
        script = subprocess.run(["bash", str(demo.REPO / "infra" / "local_s3.sh"), "start",
                                 str(port)], capture_output=True, text=True, env=env, timeout=60)
        assert script.returncode == 2 and not script.stdout
        assert script.stderr.strip() == (f"local_s3.py: error: port {port} on 127.0.0.1 is in use "
                                         f"by a program this script did not start: choose "
                                         f"another with --port (or LOCAL_S3_PORT)")
        out = subprocess.run([sys.executable, "-m", "lab.tools.demo", "--port", str(port),
                              "--workdir", str(tmp_path / "demo")], capture_output=True,
                             text=True, env=env, timeout=120)
    err = out.stderr.strip()
    assert out.returncode == 2 and len(err.splitlines()) == 1 and not out.stdout, err
    assert err.startswith(f"demo.py: error: UsageError: --port {port}: the local S3 server did "
                          f"not start: port {port} on 127.0.0.1 is in use")
    assert not (tmp_path / "demo" / "data").exists()  # refused before the web is generated
