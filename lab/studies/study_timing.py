"""Which pages does the time-of-day rhythm time, and through what? (issue 14 §1)

Usage::

    python -m lab.studies.study_timing --workdir /tmp/bt_S0_w --seeds 0

For each seed of a backtest work directory, the last committed state of the policy's run
(default ``optimal``) is read with the run's own ``[timing]`` config, and every URL's rhythm
is recomputed with the planner's functions (the fast lane of the newest plan excluded, as
the planner excludes it): timed on its own evidence
(:func:`jobs.core.timing.rhythm`), timed through its host's phase
(:func:`jobs.core.timing.shrunk_rhythm`, hosts as the allocation passes group them), or not
timed. Joined to the simulator's page kinds (``_truth/pages``), it prints per kind the
pages, their share of the importance weight, the share timed each way and the share timed
on the week (either way): a Poisson page
timed is a false positive (its visits move to one time of day; its freshness is unchanged,
but its rate is capped at one a day). Where the run's truth has the publishers' change
instants, it also prints where the visits to daily and weekly publishers fell: the share
within an hour after the change (:func:`placement_by_kind`).
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pandas as pd

from jobs import partitions
from jobs.config import load_config
from jobs.core import timing
from jobs.core.host_groups import HostGroups
from jobs.params import timing_params
from jobs.paths import partition


def newest(root: str, table: str) -> tuple[str, pd.DataFrame]:
    """The newest committed partition of ``table`` under ``root`` (date, rows)."""
    dates = sorted(d.split("=", 1)[1] for d in os.listdir(os.path.join(root, table))
                   if d.startswith("dt="))
    for dt in reversed(dates):
        part = partition(root, table, dt)
        if partitions.is_committed(part):
            files = partitions.committed_files(part, table)
            return dt, pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    raise FileNotFoundError(f"no committed {table} under {root}")


def timed_by_kind(state: pd.DataFrame, kinds: pd.DataFrame, params: timing.TimingParams,
                  lanes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per page kind: pages, importance share, shares timed on own evidence / via the host.
    ``lanes`` (url, lane: the day's plan) marks the fast lane, which is never timed."""
    lam = pd.to_numeric(state["lambda_hat"]).to_numpy(dtype=float)
    sums = timing.stored(state)
    groups = HostGroups.of(state["host"].to_numpy(dtype=object))
    eligible = None
    if lanes is not None:
        lane = state[["url"]].merge(lanes[["url", "lane"]], on="url", how="left")["lane"]
        eligible = (lane.fillna("refresh") == "refresh").to_numpy()
    own = timing.rhythm(sums, params, lam).timed & (True if eligible is None else eligible)
    rhythm = timing.shrunk_rhythm(sums, params, lam, groups.codes, groups.n, eligible)
    shrunk = rhythm.timed
    frame = pd.DataFrame({"url": state["url"], "own": own, "host": shrunk & ~own,
                          "week": rhythm.period_s == timing.WEEK_S,
                          "w": pd.to_numeric(state["importance"]).fillna(0.0).to_numpy(float)})
    frame = frame.merge(kinds, on="url", how="left").fillna({"kind": "unknown"})
    out = frame.groupby("kind").agg(pages=("url", "size"), weight=("w", "sum"),
                                    timed_own=("own", "mean"), timed_host=("host", "mean"),
                                    timed_week=("week", "mean"))
    out["weight"] = out["weight"] / out["weight"].sum()
    return out


def schedules(root: str) -> pd.DataFrame:
    """Every day's published rows (url, not_before) under ``root``, as ``_shards.json`` lists
    them (the file each day's publish trusts)."""
    frames = []
    base = os.path.join(root, "schedules")
    for d in sorted(os.listdir(base)):
        listing = os.path.join(base, d, "_shards.json")
        if not d.startswith("dt=") or not os.path.exists(listing):
            continue
        with open(listing) as fh:
            for shard in json.load(fh)["shards"]:
                frames.append(pd.read_parquet(os.path.join(base, d, shard["file"]),
                                              columns=["url", "not_before", "lane"]))
    return pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame({"url": [], "not_before": pd.to_datetime([], utc=True), "lane": []})


def placement_by_kind(visits: pd.DataFrame, truth: pd.DataFrame,
                      just_after_s: float = 3600.0) -> pd.DataFrame:
    """Where the visits to publishers with a fixed change instant (``truth``: url, kind,
    ``period_s``, ``change_s`` seconds into the day or the week from Monday 00:00 UTC) fell:
    per kind, the visits, the share within ``just_after_s`` after the change instant (fresh
    for nearly a whole period when it changed) and the median lag in hours."""
    t = visits.merge(truth[truth["period_s"].notna()], on="url", how="inner")
    when = (pd.to_datetime(t["not_before"], utc=True)
            - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    period = t["period_s"].to_numpy(float)
    origin = np.where(period == timing.WEEK_S, timing.WEEK_ORIGIN_S, 0.0)
    lag = np.mod(when - origin - t["change_s"].to_numpy(float), period)
    frame = pd.DataFrame({"kind": t["kind"], "just_after": lag <= just_after_s,
                          "lag_h": lag / 3600.0})
    return frame.groupby("kind").agg(visits=("lag_h", "size"), just_after=("just_after", "mean"),
                                     median_lag_h=("lag_h", "median"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--policy", default="optimal")
    args = ap.parse_args(argv)
    tables = []
    for seed in args.seeds:
        run = os.path.join(args.workdir, f"seed{seed}", args.policy)
        params = timing_params(load_config(os.path.join(run, "recrawl.toml")))
        dt, state = newest(os.path.join(run, "data"), "state")
        kinds = pd.read_parquet(os.path.join(run, "data", "_truth", "pages"))
        plan_dt, plan = newest(os.path.join(run, "data"), "plan")
        table = timed_by_kind(state, kinds, params, plan)
        print(f"seed {seed}, state dt={dt}, {len(state)} URLs, lanes of plan dt={plan_dt}:")
        print(table.round(3).to_string())
        if "change_s" in kinds.columns:  # backtests from 5b245ac on
            print("visits to publishers with a fixed change time, every planned day:")
            print(placement_by_kind(schedules(os.path.join(run, "data")), kinds)
                  .round(3).to_string())
        tables.append(table.assign(seed=seed))
    if len(tables) > 1:
        both = pd.concat(tables).reset_index()
        print("mean over seeds:")
        print(both.groupby("kind")[["pages", "weight", "timed_own", "timed_host", "timed_week"]].mean()
              .round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
