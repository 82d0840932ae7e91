"""The backtest's discovery delay: birth of a page to its first copy, from the fleet's logs."""
import numpy as np
import pandas as pd

from lab.backtest.loop import discovery_delay, first_copies
from lab.sim import Simulation, WebParams, run_history


def test_discovery_delay_is_a_restricted_mean_over_the_window():
    born = np.array([-1.0, 10.2, 10.5, 11.0, 13.0])
    first = np.array([0.0, 10.7, np.nan, 11.25])  # page 4 not yet in the copies
    d = discovery_delay(born, first, 10, 12)
    # Born in [10, 12): pages 1-3; page 2 never copied counts until the window's end.
    assert d["new_pages"] == 3
    assert d["discovery_delay_days"] == (0.5 + 1.5 + 0.25) / 3
    assert d["discovery_delay_copied_days"] == (0.5 + 0.25) / 2
    assert d["new_pages_copied_share"] == 2 / 3


def test_first_copies_are_the_first_200_of_a_policy_lane():
    sim = Simulation(WebParams(n_urls=300, n_hosts=3, seed=1, birth_rate=0.05))
    first = np.full(0, np.nan)
    logs = []

    def on_day(day, table, record):
        nonlocal first
        first = first_copies(sim, first, table)
        logs.append(table.to_pandas())

    run_history(sim, 4, on_day)
    log = pd.concat(logs, ignore_index=True)
    ok = log[log["status"] == 200]
    assert len(first) == len(sim.web.pages.born)
    # Every page the crawler got a 200 of has its first copy at the earliest such fetch.
    expect = ok.groupby("url")["fetched_at"].min()
    url_of = pd.Index(sim.web.pages.url[:len(first)])
    got = first[url_of.get_indexer(expect.index)]
    start = pd.Timestamp(sim.params.start, tz="UTC")
    want = ((expect - start) / pd.Timedelta(1, "D")).to_numpy(float)
    np.testing.assert_allclose(got, want, atol=1e-9)
    # A page never fetched with a 200 has none, and no copy precedes its birth.
    assert np.isnan(first[~url_of.isin(expect.index)]).all()
    copied = ~np.isnan(first)
    assert (first[copied] >= sim.web.pages.born[:len(first)][copied] - 1e-9).all()
