"""The sim fleet's robots.txt, sitemaps and feeds: real documents the planner's intake parsers
read back into the simulator's own announcements, each at the host's next fetch."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest

from jobs import schemas
from jobs.core import intake
from lab.sim import Simulation, WebParams, run_history
from lab.sim.documents import documents_table, fetch_phase, pushed_signals


@pytest.fixture(scope="module")
def sim():
    s = Simulation(WebParams(n_urls=1500, n_hosts=16, seed=4, start="2026-01-01"))
    run_history(s, 3, lambda d, t, r: None)
    return s


def test_documents_meet_the_contract_and_every_host_has_a_robots_txt(sim):
    table = documents_table(sim, 2)
    schemas.check_schema(schemas.DOCUMENTS, table.schema, "sim")
    docs = table.to_pandas()
    hosts = sim.web.host_policy()
    robots = docs[docs["kind"] == "robots"]
    assert sorted(robots["url"]) == sorted(f"https://{h}/robots.txt" for h in hosts["host"])
    assert set(docs["kind"]) == {"robots", "sitemap", "feed"}


def test_intake_reads_back_the_announcements_of_the_fetch_window(sim):
    day = 2
    docs = documents_table(sim, day).to_pandas()
    out = intake.documents_frame(docs, intake.Limits())
    assert not (out["out"] == "quarantine").any()
    # robots.txt: the host's own crawl delay
    policy = out[out["out"] == "policy"].set_index("host")["crawl_delay_s"]
    truth = sim.web.host_policy().set_index("host")["crawl_delay_s"]
    np.testing.assert_allclose(policy.sort_index(), truth.clip(0.1, 86400).sort_index(),
                               rtol=1e-6)
    # sitemaps and feeds: the URLs announced since the host's previous fetch
    sig = pd.concat([sim.web.signals.for_day(d, sim.web.pages) for d in (day - 1, day)])
    sig = sig[sig["source"].isin(["sitemap", "feed"])]
    host = sig["url"].str.split("/").str[2]
    phase = host.map(fetch_phase)
    window = sig[(sig["emit_at"] >= day - 1 + phase) & (sig["emit_at"] < day + phase)]
    got = out[out["out"] == "signal"]
    assert set(got["url"]) == set(window["url"])
    assert len(got) == window["url"].nunique()
    start = pd.Timestamp(sim.params.start_epoch_s, unit="s", tz="UTC")
    # the sitemap shows each page's last announcement (a stale host's may claim an older time)
    latest = window.sort_values("emit_at").groupby("url")["signaled_at"].last()
    claimed = got.set_index("url")["signaled_at"]
    diff = (claimed - (start + pd.to_timedelta(latest.reindex(claimed.index), unit="D")))
    assert diff.abs().max() <= pd.Timedelta(seconds=1)  # lastmod is written to the second


def test_only_pushed_signals_stay_hand_written(sim):
    pushed = pushed_signals(sim.signals_table(2))
    assert set(pc.unique(pushed["source"]).to_pylist()) <= {"websub", "indexnow"}
