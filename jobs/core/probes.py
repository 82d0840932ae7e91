r"""A probe: the early visit that measures a page whose every fetch saw a change (pure
numpy).

**Why.** Fetched at intervals :math:`t_i`, a page with every fetch changed has the censored
likelihood :math:`\prod_i (1 - e^{-\lambda t_i})`, flat above about :math:`\ln n / t`: the
data say only "λ is large", and λ̂ is where the prior meets that knee (docs/estimation.md,
"Fast pages at few observations"). On hosts without trusted Last-Modified nothing else will
say more, and the allocation acts on λ̂ at a cliff: the freshness optimum visits a page only
while :math:`w/\lambda > \mu` (:math:`F'(0) = 1/\lambda`, Cho & Garcia-Molina 2003), so a page
whose true λ is three times its λ̂ may get visits a day it is not worth. Only a short interval
tells 20 changes a day from 50.

**What.** Such a page -- at least two observations, all changed (the decayed counts are equal,
both decaying alike), on a host without trusted Last-Modified, visited by its policy above
``f_min`` but less often than λ̂ -- gets its next visit :math:`c/\hat\lambda` days after its
last success (``estimation.probe_factor`` = c, 1: P(changed) = 1 − e^{−1} = 0.63 at λ̂) when
that is sooner than its rhythm. A probe that finds the page unchanged ends the probing (not
every observation changed any more); one that finds it changed raises λ̂ (a short changed
interval moves the knee), and the next probe is shorter, until one finds it unchanged or the
page's price drops it to ``f_min``. An interval of :math:`1/\hat\lambda` is where one change
bit says most about a λ near λ̂: the Fisher information :math:`t^2 e^{-\lambda t} / (1 -
e^{-\lambda t})` of a censored observation peaks at :math:`\lambda t \approx 1.6` (Cho &
Garcia-Molina 2003, ACM TOIT 3(3), §4 on the choice of access interval).
"""
from __future__ import annotations

import numpy as np

from jobs.core.times import DAY_S

#: The state's decayed counts a probe reads (allocate sends them to pass 3).
PROBE_COLUMNS = ("n_observations", "n_changes")


def probe_recheck(last_success_s, lam, rate, n_observations, n_changes, eligible,
                  f_min: float, factor: float):
    """The instant each page is probed and P(changed) then at λ̂ (NaN, NaN: no probe).

    Parameters
    ----------
    last_success_s : array_like
        Epoch seconds of the last successful fetch.
    lam, rate : array_like
        λ̂ and the policy's visits, per day.
    n_observations, n_changes : array_like
        Decayed observation and change counts of the state.
    eligible : array_like of bool
        Live untimed refresh pages on hosts without trusted Last-Modified.
    f_min, factor : float
        The policy's floor rate, and the probe interval times λ̂ (0 disables).
    """
    if not 0.0 <= factor <= 10.0:
        raise ValueError(f"factor must be in [0, 10], got {factor!r}")
    lam = np.asarray(lam, dtype=float)
    rate = np.asarray(rate, dtype=float)
    n_obs = np.nan_to_num(np.asarray(n_observations, dtype=float))
    n_chg = np.nan_to_num(np.asarray(n_changes, dtype=float))
    last = np.asarray(last_success_s, dtype=float)
    safe_lam = np.where(np.isfinite(lam) & (lam > 0), lam, 1.0)
    probe = (np.asarray(eligible, dtype=bool) & (factor > 0) & np.isfinite(last)
             & np.isfinite(lam) & (lam > 0) & (n_obs >= 2.0)
             & (n_chg >= n_obs * (1.0 - 1e-9))
             & (rate > f_min * (1.0 + 1e-9)) & (rate < lam))
    at = np.where(probe, last + factor / safe_lam * DAY_S, np.nan)
    return at, np.where(probe, -np.expm1(-factor), np.nan)
