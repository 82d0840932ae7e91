"""Signals that discover and defer, through update_state and allocate in a real local Spark
session (jobs.core.signal_evidence; docs/allocation.md, "Signals that defer")."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from jobs import allocate, update_state
from tests.conftest import make_config
from tests.tiny_web import fetch, write

D1, D2, D3 = "2026-11-01", "2026-11-02", "2026-11-03"
S, E = "https://s.example/x", "https://e.example/y"


def ts(x):
    return pd.Timestamp(x, tz="UTC")


def _build(root):
    # s.example earns signal trust on D2: its claim (D2 06:00) is confirmed by the D2 12:00
    # fetch. e.example sends signals too, but none is ever scored: untrusted.
    write(root, "fetch_logs", [fetch(S, "2026-11-01T03:00", h="s1"),
                               fetch(E, "2026-11-01T03:00", h="e1")], dt=D1)
    write(root, "fetch_logs", [fetch(S, "2026-11-02T12:00", h="s2"),
                               fetch(E, "2026-11-02T12:00", h="e1")], dt=D2)
    write(root, "signals", [{"url": S, "signaled_at": ts("2026-11-02T06:00"), "source": "feed"}],
          dt=D2)
    write(root, "fetch_logs", [fetch(E, "2026-11-03T12:00", h="e1")], dt=D3)
    write(root, "signals", [
        # The sitemap still says D2 06:00: not newer than the D2 12:00 copy, so no change.
        {"url": S, "signaled_at": ts("2026-11-02T06:00"), "source": "sitemap"},
        # The same from an untrusted host: not evidence.
        {"url": E, "signaled_at": ts("2026-11-01T00:00"), "source": "sitemap"},
        # URLs not in state: one on the trusted host, one on the untrusted one.
        {"url": "https://s.example/new", "signaled_at": ts("2026-11-03T01:00"),
         "source": "sitemap"},
        {"url": "https://e.example/new", "signaled_at": ts("2026-11-03T01:00"),
         "source": "sitemap"}], dt=D3)


@pytest.fixture(scope="module")
def planned(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("sig"))
    _build(root)
    # One scored claim, decayed a day, is just under 1: min_scored 0.5 keeps the host trusted.
    cfg = make_config(root, "signals.min_scored=0.5", "signals.min_accuracy=0.6",
                      "budget.daily_fetches=50", "signals.max_defer_days=1")
    for d in (D1, D2, D3):
        update_state.run(cfg, d, spark, bootstrap=(d == D1))
    record = allocate.run(cfg, D3, spark)
    read = lambda t, d: pd.read_parquet(os.path.join(root, t, f"dt={d}"))  # noqa: E731
    return {"cfg": cfg, "record": record, "read": read}


def test_a_trusted_stale_lastmod_is_evidence_of_no_change(planned):
    read = planned["read"]
    assert read("hosts", D2).set_index("host").loc["s.example", "signal_trusted"]
    assert read("hosts", D3).set_index("host").loc["s.example", "signal_trusted"]
    s3 = read("state", D3).set_index("url")
    assert pd.Timestamp(s3.loc[S, "signal_unchanged_at"]).tz_localize(None) == pd.Timestamp(D3)
    assert pd.isna(s3.loc[S, "pending_signal_at"])
    assert pd.isna(s3.loc[E, "signal_unchanged_at"])
    # Allocate moved the page's rhythm: one deferred page, the trusted host's.
    assert planned["record"]["signal_deferred"] == 1


def test_a_trusted_signal_for_an_unknown_url_enters_discovery(planned):
    rec, plan = planned["record"], planned["read"]("plan", D3).set_index("url")
    assert rec["signal_urls_discovered"] == 1 and rec["signal_urls_not_discovered"] == 1
    assert plan.loc["https://s.example/new", "lane"] == "discovery"
    assert "https://e.example/new" not in plan.index
    # Not folded into state: a URL enters state with its first fetch.
    assert "https://s.example/new" not in planned["read"]("state", D3)["url"].tolist()


@pytest.mark.parametrize("mode, taken", [("any", 2), ("none", 0), ("trusted", 1)])
def test_discover_from_chooses_the_hosts(planned, spark, mode, taken):
    from jobs.config import load_config
    from jobs.partitions import committed_files
    cfg = load_config(None, [f"paths.root={planned['cfg'].paths.root}",
                             f"signals.discover_from={mode}", "spark.master=local[2]"])
    state = spark.read.parquet(*committed_files(cfg.paths.table("state", D3), "state"))
    rows, counts = allocate.signal_frontier(spark, cfg, D3, state, None)
    assert counts == {"signal_urls_discovered": taken, "signal_urls_not_discovered": 2 - taken}
    assert (rows is None) == (taken == 0)
    if rows is not None:
        assert rows.count() == taken and set(rows.columns) == {"url", "importance", "host"}
