r"""When in the day or week a page changes, and what visiting just after that is worth
(pure numpy).

**Evidence.** Each dated change (the modification instant under a trusted Last-Modified, or
the change instant a host with earned signal trust claims in a push signal, counted when the
signal arrives: :func:`jobs.core.state_update.fold_day`) adds
the unit vector of its angle on two circles, the day and the week; a changed fetch whose
interval ``(p, t]`` is shorter than ``max_arc_s`` adds the vector of the interval's midpoint
weighted by :math:`w = \operatorname{sinc}(L/P)`, the length of the mean of :math:`e^{i\theta}`
over an arc of length L (a long arc says nearly nothing about the phase). The sums decay
with the λ statistics' half-life, so five float columns per URL (:data:`TIMING_COLUMNS`)
hold the whole memory, and a sixth counts the changes that refute a day rhythm ("Rhythm
checks" below). A threshold of k dated changes (``min_dated_changes`` and the others below)
is met by a decayed weight above k − 1 (:func:`counts`): k changes on different days never
weigh k.

**Rhythm.** With :math:`n` the decayed weight and :math:`C, S` the decayed sums on a circle of
period :math:`P`, the mean resultant length :math:`\bar R = \sqrt{C^2+S^2}/n` measures how
concentrated the changes are (1: all at one instant of the period; about
:math:`1/\sqrt n` for changes uniform in time, as a Poisson page's are), the mean direction
:math:`\operatorname{atan2}(S, C)` gives the phase, and :math:`P/2\pi\,\sqrt{-2\ln\bar R}` the
circular standard deviation (Mardia & Jupp, *Directional Statistics*, Wiley 2000, §2.3).
A page is *timed* with period one week when the week circle passes (``min_dated_changes``
and ``min_concentration``), else with period one day when the day circle does, else it is
not timed (even spacing, the Poisson case).

**Value.** A timed page with period :math:`P` changes at most once per period, at a known
phase, with probability :math:`p` per period. Visited every :math:`k` periods just after the
phase, its copy is fresh from the visit until the first change after it, so its
time-averaged freshness is
:math:`F_T = \frac{1}{k}\sum_{j=0}^{k-1}(1-p)^j = \frac{1-(1-p)^k}{kp}`. With
:math:`p = 1 - e^{-\lambda P}` (λ the page's Poisson-equivalent rate, which is what the
censored estimator reports for it) and :math:`f = 1/(kP)` visits per day,

.. math:: F_T(f) = g\,F(f), \qquad g = \frac{\lambda P}{1 - e^{-\lambda P}}, \qquad
          f \le 1/P,

where :math:`F(f) = (f/\lambda)(1 - e^{-\lambda/f})` is the Poisson freshness of even visits
(Cho & Garcia-Molina, "Effective page refresh policies for Web crawlers", ACM TODS 28(4),
2003), and :math:`F_T = 1` for :math:`f \ge 1/P`. So the optimal policy prices a timed page
as a Poisson page of weight :math:`g w` whose rate is capped at :math:`1/P`: its marginal
value :math:`g w F'(f)` is larger than an untimed page's at the same λ (:math:`g > 1`, the same
freshness for fewer visits) and zero beyond one visit per period. The Lagrangian solve
(equal weighted marginal freshness, Cho & Garcia-Molina 2003) is unchanged, the box
:math:`[f_{min}, \min(f_{max}, 1/P)]` is only tighter. Brewington & Cybenko ("How dynamic is
the Web?", Computer Networks 33, 2000) saw page modifications concentrate on working hours
and weekdays; a page that publishes at a fixed time is the extreme case.

**Fetch-locking.** A trusted Last-Modified gives only the *last* change before the fetch.
For a page that changes many times per fetch interval it lies just before the fetch, about
:math:`\text{Exp}(\lambda)` earlier, so fetches at a steady time of day would make a fast
Poisson page look timed: the resultant length of such instants is
:math:`1/\sqrt{1 + (2\pi/\lambda P)^2}`, 0.79 at :math:`\lambda P = 8` and 0.95 at 20: fast
front pages would be read as timed and capped at one visit a day. So a page is timed on a circle only while
:math:`\hat\lambda P \le` ``max_changes_per_period`` (default 8), where no fetch-locked
page can reach ``min_concentration`` = 0.9; and once a page is timed, its Last-Modified
instants date its phase but count as plain changed/unchanged bits for λ
(:func:`jobs.core.state_update.fold_day`): placed just after its change, a timed page's
modification age would otherwise be minutes at every fetch and its Poisson λ̂ explode
(:math:`n/\sum s`). λ̂ then stays the Poisson-equivalent :math:`-\ln(1-p)/P` the value
model assumes.

The gate reads λ̂, and λ̂ of a page whose every fetch saw a change rests on its prior (the
likelihood is flat above :math:`\ln n / t`): a page that changes 40 times a day, once timed
and visited once a day, keeps finding a change, keeps a λ̂ of a few a day and stays timed.
A daily publisher with :math:`p \approx 1` shows the same changed bits, so the bits cannot
tell them apart; the planner's fast lane (front pages and feeds by URL pattern, or λ̂ and
importance above its thresholds) can, and its pages are never timed
(:func:`shrunk_rhythm`'s ``eligible``).

**Tight evidence.** Fewer than ``min_dated_changes`` dated changes time a page on its own when
there are at least ``tight_min_dated_changes`` (3) and their circular sd on the circle is at
most ``tight_spread_s`` (30 min): three uniform instants are that tight 0.7 % of the time on
the day and 0.01 % on the week (five at :math:`\bar R \ge 0.9`, the main rule, about 2 %).
On the week the rate must also say weekly, :math:`\hat\lambda \cdot 7 \le`
``few_dates_max_changes_per_week``, as for the host's week below: a daily publisher whose
few dated changes fell on one weekday stays on the day. On the week two changes do
(``week_min_dated_changes``): two uniform instants are within ``tight_spread_s`` of circular
sd there 1.2 % of the time (on the day 8 %, so the day keeps three). A page timed on fewer
than ``min_dated_changes`` changes takes at least its host's publishers' own sd (κ_w below)
as its spread where its host has anchors (:func:`_host_spread_floor`): these rules accept
changes *because* they sit close together, so their own sd understates the page's jitter.

**Shrinkage to the host.** Publishers keep house hours: a host's dated pages tend to change
at one time of day. :func:`shrunk_rhythm` pools the day-circle sums of a host's *anchor* URLs
(those concentrated on the day on their own evidence); where the pool is concentrated too it
gives the host a phase :math:`\mu_h` and a spread :math:`\sigma_h`. A URL with as few as
``host_min_dated_changes`` dated changes is then timed on the day at its own mean direction
when they sit at that phase: the log likelihood ratio of a von Mises density with mean
:math:`\mu_h` and :math:`\kappa = 1/\max(\sigma_h, \sigma_{min})^2` against the uniform is

.. math:: \log\Lambda = \kappa\,C - n \log I_0(\kappa), \qquad
          C = \sum_j w_j \cos(\theta_j - \mu_h),

which needs only the stored sums (:math:`C` is the statistic of the V-test for a specified
mean direction; Mardia & Jupp 2000, ch. 6), and must reach ``host_min_log_odds``
(default :math:`\log 100`). Two changes each within about 34 minutes of the host's phase
pass at the default 30-minute floor; one never does. Weekly publishers keep the host's hour
on their own weekday: such a URL, whose dated changes also agree on the week circle (the week
adds no spread to the day's, so they all fell on one weekday) and whose rate is about one
change a week (:math:`\hat\lambda \cdot 7 \le` ``few_dates_max_changes_per_week``, which a daily
publisher's Poisson-equivalent rate exceeds), is timed on the week instead: two dated changes
a week or two apart are enough, where its own evidence would need five, five weeks. The fold
reads Last-Modified as a plain change bit for every URL the planner may time this way
(:func:`last_modified_is_change_bit`).

**Page-level rhythm.** Pages of one host may keep their own hours, not the host's. A
candidate the host's phase does not time is timed at its own hour when the log prior odds
that a URL of its host is a publisher, :math:`\log\frac{a+1}{j-a+1}` (a anchors, j URLs with
enough evidence to be judged), plus the log Bayes factor of von Mises changes with unknown
mean against uniform times, :math:`\log I_0(\kappa_w R) - n\log I_0(\kappa_w)` (R the resultant
length of its changes: the von Mises density, Mardia & Jupp 2000, §3.5, integrated over
the mean with Abramowitz & Stegun 9.6.16), reach :data:`PAGE_MIN_LOG_ODDS` (log 10: posterior
odds, the prior being in them); κ_w is how
tightly the host's anchors keep their own hours (:func:`_host_hours`). A URL timed through
its host either way gets as phase the posterior mean direction of its hour
(:func:`_posterior_phase`): shrunk toward the anchors' mean hour as much as the anchors'
hours agree (κ₀) and its own changes are few.

**Placement.** A timed page visited once every k ≥ 1 periods is next visited at the first
instant ``phase + lag`` after its last fetch plus k − 1 periods (:func:`next_phase_after`), where
``lag = visit_lag_s`` + two circular standard deviations: for k = 1 the first change time after
its last visit. One visited more often keeps its grid, shifted through the nearest such
instant (:func:`snap_to_phase`). Once that instant has passed, the next one from the window on
(:func:`jobs.core.plan.due_visits`); the host's slots then put it at or after that instant.
Not the instant nearest one period after the last fetch: that is almost two periods away when
the fetch was off the phase, as the fetches before a page is timed are.

**Rhythm checks.** Dated changes can be locked to something other than the page's changes.
A trusted push signal claims the *last* change before the host's sitemap snapshot or feed
poll, so a page that changes 50 times a day claims one change a day, each minutes before
the snapshot: as concentrated as a daily publisher's, and its λ̂ (every fetch changed, a
flat likelihood resting on its prior, docs/estimation.md) passes the fetch-locking gate.
Visited just after that "phase" it is changed at every visit, as a publisher with
:math:`p \approx 1` is: its bits cannot tell them apart, and it would be visited many times
a day for almost no freshness. An interval
that misses the phase can tell: a once-a-day publisher cannot change between a visit after
its phase and its next phase window; a fast page almost surely does. So

* the fold (:func:`jobs.core.state_update.fold_day`) counts in ``tod_off_n`` (decayed
  with the other sums) each changed interval shorter than a day that lies between the
  page's phase window :math:`[\phi - h, \phi + h]` (:func:`day_window`: h two of its own
  circular sds, at least ``host_min_spread_s`` each) and the next, starting after the
  window, or after φ at a fetch that saw a change (that day's change is seen)
  (:func:`off_phase`); one such change refutes the day rhythm (``REFUTED_AT``) until a
  half-life has passed;
* a day-timed page its policy visits above ``f_min`` that never went unchanged
  (``n_observations`` = ``n_changes``) gets a *rhythm check*: a visit halfway from its
  last visit after its phase to its next phase window (:func:`rhythm_check_at`), as a
  backfill candidate (:func:`jobs.core.host_plan.plan_bucket`), so it takes only budget the
  day leaves unused. Unchanged, the page has shown it can go unchanged and is not checked
  again; changed, its rhythm is refuted and it is priced as a Poisson page.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from jobs.core.freshness import freshness

DAY_S = 86400.0
WEEK_S = 7 * DAY_S
#: Monday 1970-01-05 00:00 UTC: week phases count from a Monday midnight.
WEEK_ORIGIN_S = 4 * DAY_S

#: Decayed weight, then (cos, sin) sums on the day circle and on the week circle, then the
#: decayed count of changes seen away from the page's phase of the day (a refuted rhythm).
TIMING_COLUMNS = ("tod_n", "tod_cos", "tod_sin", "tow_cos", "tow_sin", "tod_off_n")
#: Decayed off-phase changes that refute a day rhythm: one, until a half-life has passed.
REFUTED_AT = 0.5
#: The shortest interval a rhythm check may cover: a shorter one says little about any rate.
MIN_CHECK_ARC_S = 3600.0


@dataclass(frozen=True)
class TimingParams:
    """``[timing]`` as the fold and the plan need it (built by :mod:`jobs.params`)."""

    enabled: bool
    min_dated_changes: float
    min_concentration: float
    visit_lag_s: float
    max_arc_s: float
    max_changes_per_period: float
    host_min_dated_changes: float
    host_min_log_odds: float
    host_min_spread_s: float
    few_dates_max_changes_per_week: float
    tight_min_dated_changes: float
    tight_spread_s: float
    week_min_dated_changes: float
    burst_max_poisson_prob: float = 0.0   # jobs.core.bursts; 0: no burst rechecks
    burst_recheck_s: float = 43200.0


def empty(n: int) -> dict:
    """``n`` rows without evidence."""
    return {c: np.zeros(int(n)) for c in TIMING_COLUMNS}


def stored(frame) -> dict:
    """The sums of a state frame (any mapping of columns); a frame without them (older state,
    frontier pages) has none, and a null, NaN or infinite sum (corrupt state) reads as no
    evidence rather than poisoning its host's pool."""
    n = len(frame)
    out = {}
    for c in TIMING_COLUMNS:
        v = np.asarray(frame[c], dtype=float) if c in frame else np.zeros(n)
        out[c] = np.where(np.isfinite(v), v, 0.0)
    return out


def decayed(sums: dict, factor) -> dict:
    """Every sum times ``factor`` (:math:`2^{-\\Delta/h}`, one per row): old rhythm fades."""
    f = np.asarray(factor, dtype=float)
    return {c: np.asarray(sums[c], dtype=float) * f for c in TIMING_COLUMNS}


def _angles(when_s):
    t = np.asarray(when_s, dtype=float)
    return (2 * np.pi * np.mod(t, DAY_S) / DAY_S,
            2 * np.pi * np.mod(t - WEEK_ORIGIN_S, WEEK_S) / WEEK_S)


def add_changes(sums: dict, rows, when_s, weight) -> None:
    """Add changes at instants ``when_s`` (epoch seconds) of rows ``rows``, in place."""
    rows = np.asarray(rows, dtype=np.int64)
    w = np.asarray(weight, dtype=float) * np.ones(len(rows))
    keep = np.isfinite(np.asarray(when_s, dtype=float)) & (w > 0)
    rows, w = rows[keep], w[keep]
    day, week = _angles(np.asarray(when_s, dtype=float)[keep])
    for col, values in (("tod_n", w), ("tod_cos", w * np.cos(day)), ("tod_sin", w * np.sin(day)),
                        ("tow_cos", w * np.cos(week)), ("tow_sin", w * np.sin(week))):
        np.add.at(sums[col], rows, values)


def arc_evidence(start_s, end_s, max_arc_s: float):
    """A changed interval ``(start, end]`` as (midpoint, weight): weight
    :math:`\\operatorname{sinc}(L/\\text{day})` for ``L <= max_arc_s``, else 0."""
    start, end = np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float)
    length = end - start
    ok = np.isfinite(length) & (length > 0) & (length <= max_arc_s)
    return (start + end) / 2.0, np.where(ok, np.sinc(np.where(ok, length, 0.0) / DAY_S), 0.0)


def counts(n, k) -> np.ndarray:
    """Whether a decayed weight ``n`` of dated changes counts as ``k`` changes: more than
    k − 1. Each change weighs :math:`2^{-\text{age}/h}` (h the λ statistics' half-life), so k
    changes on different days never weigh k, and k − 1 changes never more than k − 1: a
    threshold of k dated changes is met by k of them unless decay has taken more than one
    change's weight (two changes a week apart weigh 1.95 at h = 90 days)."""
    return np.asarray(n, dtype=float) > k - 1


@dataclass(frozen=True)
class Rhythm:
    """Per page: ``period_s`` (NaN: not timed), ``phase_s`` (seconds into the period, from
    midnight UTC or Monday midnight UTC) and ``spread_s`` (circular standard deviation)."""

    period_s: np.ndarray
    phase_s: np.ndarray
    spread_s: np.ndarray

    @property
    def timed(self) -> np.ndarray:
        return np.isfinite(self.period_s)


def rhythm(sums: dict, params: TimingParams, lam) -> Rhythm:
    r"""The period, phase and spread of each page's changes (see the module notes); a page
    with :math:`\hat\lambda P` above ``max_changes_per_period`` (changes per day ``lam``) is
    never timed on that circle: see "Fetch-locking" in the module notes."""
    n = np.asarray(sums["tod_n"], dtype=float)
    lam = np.nan_to_num(np.asarray(lam, dtype=float) * np.ones(len(n)))
    m = len(n)
    period, phase, spread = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    if not params.enabled or m == 0:
        return Rhythm(period, phase, spread)
    enough = counts(n, params.min_dated_changes)
    few = ~enough & counts(n, params.tight_min_dated_changes)
    few_week = ~enough & counts(n, min(params.tight_min_dated_changes,
                                       params.week_min_dated_changes))
    safe_n = np.where(n > 0, n, 1.0)
    for p_s, c, s in ((DAY_S, "tod_cos", "tod_sin"), (WEEK_S, "tow_cos", "tow_sin")):
        cos, sin = np.asarray(sums[c], dtype=float), np.asarray(sums[s], dtype=float)
        r = np.clip(np.hypot(cos, sin) / safe_n, 0.0, 1.0)
        sd = _sd_s(r, p_s)
        # Few changes do when they are tight (module notes, "Tight evidence").
        tight = (few if p_s == DAY_S else few_week) & (sd <= params.tight_spread_s) & (
            p_s == DAY_S or lam * p_s / DAY_S <= params.few_dates_max_changes_per_week)
        # The week wins where both pass (a weekly page is also concentrated in the day).
        take = ((enough & (r >= params.min_concentration)) | tight) & (
            lam * p_s / DAY_S <= params.max_changes_per_period)
        if p_s == DAY_S:  # a change away from the phase refutes it (module notes)
            take &= ~refuted(sums)
        angle = np.mod(np.arctan2(sin, cos), 2 * np.pi)
        period = np.where(take, p_s, period)
        phase = np.where(take, angle / (2 * np.pi) * p_s, phase)
        spread = np.where(take, sd, spread)
    return Rhythm(period, phase, spread)


def last_modified_is_change_bit(sums: dict, params: TimingParams, lam) -> np.ndarray:
    """Rows whose trusted Last-Modified the fold reads as a plain change bit: every URL the
    planner may time, on its own evidence (:func:`rhythm`) or through its host (a day
    candidate of :func:`shrunk_rhythm`). A superset, because the fold has no host pool: a
    few Poisson pages whose few dated changes happen to sit close together in the day lose
    their modification ages for λ until more evidence arrives."""
    return rhythm(sums, params, lam).timed | _day_candidates(sums, params, lam)[0]


def _day_candidates(sums: dict, params: TimingParams, lam):
    """Rows with enough concentrated day evidence to be timed through a host; the day
    circle's (n, cos, sin); and which rows pass the day's gates (R̄, fetch-locking)."""
    n, cos, sin, r = _day_resultant(sums)
    lam = np.nan_to_num(np.asarray(lam, dtype=float) * np.ones(len(n)))
    day_gate = ((r >= params.min_concentration) & (lam <= params.max_changes_per_period)
                & ~refuted(sums))
    shrinking = params.enabled and params.host_min_dated_changes < params.min_dated_changes
    cand = day_gate & counts(n, params.host_min_dated_changes) & shrinking
    return cand, (n, cos, sin), day_gate


def _day_resultant(sums: dict):
    """The day circle's decayed weight, cos and sin sums, and mean resultant length."""
    n = np.asarray(sums["tod_n"], dtype=float)
    cos, sin = np.asarray(sums["tod_cos"], dtype=float), np.asarray(sums["tod_sin"], dtype=float)
    return n, cos, sin, np.clip(np.hypot(cos, sin) / np.where(n > 0, n, 1.0), 0.0, 1.0)


def refuted(sums: dict) -> np.ndarray:
    """Rows whose day rhythm a change away from its phase refuted (module notes, "Rhythm
    checks"); sums without ``tod_off_n`` (older callers) refute nothing."""
    off = sums.get("tod_off_n")
    if off is None:
        return np.zeros(len(sums["tod_n"]), bool)
    return np.nan_to_num(np.asarray(off, dtype=float)) >= REFUTED_AT


def day_window(sums: dict, params: TimingParams, lam):
    """Each row's own phase on the day (seconds after midnight UTC) and the half-width of the
    window its changes fall in: two of its own circular sds, at least ``host_min_spread_s``
    each. NaN where its day evidence would not time it, alone or through its host (fewer than
    ``host_min_dated_changes`` dated changes, ``min_concentration`` or the fetch-locking gate
    not met)."""
    n, cos, sin, r = _day_resultant(sums)
    lam = np.nan_to_num(np.asarray(lam, dtype=float) * np.ones(len(n)))
    fewest = min(params.host_min_dated_changes, params.tight_min_dated_changes)
    ok = (params.enabled & counts(n, fewest)
          & (r >= params.min_concentration) & (lam <= params.max_changes_per_period))
    phase = np.mod(np.arctan2(sin, cos), 2 * np.pi) / (2 * np.pi) * DAY_S
    half = 2.0 * np.maximum(_sd_s(r, DAY_S), params.host_min_spread_s)
    return np.where(ok, phase, np.nan), np.where(ok, half, np.nan)


def off_phase(start_s, end_s, start_changed, phase_s, half_width_s) -> np.ndarray:
    """Whether each interval ``(start, end]`` (shorter than a day) lies between the phase
    window :math:`[\\phi - h, \\phi + h]` of the day and the next: it starts after the window, or
    after φ at a fetch that saw a change (``start_changed``: that day's change is seen), and
    ends before the next window opens. A once-a-day publisher cannot change in it."""
    start, end = np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float)
    phase, half = np.asarray(phase_s, dtype=float), np.asarray(half_width_s, dtype=float)
    length = end - start
    known = np.isfinite(length) & np.isfinite(phase) & np.isfinite(half) & (2 * half < DAY_S)
    # Position of the start from the window's opening, and of the window's close.
    since_open = np.mod(start - np.nan_to_num(phase - half), DAY_S)
    after = (since_open >= 2 * half) | ((since_open >= half)
                                        & np.asarray(start_changed, dtype=bool))
    return known & (length > 0) & (length < DAY_S) & after & (since_open + length < DAY_S)


def rhythm_check_at(anchor_s, phase_s, half_width_s) -> np.ndarray:
    """The instant halfway from ``anchor`` (a visit after the phase) to the opening of the next
    phase window: a change seen then is :func:`off_phase`. NaN where the anchor is not after
    φ, or the interval would be shorter than ``MIN_CHECK_ARC_S``."""
    anchor = np.asarray(anchor_s, dtype=float)
    phase, half = np.asarray(phase_s, dtype=float), np.asarray(half_width_s, dtype=float)
    since_open = np.mod(anchor - np.nan_to_num(phase - half), DAY_S)
    to_next = DAY_S - since_open
    ok = (np.isfinite(anchor) & np.isfinite(phase) & np.isfinite(half)
          & (since_open >= half) & (to_next / 2.0 >= MIN_CHECK_ARC_S))
    return np.where(ok, anchor + to_next / 2.0, np.nan)


def _log_i0(k):
    r""":math:`\log I_0(\kappa)`; past 500 (where ``np.i0`` nears overflow) the asymptotic
    series :math:`\kappa - \frac12\log(2\pi\kappa) + \log(1 + \frac{1}{8\kappa} +
    \frac{9}{128\kappa^2})` (Abramowitz & Stegun 9.7.1), relative error below 1e-9 there."""
    k = np.asarray(k, dtype=float)
    small = np.minimum(k, 500.0)
    big = np.maximum(k, 500.0)
    asym = big - 0.5 * np.log(2 * np.pi * big) + np.log1p(1 / (8 * big) + 9 / (128 * big * big))
    return np.where(k <= 500.0, np.log(np.i0(small)), asym)


def _sd_rad(r):
    return np.sqrt(-2.0 * np.log(np.clip(r, 1e-300, 1.0)))


def _sd_s(r, period_s):
    """Circular sd (seconds) on a circle of ``period_s`` from the mean resultant length."""
    return _sd_rad(r) / (2 * np.pi) * period_s


def shrunk_rhythm(sums: dict, params: TimingParams, lam, codes, n_hosts: int,
                  eligible=None) -> Rhythm:
    r""":func:`rhythm`, plus the day rhythm of URLs with few dated changes timed through their
    host: at the host's phase (module notes, "Shrinkage to the host") or at their own hour when
    the host's publishers keep their own hours ("Page-level rhythm"). ``codes[i]`` is row i's
    host, 0..n_hosts-1.

    A URL timed by its own evidence keeps its own rhythm; a URL timed through its host gets
    period one day and as phase its own mean direction shrunk toward the host's
    (:func:`_posterior_phase`), or period one week and its own direction on the week when its
    dated changes all fell on one weekday and its rate is about one change a week
    (:func:`_on_one_weekday`); its spread is the host pool's circular sd (at the host's
    phase) or its publishers' own day-to-day sd (page-level). Rows where ``eligible`` is false
    (the planner's fast lane: module notes, "Fetch-locking") are never timed and lend their
    host nothing.
    """
    ok = np.ones(len(sums["tod_n"]), bool) if eligible is None else np.asarray(eligible, bool)
    own = rhythm(sums, params, lam)
    own = Rhythm(*(np.where(ok, v, np.nan) for v in (own.period_s, own.phase_s, own.spread_s)))
    cand, (n, cos, sin), day_gate = _day_candidates(sums, params, lam)
    day_gate &= ok
    cand &= ~own.timed & ok
    enough = counts(n, params.min_dated_changes)
    anchor = day_gate & enough
    if not anchor.any():
        return own
    codes = np.asarray(codes, dtype=np.int64)
    lam_v = np.nan_to_num(np.asarray(lam, dtype=float) * np.ones(len(n)))
    between_mu, kappa0, kappa_w, log_prior = _host_hours(codes, n_hosts, anchor, n, cos, sin,
                                                         ok, lam_v, params)
    own = _host_spread_floor(own, enough, codes, kappa_w, np.isfinite(log_prior))
    if not cand.any():
        return own

    def per_host(values):
        return np.bincount(codes, weights=np.where(anchor, values, 0.0), minlength=n_hosts)

    pool_n, pool_c, pool_s = per_host(n), per_host(cos), per_host(sin)
    pool_r = np.hypot(pool_c, pool_s) / np.where(pool_n > 0, pool_n, 1.0)
    has_phase = (pool_n > 0) & (pool_r >= params.min_concentration)
    mu = np.arctan2(pool_s, pool_c)
    sd_h = _sd_rad(pool_r)
    floor = 2 * np.pi * params.host_min_spread_s / DAY_S
    kappa = 1.0 / np.maximum(sd_h, floor) ** 2
    # The host phase test (V-test at the host's phase) ...
    rows = np.flatnonzero(cand)
    h = codes[rows]
    at_host = has_phase[h]
    k = kappa[h]
    agreement = cos[rows] * np.cos(mu[h]) + sin[rows] * np.sin(mu[h])
    take_host = at_host & (k * agreement - n[rows] * _log_i0(k) >= params.host_min_log_odds)
    # ... and the page-level test: the page's own hour, with the host's prior (module notes).
    kw = kappa_w[h]
    log_bf = _log_i0(kw * np.hypot(cos[rows], sin[rows])) - n[rows] * _log_i0(kw)
    take_page = ~take_host & (log_prior[h] + log_bf >= PAGE_MIN_LOG_ODDS)
    keep = take_host | take_page
    take, h, kw, take_host = rows[keep], h[keep], kw[keep], take_host[keep]
    if not len(take):
        return own
    period, phase, spread = own.period_s.copy(), own.phase_s.copy(), own.spread_s.copy()
    weekly = _on_one_weekday(sums, take, n, lam_v, params)
    week_angle = np.mod(np.arctan2(sums["tow_sin"][take], sums["tow_cos"][take]), 2 * np.pi)
    day_angle = _posterior_phase(kappa0[h], between_mu[h], kw, cos[take], sin[take])
    period[take] = np.where(weekly, WEEK_S, DAY_S)
    phase[take] = np.where(weekly, week_angle / (2 * np.pi) * WEEK_S, day_angle / (2 * np.pi) * DAY_S)
    # sd_h and the publishers' own sd are in radians already
    spread[take] = np.where(take_host, sd_h[h], 1.0 / np.sqrt(kw)) / (2 * np.pi) * DAY_S
    return Rhythm(period, phase, spread)


#: Posterior log odds (the host's prior included) at which the page-level test times a URL at
#: its own hour: 10 to 1. A wrong one costs little (one visit a day at most, refuted by the
#: first change away from its phase); a missed publisher its periodic value.
PAGE_MIN_LOG_ODDS = float(np.log(10.0))
#: The least day-to-day circular sd (seconds) the page-level test assumes of a host's
#: publishers: a tighter one would let two changes a few seconds apart time a page alone.
MIN_PAGE_SPREAD_S = 300.0


def _a1_inverse(r):
    r""":math:`A_1^{-1}(\bar R)`, the von Mises concentration whose mean resultant length is
    :math:`\bar R` (the standard piecewise approximation: Fisher, *Statistical Analysis of
    Circular Data*, 1993, ch. 4; Mardia & Jupp 2000, §5.3)."""
    r = np.clip(np.asarray(r, dtype=float), 0.0, 1.0 - 1e-9)
    high = np.maximum(r, 0.85)
    return np.where(r < 0.53, 2 * r + r ** 3 + 5 * r ** 5 / 6,
                    np.where(r < 0.85, -0.4 + 1.39 * r + 0.43 / (1 - r),
                             1.0 / (high ** 3 - 4 * high ** 2 + 3 * high)))


def _host_hours(codes, n_hosts, anchor, n, cos, sin, ok, lam, params: TimingParams):
    r"""What a host's anchors say about the hours of its publishers (module notes,
    "Page-level rhythm"), per host: the mean direction :math:`\mu_b` of the anchors' own
    hours (one vote each) and the concentration :math:`\kappa_0` of those hours around it
    (from the unbiased :math:`\hat\rho^2 = \frac{m}{m-1}(\bar R_b^2 - \frac1m)` of m anchors:
    0 for one anchor); the concentration :math:`\kappa_w` of a publisher's changes around its
    own hour (the anchors' pooled within-page :math:`\bar R_w`, sd at least
    ``MIN_PAGE_SPREAD_S``); and the log prior odds that a URL with day evidence publishes at a
    fixed hour: anchors against the other URLs of the host whose evidence could have made them
    anchors, with a Laplace prior."""
    def count(mask, values=1.0):
        return np.bincount(codes, weights=np.where(mask, values, 0.0), minlength=n_hosts)

    ang = np.arctan2(sin, cos)
    m = count(anchor)
    bc, bs = count(anchor, np.cos(ang)), count(anchor, np.sin(ang))
    safe_m = np.where(m > 0, m, 1.0)
    rho2 = np.where(m >= 2, m / np.maximum(m - 1, 1.0) * ((bc ** 2 + bs ** 2) / safe_m ** 2
                                                          - 1.0 / safe_m), 0.0)
    kappa0 = np.where(m >= 2, _a1_inverse(np.sqrt(np.clip(rho2, 0.0, 1.0))), 0.0)
    pool_n = count(anchor, n)
    r_w = count(anchor, np.hypot(cos, sin)) / np.where(pool_n > 0, pool_n, 1.0)
    floor = 2 * np.pi * MIN_PAGE_SPREAD_S / DAY_S
    kappa_w = 1.0 / np.maximum(_sd_rad(np.where(pool_n > 0, r_w, 0.0)), floor) ** 2
    judged = ok & counts(n, params.min_dated_changes) & (lam <= params.max_changes_per_period)
    j = count(judged)
    log_prior = np.where(m > 0, np.log((m + 1.0) / (np.maximum(j - m, 0.0) + 1.0)), -np.inf)
    return np.arctan2(bs, bc), kappa0, kappa_w, log_prior


def _host_spread_floor(own: Rhythm, enough, codes, kappa_w, has_anchors) -> Rhythm:
    r"""``own`` with the spread of each URL timed on fewer than ``min_dated_changes`` dated
    changes raised to its host's publishers' own day-to-day sd (:func:`_host_hours`'s
    :math:`\kappa_w`) where the host has anchors. The tight rules accept few changes *because*
    they sit close together, so their sample sd understates the page's jitter (two changes of
    a page with a 45-min jitter are within a few minutes of each other often enough), and a
    visit placed by it lands before the next change: unchanged, and stale for a period."""
    few = own.timed & ~np.asarray(enough, bool) & has_anchors[codes]
    if not few.any():
        return own
    host_sd = 1.0 / np.sqrt(kappa_w[codes]) / (2 * np.pi) * DAY_S
    spread = np.where(few, np.fmax(own.spread_s, host_sd), own.spread_s)
    return Rhythm(own.period_s, own.phase_s, spread)


def _posterior_phase(kappa0, mu_b, kappa_w, cos, sin):
    r"""The posterior mean direction of a page's hour: von Mises prior :math:`VM(\mu_b,
    \kappa_0)`, von Mises changes :math:`VM(\mu, \kappa_w)` with sums (C, S); the posterior is
    von Mises with resultant :math:`\kappa_0 e^{i\mu_b} + \kappa_w (C + iS)` (the conjugate
    update; Mardia & El-Atoum, Biometrika 63, 1976; Guttorp & Lockhart, JASA 83, 1988).
    Radians in [0, 2π)."""
    x = kappa0 * np.cos(mu_b) + kappa_w * cos
    y = kappa0 * np.sin(mu_b) + kappa_w * sin
    return np.mod(np.arctan2(y, x), 2 * np.pi)


def _on_one_weekday(sums: dict, rows, n, lam, params: TimingParams) -> np.ndarray:
    r"""Which of ``rows`` (timed through their host on the day) publish weekly: the week circle
    adds no spread to the day's (in seconds, within ``host_min_spread_s``), so every dated
    change fell on one weekday, and :math:`\hat\lambda \cdot 7 \le`
    ``few_dates_max_changes_per_week``, so the page changes about once a week, not daily."""
    safe = np.where(n[rows] > 0, n[rows], 1.0)
    r_day = np.hypot(sums["tod_cos"][rows], sums["tod_sin"][rows]) / safe
    r_week = np.hypot(sums["tow_cos"][rows], sums["tow_sin"][rows]) / safe
    return (_sd_s(r_week, WEEK_S) <= _sd_s(r_day, DAY_S) + params.host_min_spread_s) & (
        lam[rows] * WEEK_S / DAY_S <= params.few_dates_max_changes_per_week)


def value_gain(lam, period_s) -> np.ndarray:
    """:math:`g = \\lambda P / (1 - e^{-\\lambda P})` (1 where not timed or λ = 0)."""
    x = np.asarray(lam, dtype=float) * np.nan_to_num(np.asarray(period_s, dtype=float)) / DAY_S
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(x > 1e-12, x / -np.expm1(-np.where(x > 1e-12, x, 1.0)), 1.0)
    return g


def rate_ceiling(period_s) -> np.ndarray:
    """Visits/day beyond which a timed page gains nothing: :math:`1/P` (inf if not timed)."""
    p = np.asarray(period_s, dtype=float)
    return np.where(np.isfinite(p), DAY_S / np.where(np.isfinite(p), p, 1.0), np.inf)


def _visit_target(r: Rhythm, timed, lag_s: float):
    """Each row's period (a day where not ``timed``) and one instant ``phase + lag + 2 spread``
    of it, in epoch seconds (week phases count from a Monday midnight)."""
    period = np.where(timed, r.period_s, DAY_S)
    origin = np.where(period == WEEK_S, WEEK_ORIGIN_S, 0.0)
    return period, origin + np.nan_to_num(r.phase_s) + lag_s + 2.0 * np.nan_to_num(r.spread_s)


def snap_to_phase(first_due_s, visit_period_s, r: Rhythm, lag_s: float, window_start: float):
    """Each timed page's first due instant moved to the nearest ``phase + lag + 2 spread`` of
    its rhythm (modulo ``min(visit period, rhythm period)``), never before ``window_start``;
    untimed pages keep theirs. Shifting by at most half a period keeps the visit rate."""
    due = np.asarray(first_due_s, dtype=float)
    timed = r.timed & np.isfinite(due)
    if not timed.any():
        return due
    period, target = _visit_target(r, timed, lag_s)
    # The occurrence of the target nearest to the due instant, then the visit grid shifted
    # through it (a page visited more often than its period keeps its spacing).
    target = target + period * np.round((np.nan_to_num(due) - target) / period)
    m = np.minimum(np.asarray(visit_period_s, dtype=float), period)
    shift = np.mod(target - due + m / 2.0, m) - m / 2.0
    snapped = due + shift
    snapped = np.where(snapped < window_start, snapped + m, snapped)
    return np.where(timed, snapped, due)


def next_phase_after(after_s, r: Rhythm, lag_s: float) -> np.ndarray:
    """The first instant ``phase + lag + 2 spread`` of each timed page's rhythm strictly after
    ``after_s`` (NaN where not timed or ``after_s`` is NaN)."""
    after = np.asarray(after_s, dtype=float)
    timed = r.timed & np.isfinite(after)
    period, target = _visit_target(r, timed, lag_s)
    k = np.floor((np.nan_to_num(after) - target) / period) + 1.0
    return np.where(timed, target + k * period, np.nan)


def expected_freshness(lam, rate, period_s) -> np.ndarray:
    r"""Time-averaged freshness at ``rate`` visits/day: the Poisson :math:`F(f)` for an untimed
    page, :math:`\min(1, g F(\min(f, 1/P)))` for a timed one (module notes)."""
    rate = np.asarray(rate, dtype=float)
    capped = np.minimum(rate, rate_ceiling(period_s))
    return np.minimum(1.0, value_gain(lam, period_s) * freshness(lam, capped))
