"""The day's budget cut, per lane, solved from a priority histogram on the driver.

Every candidate visit falls in a log-spaced priority bin (16 per octave). The driver
collects only (lane, bin, count) rows, gives each lane its budget and finds the bin at
which the lane's budget runs out; build_schedule keeps every visit above that bin and,
inside it, exactly the number that still fits, by priority. So the total never exceeds
the budget and no per-URL data reaches the driver.

Lane budgets (:func:`jobs.core.lanes.cut_budgets`): fast, audit and discovery get what
allocate planned for them (:meth:`jobs.core.lanes.LaneBudgets.planned`), or less if they
have fewer candidates; refresh gets everything else, so budget a lane cannot use flows to
refresh, and what refresh cannot use (fewer visits due than the budget) goes to lane
``backfill``: the next day's visits pulled forward (:func:`jobs.core.plan.backfill_visits`)
and the push signals not worth a planned visit (:func:`jobs.core.host_plan.plan_bucket`),
ranked by the freshness each buys, written to the schedule as refresh. ``audit`` is the
policy-independent freshness audit sample; its rows are written to the schedule with lane
``audit`` and method ``full``. Their ``priority`` is a
hash of (URL, day) (see :func:`jobs.core.host_plan.plan_bucket`), so when the audit budget
is smaller than the day's due sample, the cut keeps a uniform random subset of it rather
than the pages the policy thinks most likely changed.

Probe visits (``probe``: a host whose served-rate limit is a probe above what it served
before, :func:`jobs.core.host_health.probe_due`) sit in a bin above every priority, so
the cut keeps them first: otherwise a budget-bound day keeps only the limited host's
visits that beat the others on value, fewer than its limit, and no day tests whether the
host serves more. They are at most the host's cap a day (``floor(L)``), and still count
against the lane's budget. Rhythm checks (:func:`jobs.core.host_plan._rhythm_checks`) are
marked so too: one visit in the budget left unused, kept before the backfill pulls, that can
stop a page falsely timed on the day taking a visit a day for nothing.
"""
from __future__ import annotations

from jobs.core.lanes import cut_budgets

BINS_PER_OCTAVE = 16
ZERO_BIN = -100_000
# Above floor(log2(any double) x 16) = 16,384: probes go before every priority.
PROBE_BIN = 100_000
LANES = ("fast", "audit", "discovery", "refresh")
BACKFILL = "backfill"  # pulled-forward visits: only what the lanes above leave unused


def bin_column():
    from pyspark.sql import functions as F

    return (F.when(F.col("probe"), F.lit(PROBE_BIN))
            .when(F.col("priority") > 0, F.floor(F.log2("priority") * BINS_PER_OCTAVE))
            .otherwise(ZERO_BIN).cast("long"))


def cut_lane(hist: dict, budget: int) -> dict:
    """``hist`` maps bin -> count. Returns the threshold bin and how many to take in it."""
    taken = 0
    for b in sorted(hist, reverse=True):
        if taken + hist[b] > budget:
            return {"threshold_bin": b, "boundary_take": budget - taken, "selected": budget}
        taken += hist[b]
    return {"threshold_bin": None, "boundary_take": 0, "selected": taken}


def solve(candidates, planned: dict, total: int) -> dict:
    """Per-lane budget, candidate count, threshold bin and boundary take, for the lane
    budgets ``planned`` by allocate within the day's ``total``."""
    rows = candidates.withColumn("bin", bin_column()).groupBy("lane", "bin").count().collect()
    hist: dict = {}
    for r in rows:
        hist.setdefault(r["lane"], {})[int(r["bin"])] = int(r["count"])
    counts = {lane: sum(h.values()) for lane, h in hist.items()}
    budgets = cut_budgets(planned, total, counts)
    out = {}
    for lane in LANES:
        out[lane] = {"budget": budgets[lane], "candidates": counts.get(lane, 0),
                     "probes": hist.get(lane, {}).get(PROBE_BIN, 0),
                     **cut_lane(hist.get(lane, {}), budgets[lane])}
    spare = max(0, int(total) - sum(c["selected"] for c in out.values()))
    out[BACKFILL] = {"budget": spare, "candidates": counts.get(BACKFILL, 0),
                     "probes": hist.get(BACKFILL, {}).get(PROBE_BIN, 0),
                     **cut_lane(hist.get(BACKFILL, {}), spare)}
    return out


def apply(candidates, cut: dict):
    """Keep the visits inside each lane's budget (exactly ``selected`` per lane)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    visits = candidates.withColumn("bin", bin_column())
    keep_all = F.lit(False)
    boundary = F.lit(False)
    for lane, c in cut.items():
        in_lane = F.col("lane") == lane
        if c["threshold_bin"] is None:
            keep_all = keep_all | in_lane
        else:
            keep_all = keep_all | (in_lane & (F.col("bin") > c["threshold_bin"]))
            boundary = boundary | (in_lane & (F.col("bin") == c["threshold_bin"]))
    above = visits.filter(keep_all)
    # Only the boundary bins' rows are ranked globally; they are a small slice.
    edge = visits.filter(boundary & ~keep_all)
    order = Window.partitionBy("lane").orderBy(F.desc("priority"), "url", "due_s")
    takes = F.create_map(*[x for lane, c in cut.items()
                           for x in (F.lit(lane), F.lit(int(c["boundary_take"])))])
    edge = (edge.withColumn("_rank", F.row_number().over(order))
            .filter(F.col("_rank") <= takes[F.col("lane")]).drop("_rank"))
    return above.unionByName(edge).drop("bin")
