"""A Spark standalone cluster on loopback from the venv's pyspark: one master, N workers.

    python infra/local_cluster.py start [--dir DIR] [--workers 2] [--conf KEY=VALUE ...]
    python infra/local_cluster.py status [--dir DIR]     # prints the state JSON, exit 1 if down
    python infra/local_cluster.py stop [--dir DIR]

(``bash infra/cluster.sh start|status|stop ...`` wraps it.) ``start`` runs
``spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W``
and per worker ``spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P
--cores 1 --memory 1g --work-dir DIR/worker-i/work``, on free ports, waits until the master
lists every worker ALIVE, and writes ``DIR/cluster.json`` (master URL, web UI, pids, conf dir,
python) which it also prints. DIR defaults to ``var/cluster``.

The daemons get a clean environment: no PYTHONPATH, no PYSPARK_* of the caller,
SPARK_LOCAL_IP=127.0.0.1. They run in their own process groups; ``stop`` ends exactly the
groups this command started (pids from cluster.json): TERM, then KILL after a grace period.

What a real cluster would own is made here too, under DIR:

- ``DIR/python``: the cluster's Python, a venv whose site-packages path lists the project
  venv's (the pinned requirements) but not the project: the editable install's import hook
  is not loaded there, so executors can import ``jobs`` only from the shipped artefact.
- ``DIR/conf/spark-defaults.conf``: the cluster's defaults (master, ``spark.pyspark.python``,
  the UTC time zone, plus every ``--conf``). A client submits to the cluster with
  ``SPARK_CONF_DIR=DIR/conf`` (the "client configuration" of the cluster, like
  /etc/spark/conf on an EMR master node).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_GRACE_S = 15.0
# The caller's Python/Spark environment that must not leak into the cluster's daemons.
CLEAN_ENV = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT",
             "PYSPARK_GATEWAY_SECRET", "SPARK_CONF_DIR", "SPARK_HOME", "VIRTUAL_ENV")


def default_dir() -> Path:
    return Path(os.environ.get("LOCAL_CLUSTER_DIR", REPO_ROOT / "var" / "cluster"))


def state_file(root: Path) -> Path:
    return root / "cluster.json"


def spark_class() -> str:
    for candidate in (Path(sys.executable).parent / "spark-class",
                      REPO_ROOT / ".venv" / "bin" / "spark-class"):
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError("spark-class not found next to the interpreter; install pyspark")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def cluster_python(root: Path) -> str:
    """The cluster's interpreter: a venv seeing the project venv's packages, not the project."""
    target = root / "python"
    python = target / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
        site = sysconfig.get_paths(vars={"base": str(target), "platbase": str(target)})["purelib"]
        # A path line only: the project venv's .pth files (the editable import hook) are not run.
        Path(site, "recrawl_requirements.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(python)


def daemon_env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env.update({"SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(root / "logs"),
                "SPARK_CONF_DIR": str(root / "conf"), "SPARK_NO_DAEMONIZE": "1",
                "PYSPARK_PYTHON": cluster_python(root)})
    return env


def master_json(webui_port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{webui_port}/json/", timeout=2) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _spawn(cmd: list[str], env: dict, log: Path, cwd: Path) -> int:
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return proc.pid


def status(root: Path) -> dict | None:
    """The state of the cluster in ``root`` if its master answers with every worker alive."""
    path = state_file(root)
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    info = master_json(state["webui_port"])
    if not info or info.get("status") != "ALIVE":
        return None
    workers = [w for w in info.get("workers", []) if w.get("state") == "ALIVE"]
    return state if len(workers) >= state["workers"] else None


def start(root: Path, workers: int = 2, conf: list[str] | None = None,
          cores: int = 1, memory: str = "1g") -> dict:
    root = root.resolve()
    running = status(root)
    if running:
        return running
    if state_file(root).exists():
        stop(root)  # a half-dead cluster from an earlier start
    for sub in ("logs", "conf"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    env = daemon_env(root)
    port, webui = free_port(), free_port()
    master_url = f"spark://{HOST}:{port}"
    defaults = {"spark.master": master_url, "spark.pyspark.python": env["PYSPARK_PYTHON"],
                "spark.sql.session.timeZone": "UTC"}
    for item in conf or []:
        key, _, value = item.partition("=")
        defaults[key.strip()] = value.strip()
    (root / "conf" / "spark-defaults.conf").write_text(
        "# The local cluster's defaults (infra/local_cluster.py); submit with SPARK_CONF_DIR here.\n"
        + "".join(f"{k} {v}\n" for k, v in defaults.items()))
    sc = spark_class()
    state = {"master": master_url, "webui": f"http://{HOST}:{webui}", "webui_port": webui,
             "port": port, "workers": workers, "dir": str(root), "conf_dir": str(root / "conf"),
             "python": env["PYSPARK_PYTHON"], "pids": {}}
    try:
        state["pids"]["master"] = _spawn(
            [sc, "org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port),
             "--webui-port", str(webui)], env, root / "logs" / "master.log", root)
        state_file(root).write_text(json.dumps(state, indent=2))
        _wait(lambda: (master_json(webui) or {}).get("status") == "ALIVE",
              "master", root / "logs" / "master.log", state["pids"]["master"])
        for i in range(1, workers + 1):
            wdir = root / f"worker-{i}"
            (wdir / "work").mkdir(parents=True, exist_ok=True)
            state["pids"][f"worker-{i}"] = _spawn(
                [sc, "org.apache.spark.deploy.worker.Worker", master_url, "--host", HOST,
                 "--cores", str(cores), "--memory", memory, "--work-dir", str(wdir / "work"),
                 "--webui-port", str(free_port())], env, root / "logs" / f"worker-{i}.log", wdir)
            state_file(root).write_text(json.dumps(state, indent=2))

        def all_alive() -> bool:
            info = master_json(webui) or {}
            return sum(w.get("state") == "ALIVE" for w in info.get("workers", [])) >= workers

        _wait(all_alive, f"{workers} workers", root / "logs" / "worker-1.log", None)
    except BaseException:
        stop(root)
        raise
    return state


def _wait(ready, what: str, log: Path, pid: int | None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready():
            return
        if pid is not None and not alive(pid):
            break
        time.sleep(0.25)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"local cluster: {what} not up after {START_TIMEOUT_S:.0f} s\n{tail}")


def stop(root: Path) -> list[int]:
    """TERM (then KILL) the process groups of the pids in cluster.json; returns those pids."""
    path = state_file(root.resolve())
    if not path.exists():
        return []
    pids = list(json.loads(path.read_text()).get("pids", {}).values())
    for pid in reversed(pids):  # workers first: they end their executors
        try:
            os.killpg(pid, signal.SIGTERM)  # the group this command created (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_group_alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        if _group_alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for pid in pids:  # reap our own children (start() in this process)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    path.unlink()
    return pids


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie leader of a group whose members are gone still "exists": reap it if it is ours.
    try:
        done, _ = os.waitpid(pgid, os.WNOHANG)
        if done == pgid:
            return _group_alive(pgid)
    except ChildProcessError:
        pass
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("start", "status", "stop"))
    parser.add_argument("--dir", type=Path, default=default_dir(),
                        help="state, logs, work dirs and conf (default var/cluster)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a line of the cluster's spark-defaults.conf; repeatable")
    args = parser.parse_args(argv)
    if args.command == "start":
        print(json.dumps(start(args.dir, args.workers, args.conf, args.cores, args.memory),
                         indent=2))
        return 0
    if args.command == "status":
        state = status(args.dir.resolve())
        print(json.dumps(state, indent=2) if state else "down")
        return 0 if state else 1
    print(json.dumps({"stopped": stop(args.dir)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
