"""Sample generator: determinism, contract types, agreement with ground truth."""
import filecmp
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

from lab.tools.generate_sample import generate_sample, main
from lab.sim import SyntheticWeb, WebParams, politeness_violations
from lab.sim.contract import (FETCH_LOG_SCHEMA, FRONTIER_SCHEMA, HOST_POLICY_SCHEMA,
                               IMPORTANCE_SCHEMA, SIGNALS_SCHEMA)
from lab.sim.rand import hex_strings

SHARES = (0.3, 0.2, 0.1, 0.2, 0.2)  # ensure every validator class occurs on 15 hosts
TINY = dict(urls=1500, hosts=15, days=5, end_date="2024-03-05", seed=11, keep_days=10,
            validator_shares=SHARES)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    summary = generate_sample(root, **TINY)
    return root, summary


def _files(root):
    return sorted(p.relative_to(root) for p in Path(root).rglob("*.parquet"))


def test_same_seed_gives_identical_files(tiny, tmp_path):
    root, _ = tiny
    generate_sample(tmp_path, **TINY)
    assert _files(root) == _files(tmp_path)
    for rel in _files(root):
        assert filecmp.cmp(root / rel, tmp_path / rel, shallow=False), rel


def test_chunking_does_not_change_data(tiny, tmp_path):
    root, _ = tiny
    generate_sample(tmp_path, chunk_pages=300, **TINY)
    cols = ["url", "fetched_at"]
    a = pd.read_parquet(root / "fetch_logs").sort_values(cols).reset_index(drop=True)
    b = pd.read_parquet(tmp_path / "fetch_logs").sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_contract_layout_and_types(tiny):
    root, summary = tiny
    dts = sorted(p.name for p in (root / "fetch_logs").iterdir())
    assert dts == [f"dt=2024-03-0{d}" for d in range(1, 6)]
    assert sorted(p.name for p in (root / "signals").iterdir()) == [
        "dt=2024-03-03", "dt=2024-03-04", "dt=2024-03-05"]
    assert [p.name for p in (root / "frontier").iterdir()] == ["dt=2024-03-05"]
    for sub, schema in [("fetch_logs", FETCH_LOG_SCHEMA), ("signals", SIGNALS_SCHEMA),
                        ("frontier", FRONTIER_SCHEMA)]:
        for f in (root / sub).rglob("part-*.parquet"):
            assert ds.dataset(f).schema.equals(schema, check_metadata=False), f
    assert ds.dataset(root / "importance/part-0.parquet").schema.equals(IMPORTANCE_SCHEMA)
    assert ds.dataset(root / "host_policy/part-0.parquet").schema.equals(HOST_POLICY_SCHEMA)
    logs = pd.read_parquet(root / "fetch_logs")
    assert len(logs) == summary["fetch_rows"] > 0
    assert set(logs.lane.dropna()) == set()
    ok = logs.status == 200
    assert logs.content_hash[ok].notna().all() and logs.content_hash[~ok].isna().all()
    assert (logs.bytes[logs.status == 304] < 1000).all()
    assert 0.002 < (logs.status.isin([0, 500, 502])).mean() < 0.03  # ~1 % errors
    assert logs.last_modified.dropna().str.match(r"^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$").all()
    imp = pd.read_parquet(root / "importance")
    assert (imp.importance >= 0).all() and imp.url.is_unique
    assert (root / "_truth" / "params.json").exists()
    assert json.loads((root / "_truth" / "params.json").read_text())["seed"] == 11


def test_history_is_polite(tiny):
    root, _ = tiny
    logs = pd.read_parquet(root / "fetch_logs", columns=["host", "fetched_at", "status"])
    policy = pd.read_parquet(root / "host_policy")
    assert politeness_violations(logs, policy).empty
    assert (logs.status != 503).all()
    # Sanity of the audit itself: two requests 0 s apart are caught.
    dup = pd.concat([logs.iloc[:1], logs.iloc[:1]])
    assert politeness_violations(dup, policy).gap_violations.sum() == 1


def test_logs_agree_with_truth(tiny):
    root, _ = tiny
    logs = pd.read_parquet(root / "fetch_logs").sort_values(["url", "fetched_at"])
    hosts = pd.read_parquet(root / "_truth" / "hosts.parquet")
    web = SyntheticWeb(WebParams(n_urls=1500, n_hosts=15, seed=11, start="2024-03-01",
                                 keep_days=10, validator_shares=SHARES))
    web.advance_to(4)
    page = web.page_ids(logs.url.to_numpy(object))
    assert (page >= 0).all()
    t = (logs.fetched_at - pd.Timestamp("2024-03-01", tz="UTC")).dt.total_seconds().to_numpy() / 86400
    version = web.version_at(page, t)
    full = (logs.status == 200).to_numpy()
    expect = hex_strings(web.content_hash_u64(page[full], version[full])).to_pylist()
    assert logs.content_hash[full].tolist() == expect
    # On honest hosts a 304 only ever answers for the version last received.
    honest = logs.host.isin(hosts.host[hosts.validator == "honest"]).to_numpy()
    logs = logs.assign(version=np.where(full, version, -1), page=page, v_now=version)
    logs["held"] = logs.version.where(logs.version >= 0).groupby(logs.url).ffill()
    nm = (logs.status == 304).to_numpy() & honest
    assert nm.sum() > 20
    assert (logs.held[nm] == logs.v_now[nm]).all()
    frozen = logs.host.isin(hosts.host[hosts.validator == "frozen_lm"]).to_numpy()
    lied = (logs.status == 304).to_numpy() & frozen & (logs.held != logs.v_now).to_numpy()
    assert frozen.any() and lied.sum() > 0  # frozen Last-Modified hosts hide real changes


def test_cli(tmp_path, capsys):
    summary = main(["--root", str(tmp_path), "--urls", "400", "--hosts", "5", "--days", "2",
                    "--end-date", "2024-05-02", "--seed", "2"])
    assert json.loads(capsys.readouterr().out)["fetch_rows"] == summary["fetch_rows"] > 0
    with pytest.raises(ValueError):
        generate_sample(tmp_path / "x", urls=10, hosts=10, days=2)
