"""A real S3-protocol server (moto, server mode) on a free loopback port, for the backtest
harness and the tests (the simulated fleet reads schedules from it over HTTP).

Usage::

    from lab.sim.s3server import MotoS3Server, dummy_aws_env

    with dummy_aws_env(), MotoS3Server() as s3:
        client = s3.client()          # boto3 over HTTP to s3.endpoint_url
        client.create_bucket(Bucket="b")

The server runs every write (PUT/POST/DELETE) one at a time: moto checks ``If-Match`` /
``If-None-Match`` and then stores, in two steps, so two racing conditional PUTs could
both win on moto while S3 guarantees exactly one does; serialising writes gives tests
S3's semantics (``tests/ops/test_publish_concurrency.py`` checks it).
"""
from __future__ import annotations

import contextlib
import http.client
import logging
import os
import threading
from typing import Iterator

import boto3
from botocore.config import Config

DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
# Removed so a developer's real AWS setup can never leak into tests.
UNSET_AWS_ENV = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                 "https_proxy")


@contextlib.contextmanager
def patched_env(changes: dict) -> Iterator[None]:
    """Set os.environ[key] = value for each change (None unsets it); restore all after."""
    saved = {key: os.environ.get(key) for key in changes}
    _apply(changes)
    try:
        yield
    finally:
        _apply(saved)


def _apply(changes: dict) -> None:
    for key, value in changes.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def dummy_aws_env():
    """Set dummy credentials, disable EC2 metadata lookups; restore the environment after."""
    return patched_env({**DUMMY_AWS_ENV, **dict.fromkeys(UNSET_AWS_ENV)})


def serialised_writes(app):
    """WSGI middleware running one write request at a time (reads stay concurrent)."""
    lock = threading.Lock()

    def wrapped(environ, start_response):
        if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
            with lock:
                # Consume the whole response inside the lock: the write happens while it is built.
                return list(app(environ, start_response))
        return app(environ, start_response)

    return wrapped


def _atomic_moto_server():
    """moto's ThreadedMotoServer whose writes are serialised (conditional writes atomic)."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                               create_backend_app)
    from werkzeug.serving import make_server

    class AtomicMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = serialised_writes(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(self._ip_address, self._port, app, True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return AtomicMotoServer(ip_address="127.0.0.1", port=0, verbose=False)


class MotoS3Server:
    """moto's ThreadedMotoServer bound to 127.0.0.1 on a port the OS picks, writes serialised."""

    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one log line per request otherwise
        self._server = _atomic_moto_server()
        self.endpoint_url: str | None = None

    def start(self) -> "MotoS3Server":
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def reset(self) -> None:
        """Drop all buckets and objects (moto's reset API)."""
        host, port = self._server.get_host_and_port()
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("POST", "/moto-api/reset")
        conn.getresponse().read()
        conn.close()

    def client(self, endpoint_url: str | None = None):
        """A boto3 S3 client for this server (or for a proxy in front of it)."""
        return boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url or self.endpoint_url, region_name="us-east-1",
            config=Config(retries={"mode": "standard", "total_max_attempts": 1}))

    def __enter__(self) -> "MotoS3Server":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
