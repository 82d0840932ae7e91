"""lab.studies.study_timing: timed pages per kind, own evidence vs the host's phase."""
import numpy as np
import pandas as pd

from jobs.config import Config, load_config
from jobs.core import timing
from jobs.core.timing import DAY_S
from jobs.params import timing_params
from lab.studies.study_timing import timed_by_kind

MON = pd.Timestamp("2026-11-02T00:00Z").timestamp()


def test_pages_are_counted_by_how_they_are_timed():
    changes = [MON + np.arange(6) * DAY_S + 8 * 3600,           # daily, own evidence
               MON + np.array([2, 4]) * DAY_S + 8.1 * 3600,     # daily, through the host
               MON + np.array([1.3, 3.9, 7.1]) * DAY_S,          # poisson, not timed
               np.array([]),                                     # poisson, no dates
               MON + np.array([3, 10]) * DAY_S + 8.05 * 3600]   # weekly
    sums = timing.empty(5)
    for i, t in enumerate(changes):
        timing.add_changes(sums, np.full(len(t), i), t, 1.0)
    state = pd.DataFrame({"url": list("abcde"), "host": ["h"] * 5,
                          "lambda_hat": [0.6, 0.6, 0.6, 0.6, 0.14],
                          "importance": [3.0, 1.0, 1.0, 1.0, 2.0], **sums})
    kinds = pd.DataFrame({"url": list("abcde"),
                          "kind": ["daily", "daily", "poisson", "poisson", "weekly"]})
    # the weekly page's two changes are one instant of the week: timed on its own ...
    own = timed_by_kind(state, kinds, timing_params(Config()))
    assert own.loc["weekly", "timed_own"] == 1 and own.loc["weekly", "timed_week"] == 1
    # ... and through the host without the week's two-change rule
    out = timed_by_kind(state, kinds,
                        timing_params(load_config(None, ["timing.week_min_dated_changes=3"])))
    assert out.loc["daily", "pages"] == 2 and out.loc["daily", "weight"] == 4 / 8
    assert out.loc["weekly", "timed_host"] == 1 and out.loc["weekly", "timed_week"] == 1
    assert out.loc["daily", "timed_week"] == 0
    assert out.loc["daily", "timed_own"] == 0.5 and out.loc["daily", "timed_host"] == 0.5
    assert out.loc["poisson", "timed_own"] == 0 and out.loc["poisson", "timed_host"] == 0
    fast = timed_by_kind(state, kinds, timing_params(Config()),
                         pd.DataFrame({"url": ["a"], "lane": ["fast"]}))
    # the fast-lane anchor neither is timed nor lends the host its phase
    assert fast.loc["daily", "timed_own"] == 0 and fast.loc["daily", "timed_host"] == 0


def test_placement_counts_visits_just_after_the_change_instant():
    from lab.studies.study_timing import placement_by_kind
    mon = pd.Timestamp("2026-11-02T00:00Z")  # a Monday
    truth = pd.DataFrame({"url": ["d", "w", "p"], "kind": ["daily", "weekly", "poisson"],
                          "period_s": [DAY_S, 7 * DAY_S, np.nan],
                          "change_s": [15 * 3600.0, 2 * DAY_S + 9 * 3600, np.nan]})
    at = [mon + pd.Timedelta(hours=h) for h in (15.25, 24 + 14.5, 48 + 15.9, 48 + 9.5, 1)]
    visits = pd.DataFrame({"url": ["d", "d", "d", "w", "p"], "not_before": at,
                           "lane": "refresh"})
    # as the schedule files store it: microseconds
    visits["not_before"] = visits["not_before"].astype("datetime64[us, UTC]")
    out = placement_by_kind(visits, truth)
    assert list(out.index) == ["daily", "weekly"]            # no fixed instant: left out
    assert out.loc["daily", "visits"] == 3
    assert out.loc["daily", "just_after"] == 2 / 3             # 15 min, 23.5 h, 54 min
    assert out.loc["daily", "median_lag_h"] == 0.9
    assert out.loc["weekly", "just_after"] == 1.0               # Wednesday 09:30
