"""The S3 endpoint is AWS (TLS) unless set; plain http only on loopback or on purpose
(issue 9, section 4). Every place that needs a local S3 sets its endpoint explicitly."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobs.config import ConfigError, PublishConfig, load_config
from jobs.publish import publish

REPO = Path(__file__).resolve().parents[2]


def test_default_endpoint_is_aws_itself():
    """An empty endpoint: boto3 talks to AWS over TLS, never to whatever listens on 9000."""
    assert load_config(None, []).publish.endpoint_url is None
    assert PublishConfig().endpoint_url is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:9000", "http://localhost:9000",
                                 "http://[::1]:9000", "http://127.3.4.5", "https://s3.example.com",
                                 "https://10.0.0.5:9443", ""])
def test_tls_or_loopback_endpoints_are_accepted(url):
    assert load_config(None, [f"publish.endpoint_url={url}"]).publish.endpoint_url == (url or None)


@pytest.mark.parametrize("url", ["http://10.0.0.5:9000", "http://s3.example.com",
                                 "http://127.0.0.1.example.com", "http://0.0.0.0:9000"])
def test_plain_http_off_loopback_is_refused_unless_allowed(url):
    with pytest.raises(ConfigError, match="allow_insecure_endpoint"):
        load_config(None, [f"publish.endpoint_url={url}"])
    cfg = load_config(None, [f"publish.endpoint_url={url}", "publish.allow_insecure_endpoint=true"])
    assert cfg.publish.endpoint_url == url


@pytest.mark.parametrize("url", ["ftp://s3.example.com", "s3.example.com:9000", "http://"])
def test_malformed_endpoints_are_refused(url):
    with pytest.raises(ConfigError, match="must be https"):
        load_config(None, [f"publish.endpoint_url={url}"])


def test_publish_refuses_an_insecure_endpoint_before_any_network(tmp_path):
    """publish() and its CLI check the endpoint first (a typo must not reach the network)."""
    with pytest.raises(ConfigError, match="plain http"):
        publish(str(tmp_path), "s3://b", "2024-05-02", {}, endpoint_url="http://203.0.113.9:9000")
    cli = subprocess.run([sys.executable, "-m", "jobs.publish", "--staging", str(tmp_path),
                          "--target", "s3://b", "--date", "2024-05-02",
                          "--endpoint-url", "http://203.0.113.9:9000"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert cli.returncode != 0 and "plain http" in cli.stderr


def test_demo_sets_its_loopback_endpoint_explicitly(tmp_path):
    from lab.tools.demo import demo_overrides
    cfg = load_config(None, demo_overrides(tmp_path, "http://127.0.0.1:9000"))
    assert cfg.publish.endpoint_url == "http://127.0.0.1:9000"
    with pytest.raises(ValueError, match="endpoint required"):
        demo_overrides(tmp_path, "")


def test_backtest_sets_its_endpoint_explicitly_or_publishes_nowhere_remote(tmp_path):
    from lab.backtest.loop import BacktestSpec, planner_config
    spec = BacktestSpec()
    root = tmp_path / "adaptive" / "data"
    cfg = planner_config(spec, root, "adaptive", "http://127.0.0.1:5555")
    assert cfg.publish.endpoint_url == "http://127.0.0.1:5555"
    assert cfg.publish.target.startswith("s3://")
    history = planner_config(spec, root, "adaptive", None)
    assert not history.publish.target.startswith("s3")  # no endpoint: a local directory


def test_every_caller_that_publishes_sets_the_endpoint():
    """The places that talk to a local S3 pass its endpoint; none relies on a default."""
    dag_test = (REPO / "tests" / "ops" / "test_dag.py").read_text()
    assert "publish.endpoint_url={s3.endpoint_url}" in dag_test
    for path in ("tests/ops/test_publish.py", "tests/ops/test_verify.py"):
        text = (REPO / path).read_text()
        calls = text.count("publish(") + text.count("verify(")
        assert calls and "endpoint_url=" in text, path


@pytest.mark.parametrize("url,loopback", [("http://127.0.0.1:9000", True),
                                          ("http://localhost:9", True), ("http://[::1]:9", True),
                                          ("https://s3.example.com", False),
                                          ("http://127.0.0.1.example.com", False),
                                          ("http://0.0.0.0:9000", False), (None, False),
                                          ("", False)])
def test_loopback_endpoints_are_recognised_by_their_host(url, loopback):
    from jobs.objstore import is_loopback_endpoint

    assert is_loopback_endpoint(url) is loopback


def test_a_loopback_server_needs_no_hand_set_credentials_and_aws_gets_none(tmp_path):
    """Without any configured credentials, the loopback S3 server (the demo's) is reachable
    with a placeholder key; any other endpoint still has no credentials at all."""
    import botocore.exceptions

    from jobs.objstore import LOOPBACK_KEY, make_s3_client
    from jobs.publish import ensure_bucket
    from tests.s3server import MotoS3Server, patched_env

    none = {k: None for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                              "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                              "AWS_ENDPOINT_URL_S3")}
    none.update({"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                 "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"})
    with MotoS3Server() as s3, patched_env(none):
        ensure_bucket(s3.endpoint_url, "demo")
        client = make_s3_client(s3.endpoint_url)
        client.put_object(Bucket="demo", Key="k", Body=b"x")
        assert client.get_object(Bucket="demo", Key="k")["Body"].read() == b"x"
        assert client._request_signer._credentials.access_key == LOOPBACK_KEY
        remote = make_s3_client("https://s3.storage.invalid")
        with pytest.raises(botocore.exceptions.NoCredentialsError):
            remote.list_objects_v2(Bucket="demo")
