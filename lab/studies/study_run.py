"""Where a backtest run's ratio to the oracle comes from: by planned day, timed pages'
modelled against real freshness, and the Poisson pages' loss by evidence (issue 14).

Usage::

    python -m lab.studies.study_run --out /tmp/bt_B --workdir /tmp/bt_B_w --seeds 0 1 2

Reads the backtest's ``data/daily.parquet`` and ``data/pages.parquet`` (both policies) and the
``optimal`` run's last committed state and hosts (as :mod:`lab.studies.study_gap`), and
prints

* ``by day``: the importance-weighted freshness of ``optimal`` over the oracle's on each
  planned day, mean over seeds, and its means over days 1-5, 6-10 and 11 on: the learning
  curve (the oracle knows λ from day 1, ``optimal`` learns it and the rhythms);
* ``timed``: per page kind, the pages the planner times (``jobs.core.timing.shrunk_rhythm``
  on the last state, the planner's own rule) and those it does not: pages, visits a day,
  the freshness the model expects (:func:`jobs.core.timing.expected_freshness` at λ̂, the
  visits and the rhythm) against the freshness measured and the oracle's;
* ``rhythm kinds``: the daily and weekly publishers by why the planner does or does not
  time them (:func:`untimed_reason`) and their host's evidence (``lm``, ``push``, ``none``):
  pages, their share of the kind's weighted freshness under the oracle, their ratio to it,
  the points of the kind's ratio they add or take (Σ w (F − F_oracle) over the kind's Σ w
  F_oracle) and the visits a day of both;
* ``visits by speed``: where ``optimal``'s visits to Poisson pages differ from the oracle's,
  per decade of the true λ and λ̂ against it: the visits a day more than the oracle's and
  the importance-weighted fresh days they bought (Σ w (F − F_oracle), days per day);
* ``visits by kind and day``: ``optimal``'s fetches less the oracle's, per page kind and
  planned day (where the visits move as the planner learns);
* ``poisson loss``: the Poisson pages' importance-weighted freshness below the oracle's per
  evidence group -- observations in state (0, 1-2, 3-10, more), whether every one saw a
  change, and λ̂ against the true λ (``over``/``under``: off by more than 1.5×) -- in % of
  the oracle's weighted freshness on Poisson pages (a positive loss: the oracle did better).
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from jobs.config import load_config
from jobs.core import timing
from jobs.params import timing_params
from lab.studies.study_gap import run_parser, seed_pages
from lab.studies.study_timing import newest

OBSERVATION_EDGES = (-np.inf, 0.5, 2.5, 10.5, np.inf)
OBSERVATION_LABELS = ("0", "1-2", "3-10", ">10")
OFF_BY = 1.5  # λ̂/λ beyond this (either way): "over" / "under"
DAY_WINDOWS = ((1, 5), (6, 10), (11, None))


def day_ratios(daily: pd.DataFrame) -> tuple[pd.Series, dict]:
    """Per planned day (1 = the first), ``optimal``'s weighted freshness over the oracle's,
    mean over seeds; and its mean over each of :data:`DAY_WINDOWS` that has days."""
    t = daily.pivot_table(index=["seed", "day"], columns="policy",
                          values="freshness_weighted")
    if not {"optimal", "oracle"} <= set(t.columns):
        raise ValueError("daily needs both the optimal and the oracle policy")
    ratio = (t["optimal"] / t["oracle"]).reset_index(name="ratio")
    ratio["n"] = ratio.groupby("seed")["day"].rank(method="dense").astype(int)
    by_day = ratio.groupby("n")["ratio"].mean()
    windows = {}
    for lo, hi in DAY_WINDOWS:
        days = by_day.loc[lo:hi]
        if len(days):
            windows[f"{lo}-{hi if hi else int(days.index.max())}"] = float(days.mean())
    return by_day, windows


def timed_table(pages: pd.DataFrame) -> pd.DataFrame:
    """Per (kind, timed) of ``pages`` (``kind``, ``importance``, ``lambda_hat``, ``f``,
    ``f_oracle``, ``F``, ``F_oracle`` and the rhythm's ``period_s``, NaN: untimed): pages,
    visits a day (both policies) and weighted freshness modelled, measured and the
    oracle's."""
    modelled = timing.expected_freshness(pages["lambda_hat"].to_numpy(float),
                                         pages["f"].to_numpy(float),
                                         pages["period_s"].to_numpy(float))
    w = pages["importance"].to_numpy(float)
    frame = pd.DataFrame({
        "kind": pages["kind"].to_numpy(), "timed": np.isfinite(pages["period_s"].to_numpy(float)),
        "w": w, "w_model": w * modelled, "w_real": w * pages["F"].to_numpy(float),
        "w_oracle": w * pages["F_oracle"].to_numpy(float),
        "f": pages["f"].to_numpy(float), "f_oracle": pages["f_oracle"].to_numpy(float)})
    g = frame.groupby(["kind", "timed"]).agg(
        pages=("w", "size"), visits=("f", "sum"), visits_oracle=("f_oracle", "sum"),
        w=("w", "sum"), w_model=("w_model", "sum"), w_real=("w_real", "sum"),
        w_oracle=("w_oracle", "sum"))
    for k in ("model", "real", "oracle"):
        g[f"fresh_{k}"] = g.pop(f"w_{k}") / g["w"]
    return g.drop(columns="w")


UNTIMED_REASONS = ("timed", "fast lane", "no dated change", "refuted", "spread",
                   "too fast", "one dated change", "host and page tests")


def untimed_reason(pages: pd.DataFrame, params: timing.TimingParams) -> np.ndarray:
    """Why each page of ``pages`` is or is not timed, the first of :data:`UNTIMED_REASONS`
    that holds, in the order of the planner's gates (:func:`jobs.core.timing.shrunk_rhythm`):
    ``timed`` (a finite ``period_s``); ``fast lane`` (never timed); ``no dated change``;
    ``refuted`` (a change between two phase windows); ``spread`` (R̄ on the day below
    ``min_concentration``: several hours a day, or too much jitter); ``too fast`` (λ̂ above
    ``max_changes_per_period`` a day); ``one dated change`` (fewer than the host rule's
    ``host_min_dated_changes``); else ``host and page tests`` (a candidate neither its
    host's phase nor its own hour's test accepted). Reads ``period_s``, ``lane``,
    ``lambda_hat`` and the timing sums (missing sums: no evidence)."""
    sums = timing.stored(pages)
    n, _, _, r = timing._day_resultant(sums)  # the planner's own R̄ on the day
    lam = np.nan_to_num(pages["lambda_hat"].to_numpy(float))
    lane = pages["lane"].to_numpy() if "lane" in pages else np.full(len(pages), "refresh")
    conditions = [np.isfinite(pages["period_s"].to_numpy(float)), lane == "fast",
                  ~timing.counts(n, 1), timing.refuted(sums), r < params.min_concentration,
                  lam > params.max_changes_per_period,
                  ~timing.counts(n, params.host_min_dated_changes)]
    return np.select(conditions, list(UNTIMED_REASONS[:-1]), UNTIMED_REASONS[-1])


def rhythm_table(pages: pd.DataFrame, params: timing.TimingParams,
                 kinds=("daily", "weekly")) -> pd.DataFrame:
    """Per (kind, :func:`untimed_reason`, host evidence ``cls``) of the rhythm kinds of
    ``pages`` (``kind``, ``importance``, ``F``, ``F_oracle``, ``f``, ``f_oracle``, ``cls``
    and what :func:`untimed_reason` reads): pages, ``share`` of the kind's Σ w F_oracle,
    ``ratio`` Σ w F / Σ w F_oracle, ``points`` Σ w (F − F_oracle) over the kind's Σ w
    F_oracle (the group's part of the kind's ratio less 1) and visits a day of both."""
    p = pages[pages["kind"].isin(kinds)]
    w = p["importance"].to_numpy(float)
    frame = pd.DataFrame({
        "kind": p["kind"].to_numpy(), "why": untimed_reason(p, params),
        "cls": p["cls"].to_numpy(), "mine": w * p["F"].to_numpy(float),
        "ref": w * p["F_oracle"].to_numpy(float), "visits": p["f"].to_numpy(float),
        "visits_oracle": p["f_oracle"].to_numpy(float)})
    g = frame.groupby(["kind", "why", "cls"]).agg(
        pages=("mine", "size"), mine=("mine", "sum"), ref=("ref", "sum"),
        visits=("visits", "sum"), visits_oracle=("visits_oracle", "sum"))
    total = frame.groupby("kind")["ref"].sum()
    kind_total = total.reindex(g.index.get_level_values("kind")).to_numpy()
    g["share"] = g["ref"] / kind_total
    g["ratio"] = g["mine"] / g["ref"].where(g["ref"] > 0)
    g["points"] = (g["mine"] - g["ref"]) / kind_total
    return g[["pages", "share", "ratio", "points", "visits", "visits_oracle"]]


def poisson_loss(pages: pd.DataFrame) -> pd.DataFrame:
    """Per evidence group of the Poisson pages of ``pages`` (``kind``, ``lam``,
    ``lambda_hat``, ``importance``, ``F``, ``F_oracle``, ``f``, ``f_oracle``,
    ``n_observations``, ``n_changes``): pages, ``loss`` = Σ w (F_oracle − F) in % of the
    Poisson pages' Σ w F_oracle, mean visits a day of both, median λ and λ̂; worst first."""
    p = pages[pages["kind"] == "poisson"]
    total = float((p["importance"] * p["F_oracle"]).sum())
    if not total > 0:
        raise ValueError("no Poisson page with oracle freshness")
    ratio = p["lambda_hat"] / p["lam"]
    frame = pd.DataFrame({
        "observations": pd.cut(p["n_observations"], OBSERVATION_EDGES, labels=OBSERVATION_LABELS),
        "all_changed": p["n_changes"].to_numpy(float) >= p["n_observations"].to_numpy(float),
        "lambda_hat": np.where(ratio > OFF_BY, "over", np.where(ratio < 1 / OFF_BY, "under", "ok")),
        "loss": 100.0 * p["importance"] * (p["F_oracle"] - p["F"]) / total,
        "f": p["f"], "f_oracle": p["f_oracle"], "lam": p["lam"], "lam_hat": p["lambda_hat"]})
    g = frame.groupby(["observations", "all_changed", "lambda_hat"], observed=True).agg(
        pages=("loss", "size"), loss=("loss", "sum"), f=("f", "mean"),
        f_oracle=("f_oracle", "mean"), lam=("lam", "median"), lam_hat=("lam_hat", "median"))
    return g.sort_values("loss", ascending=False)


SPEED_EDGES = (0.0, 0.05, 0.5, 2.0, np.inf)
SPEED_LABELS = ("<0.05", "0.05-0.5", "0.5-2", ">2")


def poisson_visits(pages: pd.DataFrame) -> pd.DataFrame:
    """Per (true λ band, λ̂ over/ok/under) of the Poisson pages of ``pages``: pages, the visits
    a day above the oracle's, and ``fresh_w`` = Σ w (F − F_oracle)."""
    p = pages[pages["kind"] == "poisson"]
    ratio = p["lambda_hat"] / p["lam"]
    frame = pd.DataFrame({
        "lam": pd.cut(p["lam"], SPEED_EDGES, labels=SPEED_LABELS),
        "lambda_hat": np.where(ratio > OFF_BY, "over", np.where(ratio < 1 / OFF_BY, "under", "ok")),
        "extra_visits": p["f"] - p["f_oracle"],
        "fresh_w": p["importance"] * (p["F"] - p["F_oracle"])})
    return frame.groupby(["lam", "lambda_hat"], observed=True).agg(
        pages=("fresh_w", "size"), extra_visits=("extra_visits", "sum"),
        fresh_w=("fresh_w", "sum"))


def visits_by_kind_and_day(mine: pd.DataFrame, oracle: pd.DataFrame, kind: pd.Series,
                           days: list) -> pd.DataFrame:
    """``mine``'s fetches less ``oracle``'s (fetch logs: ``url``, ``fetched_at``) per page
    kind (``kind``: by url; "other" for a url it lacks) and planned day (1 = ``days[0]``,
    UTC dates; fetches on other days are not counted)."""
    def count(logs):
        date = pd.to_datetime(logs["fetched_at"], utc=True).dt.date
        k = kind.reindex(logs["url"].to_numpy()).fillna("other").to_numpy()
        t = pd.DataFrame({"kind": k, "day": date.map({d: i + 1 for i, d in enumerate(days)})})
        return t.dropna().astype({"day": int}).groupby(["kind", "day"]).size()
    diff = count(mine).sub(count(oracle), fill_value=0).unstack("day", fill_value=0)
    return diff.reindex(columns=range(1, len(days) + 1), fill_value=0).astype(int)


def seed_visits(out: str, workdir: str, seed: int) -> pd.DataFrame:
    """:func:`visits_by_kind_and_day` of one seed of a backtest (its fetch logs, its pages'
    kinds, its planned dates)."""
    from lab.backtest.report import page_kinds
    from lab.tools.family_table import pages as report_pages

    pages = report_pages(out, "optimal")
    pages = pages[pages["seed"] == seed]
    kind = pd.Series(page_kinds(pages), index=pages["url"].to_numpy())
    daily = pd.read_parquet(os.path.join(out, "data", "daily.parquet"))
    daily = daily[(daily["seed"] == seed) & (daily["policy"] == "optimal")]
    days = sorted(pd.to_datetime(daily["date"].astype(str)).dt.date.unique())
    logs = {p: pd.read_parquet(os.path.join(workdir, f"seed{seed}", p, "data", "fetch_logs"),
                               columns=["url", "fetched_at"]) for p in ("optimal", "oracle")}
    return visits_by_kind_and_day(logs["optimal"], logs["oracle"], kind, days)


def run_pages(out: str, workdir: str, seed: int, params: timing.TimingParams) -> pd.DataFrame:
    """One seed's per-page frame (:func:`lab.studies.study_gap.seed_pages`) with the last
    state's observation counts and the planner's rhythm of each page (``period_s``)."""
    pages, _, _ = seed_pages(out, workdir, seed)
    _, state = newest(os.path.join(workdir, f"seed{seed}", "optimal", "data"), "state")
    state = state.reset_index(drop=True)
    codes, hosts = pd.factorize(state["host"])
    rhythm = timing.shrunk_rhythm(timing.stored(state), params,
                                  state["lambda_hat"].to_numpy(float), codes, len(hosts),
                                  eligible=(state["lane"] != "fast").to_numpy())
    state = state.assign(period_s=rhythm.period_s)
    kept = ["url", "n_observations", "n_changes", "period_s", "lane",
            *[c for c in timing.TIMING_COLUMNS if c in state]]
    return pages.merge(state[kept], on="url")


def main(argv=None) -> int:
    args = run_parser(__doc__).parse_args(argv)
    pd.set_option("display.width", 200)
    by_day, windows = day_ratios(pd.read_parquet(os.path.join(args.out, "data", "daily.parquet")))
    print("by day: optimal / oracle, weighted freshness, mean over seeds")
    print(" ".join(f"{v:.3f}" for v in by_day) + "\n" + ", ".join(
        f"days {k}: {v:.4f}" for k, v in windows.items()))
    params = timing_params(load_config(None, []))
    for seed in args.seeds:
        pages = run_pages(args.out, args.workdir, seed, params)
        print(f"\nseed {seed}: timed pages (visits a day summed, freshness weighted)")
        print(timed_table(pages).round(3).to_string())
        print(f"seed {seed}: daily and weekly publishers by why they are timed or not, and "
              f"their host's evidence")
        print(rhythm_table(pages, params).round(3).to_string())
        speed = poisson_visits(pages)
        print(f"seed {seed}: Poisson pages' visits a day above the oracle's "
              f"(all: {speed['extra_visits'].sum():+.1f}) and the weighted freshness they bought")
        print(speed.round(2).to_string())
        print(f"seed {seed}: fetches of optimal less the oracle's, by page kind and planned day")
        print(seed_visits(args.out, args.workdir, seed).to_string())
        loss = poisson_loss(pages)
        print(f"seed {seed}: Poisson pages' loss to the oracle by evidence "
              f"(% of their oracle freshness; all groups {loss['loss'].sum():+.2f})")
        print(loss.round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
