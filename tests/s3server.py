"""Test helpers beside the loopback S3 server (:mod:`lab.sim.s3server`, re-exported here).

``FlakyProxy`` sits between a client and the server and answers the first N matching
requests with an HTTP error (or drops the connection), to exercise retry paths with
real HTTP traffic rather than a mocked boto3; its ``hook`` runs before each forwarded
request, to interleave another actor at an exact point of the protocol.

``sample_schedule`` / ``stage_schedule`` make build_schedule-shaped rows and stage them
as shard files + ``_shards.json``, for publish/verify tests and demos.
"""
from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import numpy as np
import pandas as pd

from lab.sim.s3server import (DUMMY_AWS_ENV, UNSET_AWS_ENV, MotoS3Server,  # noqa: F401
                               dummy_aws_env, patched_env, serialised_writes)


class FlakyProxy:
    """Loopback HTTP proxy to ``upstream`` failing the first ``failures`` matching requests.

    ``mode`` is ``"503"`` (answer 503 SlowDown-style XML), ``"403"`` (AccessDenied, what S3
    answers for a missing key to a role without ListBucket) or ``"drop"`` (close the
    connection without answering). A request matches when its method is in ``methods``
    and ``path_contains`` occurs in its path. ``seen`` counts every request by method.
    """

    def __init__(self, upstream: str, failures: int = 0, *, methods: tuple[str, ...] = ("PUT",),
                 path_contains: str = "", mode: str = "503",
                 hook: Callable[[str, str], None] | None = None) -> None:
        if mode not in ("503", "403", "drop"):
            raise ValueError(f"mode must be '503', '403' or 'drop', got {mode!r}")
        self.upstream = upstream.removeprefix("http://")
        self.remaining = failures
        self.hook = hook
        self.methods = methods
        self.path_contains = path_contains
        self.failed = 0
        self.seen: dict[str, int] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if proxy._should_fail(self.command, self.path):
                    if mode == "drop":
                        self.close_connection = True
                        self.connection.close()
                        return
                    status, code = (403, b"AccessDenied") if mode == "403" else (503, b"SlowDown")
                    payload = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>" + code +
                               b"</Code><Message>Please reduce your request rate.</Message></Error>")
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if proxy.hook is not None:
                    proxy.hook(self.command, self.path)
                upstream = http.client.HTTPConnection(proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "proxy-connection")}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length",
                                           "date", "server"):  # send_response sent its own
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _should_fail(self, method: str, path: str) -> bool:
        with self._lock:
            self.seen[method] = self.seen.get(method, 0) + 1
            if self.remaining > 0 and method in self.methods and self.path_contains in path:
                self.remaining -= 1
                self.failed += 1
                return True
            return False

    def __enter__(self) -> "FlakyProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def sample_schedule(n_rows: int = 600, n_hosts: int = 40, seed: int = 0,
                    day: str = "2024-05-02") -> pd.DataFrame:
    """Schedule rows shaped like build_schedule's output (SCHEDULE_SCHEMA columns)."""
    rng = np.random.default_rng(seed)
    host_ids = rng.integers(0, n_hosts, n_rows)
    lanes = np.array(["refresh", "fast", "discovery"])[rng.integers(0, 3, n_rows)]
    conditional = (lanes != "discovery") & (rng.random(n_rows) < 0.7)
    return pd.DataFrame({
        "host": [f"h{h}.example.org" for h in host_ids],
        "url": [f"https://h{h}.example.org/p/{seed}/{i}" for i, h in enumerate(host_ids)],
        "not_before": pd.Timestamp(day, tz="UTC")
        + pd.to_timedelta(rng.integers(0, 86_400, n_rows), unit="s"),
        "lane": lanes,
        "method": np.where(conditional, "conditional", "full"),
        "if_none_match": [f'"etag-{i}"' if c else None for i, c in enumerate(conditional)],
        "if_modified_since": [None] * n_rows,
        "priority": rng.random(n_rows),
        "p_changed": rng.random(n_rows),
        "crawl_delay_s": 1.0 + host_ids % 7,
        "expires_at": pd.Timestamp(day, tz="UTC") + pd.Timedelta(days=1),
    })


def stage_schedule(df: pd.DataFrame, staging_dir: str, n_shards: int = 4) -> list[dict]:
    """Write ``df`` as shard files + ``_shards.json`` the way the Spark job does."""
    from jobs.shards import shard_of, write_shard, write_shard_index
    shards = shard_of(df["host"], n_shards)
    infos = [write_shard(group, staging_dir, int(shard), n_shards=n_shards)
             for shard, group in df.groupby(shards)]
    write_shard_index(staging_dir, infos, n_shards=n_shards)
    return infos
