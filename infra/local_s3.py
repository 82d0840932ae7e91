"""Start/stop a local S3 (moto in server mode) on 127.0.0.1 for demos and tests.

    python infra/local_s3.py start [--port 9000]   # prints the endpoint URL
    python infra/local_s3.py status [--port 9000]  # prints endpoint, exit 1 if down
    python infra/local_s3.py stop [--port 9000]

A ``start`` that cannot (the port held by another program, moto_server missing or failing)
prints one line on stderr and exits 2.

``start`` is idempotent: if the server for that port is already up it only prints the
endpoint. The pid file and log live in ``var/local_s3/`` (override with
``LOCAL_S3_STATE_DIR``); the port also comes from ``LOCAL_S3_PORT``. Data is in
memory and gone after ``stop``.
"""
from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"  # loopback only: the local stack must never be reachable from outside
DEFAULT_PORT = 9000
START_TIMEOUT_S = 30.0


def state_dir() -> Path:
    return Path(os.environ.get("LOCAL_S3_STATE_DIR", REPO_ROOT / "var" / "local_s3"))


def pid_file(port: int) -> Path:
    return state_dir() / f"moto-{port}.pid"


def moto_binary() -> str:
    """The venv's moto_server next to this interpreter, else the repo's .venv."""
    for candidate in (Path(sys.executable).parent / "moto_server",
                      REPO_ROOT / ".venv" / "bin" / "moto_server"):
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError("moto_server not found; install moto[server] in the venv")


def endpoint(port: int) -> str:
    return f"http://{HOST}:{port}"


def answers(port: int) -> bool:
    """True if an S3 endpoint (any HTTP answer) responds on the port."""
    try:
        with urllib.request.urlopen(endpoint(port) + "/", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # an HTTP error status still means something is serving
    except OSError:
        return False


def bindable(port: int) -> bool:
    """False if another socket already listens on (or holds) the port on the loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
        try:
            sock.bind((HOST, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def running_pid(port: int) -> int | None:
    """Pid from the pid file if that process is alive and is a moto_server."""
    try:
        pid = int(pid_file(port).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    # Guard against a recycled pid belonging to something else.
    return pid if b"moto_server" in cmdline else None


def start(port: int) -> str:
    """Start the server unless it already runs; return its endpoint."""
    if running_pid(port) and answers(port):
        return endpoint(port)
    if answers(port) or not bindable(port):
        raise RuntimeError(f"port {port} on {HOST} is in use by a program this script did not "
                           f"start: choose another with --port (or LOCAL_S3_PORT)")
    state_dir().mkdir(parents=True, exist_ok=True)
    log = open(state_dir() / f"moto-{port}.log", "ab")
    process = subprocess.Popen([moto_binary(), "-H", HOST, "-p", str(port)], stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)  # survives the calling shell
    pid_file(port).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pid_file(port).unlink(missing_ok=True)
            raise RuntimeError(f"moto_server exited with {process.returncode}; see its log "
                               f"{log.name}")
        if answers(port):
            return endpoint(port)
        time.sleep(0.1)
    process.terminate()
    pid_file(port).unlink(missing_ok=True)
    raise TimeoutError(f"moto_server did not answer on {endpoint(port)} within {START_TIMEOUT_S}s")


def stop(port: int) -> bool:
    """Stop the server started for ``port``; True if one was running."""
    pid = running_pid(port)
    pid_file(port).unlink(missing_ok=True)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists() or running_pid_zombie(pid):
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return True


def running_pid_zombie(pid: int) -> bool:
    """True if ``pid`` has exited but not been reaped (counts as stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("LOCAL_S3_PORT", DEFAULT_PORT)))
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"port out of range: {args.port}")
    if args.command == "start":
        try:
            print(start(args.port))
        except (RuntimeError, TimeoutError, FileNotFoundError) as err:
            parser.exit(2, f"{parser.prog}: error: {err}\n")
    elif args.command == "stop":
        print("stopped" if stop(args.port) else "not running")
    else:
        up = running_pid(args.port) is not None and answers(args.port)
        print(endpoint(args.port) if up else "not running")
        return 0 if up else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
