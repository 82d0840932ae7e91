"""Small object-store layer shared by publish and verify: S3 (boto3) or a local directory.

A location is ``s3://bucket/prefix`` (``s3a://`` is accepted and means the same
bucket), ``file:///abs/dir`` or a plain path. Keys are always ``/``-separated and
relative to the store root (the bucket, or the directory), so a manifest written
to S3 and one written to a directory list the same kind of key.
"""
from __future__ import annotations

import base64
import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar
from urllib.parse import urlparse

import boto3
import botocore.exceptions
from botocore.config import Config

from jobs.errors import (ObjectAccessDenied, ObjectNotFound,  # noqa: F401  (home:
                         PreconditionFailed)  # jobs.errors)

T = TypeVar("T")

# Error codes S3 (and S3-compatible servers) use for "try again later".
TRANSIENT_ERROR_CODES = frozenset({
    "InternalError", "ServiceUnavailable", "SlowDown", "Throttling", "ThrottlingException",
    "RequestTimeout", "RequestTimeTooSkewed", "RequestLimitExceeded", "TooManyRequestsException",
    "ConditionalRequestConflict",  # 409: another conditional write to the key is in flight
})
TRANSIENT_EXCEPTIONS = (
    botocore.exceptions.ConnectionError,  # endpoint/connect/proxy connection errors
    botocore.exceptions.HTTPClientError,  # connection closed mid-request, read timeouts
    botocore.exceptions.ResponseStreamingError,
)
# Attempts botocore itself makes per HTTP request; with_retries wraps whole operations.
BOTOCORE_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class ObjectHead:
    """A key's current version: ETag (no quotes), size, and its age by the store's own clock."""

    etag: str
    size: int
    age_s: float


@dataclass(frozen=True)
class Location:
    """A parsed store location: ``bucket`` is None for a local directory ``root``."""

    bucket: str | None
    root: str | None
    prefix: str

    @property
    def is_s3(self) -> bool:
        return self.bucket is not None

    def uri(self, key: str = "") -> str:
        """Human-readable address of ``key`` (for messages only)."""
        if self.is_s3:
            return f"s3://{self.bucket}/{key}"
        return str(Path(self.root, key))


def parse_location(uri: str) -> Location:
    """Parse ``s3://``/``s3a://``/``file://`` URIs or plain paths into a Location."""
    if not isinstance(uri, str) or not uri.strip():
        raise ValueError(f"location must be a non-empty string, got {uri!r}")
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise ValueError(f"S3 location {uri!r} has no bucket")
        return Location(bucket=parsed.netloc, root=None, prefix=parsed.path.strip("/"))
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"file URI {uri!r} must be file:///absolute/path")
        return Location(bucket=None, root=os.path.abspath(parsed.path), prefix="")
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter: a Windows drive, i.e. a path
        raise ValueError(f"unsupported location scheme {parsed.scheme!r} in {uri!r}")
    return Location(bucket=None, root=os.path.abspath(uri), prefix="")


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: 5xx, throttling, timeouts, dropped connections."""
    if isinstance(exc, TRANSIENT_EXCEPTIONS):
        return True
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error.get("Code") in TRANSIENT_ERROR_CODES or status >= 500 or status == 429
    return False


def with_retries(operation: Callable[[], T], *, attempts: int = 5, base_delay_s: float = 0.2,
                 max_delay_s: float = 10.0, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> T:
    """Run ``operation`` and retry transient failures with exponential backoff + full jitter.

    Attempt ``n`` (0-based) that fails transiently sleeps ``uniform(0, min(max, base*2**n))``;
    jitter keeps many workers from retrying in lock-step. Non-transient errors and the
    last transient one propagate unchanged.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    rng = rng or random.Random()
    for attempt in range(attempts):
        try:
            return operation()
        except Exception as exc:  # noqa: BLE001 - filtered by is_transient
            if attempt == attempts - 1 or not is_transient(exc):
                raise
            sleep(rng.uniform(0.0, min(max_delay_s, base_delay_s * 2 ** attempt)))
    raise AssertionError("unreachable")


#: The placeholder key a loopback S3 server gets when no credentials are configured.
LOOPBACK_KEY = "loopback-only"


def is_loopback_endpoint(endpoint_url: str | None) -> bool:
    """Whether ``endpoint_url`` is an ``http(s)`` URL whose host is this machine
    (``localhost``, 127.0.0.0/8, ``::1``): the demo's and the tests' S3 server."""
    import ipaddress

    if not endpoint_url:
        return False
    parsed = urlparse(endpoint_url)
    host = parsed.hostname or ""
    if parsed.scheme not in ("http", "https") or not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_s3_client(endpoint_url: str | None = None, max_pool_connections: int = 10):
    """A boto3 S3 client with standard-mode retries; endpoint from arg or AWS config/env.

    Credentials come from boto3's usual chain. Only for a loopback endpoint
    (:func:`is_loopback_endpoint`, a local test server that accepts any key) and only when
    that chain finds none, a placeholder key is used, so the demo's commands work without
    hand-set credentials; any other endpoint without credentials stays NoCredentialsError.
    """
    config = Config(retries={"mode": "standard", "total_max_attempts": BOTOCORE_MAX_ATTEMPTS},
                    max_pool_connections=max_pool_connections,
                    connect_timeout=10, read_timeout=60)
    session = boto3.session.Session()
    extra = {}
    if is_loopback_endpoint(endpoint_url) and session.get_credentials() is None:
        extra = {"aws_access_key_id": LOOPBACK_KEY, "aws_secret_access_key": LOOPBACK_KEY,
                 "region_name": session.region_name or "us-east-1"}
    return session.client("s3", endpoint_url=endpoint_url, config=config, **extra)


@dataclass(frozen=True)
class ListedObject:
    """One listing entry: key, size in bytes and ETag (quotes stripped; '' locally)."""

    key: str
    size: int
    etag: str


def _error_code(exc: botocore.exceptions.ClientError) -> tuple[str, int]:
    """(S3 error code, HTTP status) of a botocore error."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return str(exc.response.get("Error", {}).get("Code", "")), int(status)


def _read_error(exc: botocore.exceptions.ClientError, key: str) -> Exception:
    """Map a GET/HEAD error to ObjectNotFound / ObjectAccessDenied, else return it unchanged."""
    code, status = _error_code(exc)
    if code in ("NoSuchKey", "404", "NotFound") or status == 404:
        return ObjectNotFound(key)
    if code in ("AccessDenied", "403", "Forbidden") or status == 403:
        return ObjectAccessDenied(f"{key}: 403 access denied (missing, or the role may not read "
                                  "it: without s3:ListBucket S3 answers 403 for a missing key)")
    return exc


class S3Store:
    """Objects in one S3 bucket via boto3.

    ``sse_kms_key_id`` set: every PUT asks for SSE-KMS with that key (the bucket policy
    denies puts without it); unset: no encryption header (moto, local stacks).
    """

    def __init__(self, bucket: str, client, sse_kms_key_id: str | None = None) -> None:
        self.bucket = bucket
        self.client = client
        self.sse_kms_key_id = sse_kms_key_id or None

    def get_bytes(self, key: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
        except botocore.exceptions.ClientError as exc:
            raise _read_error(exc, key) from exc
        return response["Body"].read()

    def head(self, key: str) -> ObjectHead | None:
        """The key's ETag, size and age (server Date minus Last-Modified), or None if absent."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except botocore.exceptions.ClientError as exc:
            error = _read_error(exc, key)
            if isinstance(error, ObjectNotFound):
                return None
            raise error from exc
        server_now = _http_date(response["ResponseMetadata"].get("HTTPHeaders", {}).get("date"))
        age = (server_now - response["LastModified"]).total_seconds() if server_now else 0.0
        return ObjectHead(response.get("ETag", "").strip('"'), int(response["ContentLength"]), age)

    def stored_sha256(self, key: str) -> str | None:
        """Hex SHA-256 S3 verified on upload (None if unknown): for encrypted objects,
        whose ETag is not the MD5 of their bytes."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except botocore.exceptions.ClientError:
            return None
        value = response.get("ChecksumSHA256")
        return base64.b64decode(value).hex() if value and "-" not in value else None

    def put_bytes(self, key: str, data: bytes, *, content_type: str,
                  metadata: dict[str, str] | None = None, if_match: str | None = None,
                  if_none_match: bool = False) -> str:
        """Upload ``data``; S3 checks the SHA-256 we send, so corruption in transit fails.

        ``if_match`` (an ETag) / ``if_none_match``: S3's atomic conditional write; a lost
        condition raises PreconditionFailed.
        """
        kwargs = {}
        if if_match is not None:
            kwargs["IfMatch"] = f'"{if_match}"'
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if self.sse_kms_key_id:
            kwargs.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=self.sse_kms_key_id)
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=key, Body=data, ContentType=content_type,
                Metadata=metadata or {}, ChecksumAlgorithm="SHA256",
                ChecksumSHA256=base64.b64encode(hashlib.sha256(data).digest()).decode(), **kwargs)
        except botocore.exceptions.ClientError as exc:
            code, status = _error_code(exc)
            # If-Match on a key that is gone answers 404: the condition lost all the same.
            if kwargs.keys() & {"IfMatch", "IfNoneMatch"} and (
                    status == 412 or code == "PreconditionFailed" or (if_match and status == 404)):
                raise PreconditionFailed(f"s3://{self.bucket}/{key}: {code or status}") from exc
            raise
        return response.get("ETag", "").strip('"')

    def list(self, prefix: str) -> Iterator[ListedObject]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield ListedObject(item["Key"], int(item["Size"]), item.get("ETag", "").strip('"'))

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = [{"Key": k} for k in keys[start:start + 1000]]
            response = self.client.delete_objects(Bucket=self.bucket,
                                                  Delete={"Objects": batch, "Quiet": True})
            if response.get("Errors"):
                raise RuntimeError(f"delete failed in s3://{self.bucket}: {response['Errors'][:5]}")


def _http_date(value: str | None) -> dt.datetime | None:
    """Parse an HTTP Date header (the server's clock), None if absent or unreadable."""
    from email.utils import parsedate_to_datetime
    try:
        parsed = parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None
    # HTTP dates are GMT; "-0000" parses as naive.
    return parsed.replace(tzinfo=dt.timezone.utc) if parsed and parsed.tzinfo is None else parsed


def _process_exists(pid: int) -> bool:
    """Whether a process with this id runs on this machine (signal 0 checks, sends nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return pid > 0


class LocalStore:
    """Objects as files under a directory; writes are atomic (temp file + rename).

    Conditional writes hold an flock on ``<root>/.cas.lock`` around check-and-rename, so
    processes on one machine get the same compare-and-swap S3 gives; ETags are MD5s.
    """

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self._swept: set[Path] = set()

    @contextlib.contextmanager
    def _cas_lock(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".cas.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def head(self, key: str) -> ObjectHead | None:
        path = self._path(key)
        try:
            data, stat = path.read_bytes(), path.stat()
        except FileNotFoundError:
            return None
        return ObjectHead(hashlib.md5(data).hexdigest(), stat.st_size, time.time() - stat.st_mtime)

    def stored_sha256(self, key: str) -> str | None:
        try:
            return hashlib.sha256(self._path(key).read_bytes()).hexdigest()
        except FileNotFoundError:
            return None

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"invalid key {key!r}")
        return self.root / key

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc

    def put_bytes(self, key: str, data: bytes, *, content_type: str,
                  metadata: dict[str, str] | None = None, if_match: str | None = None,
                  if_none_match: bool = False) -> str:
        if if_match is None and not if_none_match:
            return self._write(key, data)
        with self._cas_lock():
            current = self.head(key)
            if (if_none_match and current) or (if_match is not None and (
                    current is None or current.etag != if_match)):
                raise PreconditionFailed(f"{self.root / key}: changed since read")
            return self._write(key, data)

    def _write(self, key: str, data: bytes) -> str:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._sweep_orphans(path.parent)
        # A reader must never see a half-written file under its final name.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{os.getpid()}-",
                                   suffix=path.name)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return hashlib.md5(data).hexdigest()

    def _sweep_orphans(self, directory: Path) -> None:
        """Delete the temp files a killed writer left in ``directory`` (once per directory and
        store): ``.tmp-<pid>-*`` whose process no longer exists. A live writer's are kept."""
        if directory in self._swept:
            return
        self._swept.add(directory)
        for tmp in directory.glob(".tmp-*-*"):
            pid = tmp.name.split("-", 2)[1]
            if pid.isdigit() and not _process_exists(int(pid)):
                tmp.unlink(missing_ok=True)

    def list(self, prefix: str) -> Iterator[ListedObject]:
        base = self.root / prefix if prefix else self.root
        start = base if base.is_dir() else base.parent
        if not start.is_dir():
            return
        for path in sorted(start.rglob("*")):
            key = path.relative_to(self.root).as_posix()
            # Dot files are temp files and the CAS lock, never objects.
            if path.is_file() and key.startswith(prefix) and not path.name.startswith("."):
                yield ListedObject(key, path.stat().st_size, "")

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)


def open_store(uri: str, *, endpoint_url: str | None = None, max_pool_connections: int = 10,
               sse_kms_key_id: str | None = None) -> tuple[S3Store | LocalStore, Location]:
    """Return the store for ``uri`` and its parsed Location (whose prefix keys start with)."""
    location = parse_location(uri)
    if location.is_s3:
        client = make_s3_client(endpoint_url, max_pool_connections)
        return S3Store(location.bucket, client, sse_kms_key_id), location
    return LocalStore(location.root), location
