"""One host's candidate visits for the next day (pure pandas; one applyInPandas call per host).

Input is every page of one host (known pages from state, frontier pages for discovery)
with a visit ``rate`` already set by the policy; output is the host's capped, ranked
visits plus one summary row (``url`` null) with counts the run reports in metrics.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from jobs.core import http_fields, plan
from jobs.core.freshness import freshness
from jobs.core.times import epoch_seconds as _epoch_s

CANDIDATE_DDL = (
    "host string, url string, lane string, due_s double, priority double, p_changed double, "
    "method string, if_none_match string, if_modified_since string, crawl_delay_s double, "
    "rate double, due_count long, carried long, known_urls long, weight_sum double, "
    "weighted_freshness double")
CANDIDATE_COLUMNS = [c.split()[0] for c in CANDIDATE_DDL.split(", ")]


def plan_host(pages: pd.DataFrame, window_start: float, window_end: float,
              max_visits_per_url: int = 24) -> pd.DataFrame:
    """Capped candidate visits of one host, best first, plus a summary row.

    Parameters
    ----------
    pages : DataFrame
        One host's pages: host, url, lane, rate (visits/day), lambda_hat, importance,
        last_fetch_at, last_success_at, etag, last_modified, crawl_delay_s,
        max_fetches_per_day, method_hint ('conditional' allowed or 'full' forced).
    """
    host = pages["host"].iloc[0]
    delay = float(pages["crawl_delay_s"].iloc[0])
    cap = int(plan.host_cap(delay, pages["max_fetches_per_day"].iloc[:1].to_numpy())[0])

    work = pd.DataFrame({
        "url": pages["url"].to_numpy(), "lane": pages["lane"].to_numpy(),
        "rate": pages["rate"].to_numpy(dtype=float),
        "lambda_hat": pages["lambda_hat"].to_numpy(dtype=float),
        "importance": pages["importance"].to_numpy(dtype=float),
        "last_fetch_s": _epoch_s(pages["last_fetch_at"]),
        "last_success_s": _epoch_s(pages["last_success_at"]),
        "if_none_match": http_fields.clean_etags(pages["etag"]),
        "if_modified_since": http_fields.clean_dates(pages["last_modified"]),
        "method_hint": pages["method_hint"].to_numpy(dtype=object),
    })
    visits = plan.due_visits(work, window_start, window_end, max_visits_per_url)
    kept, carried = plan.apply_host_cap(visits, cap)

    has_validator = ~(pd.isna(kept["if_none_match"]) & pd.isna(kept["if_modified_since"]))
    conditional = has_validator.to_numpy() & (kept["method_hint"].to_numpy() == "conditional")
    out = pd.DataFrame({
        "host": host, "url": kept["url"].to_numpy(), "lane": kept["lane"].to_numpy(),
        "due_s": kept["due_s"].to_numpy(), "priority": kept["priority"].to_numpy(),
        "p_changed": kept["p_changed"].to_numpy(),
        "method": np.where(conditional, "conditional", "full"),
        "if_none_match": np.where(conditional, kept["if_none_match"].to_numpy(), None),
        "if_modified_since": np.where(conditional, kept["if_modified_since"].to_numpy(), None),
        "crawl_delay_s": delay, "rate": kept["rate"].to_numpy(),
    })
    known = work["lane"].to_numpy() != "discovery"
    w = work["importance"].to_numpy()[known]
    fresh = freshness(work["lambda_hat"].to_numpy()[known], work["rate"].to_numpy()[known])
    summary = pd.DataFrame([{
        "host": host, "url": None, "lane": None, "crawl_delay_s": delay,
        "due_count": len(visits), "carried": len(carried), "known_urls": int(known.sum()),
        "weight_sum": float(w.sum()), "weighted_freshness": float((w * fresh).sum()),
    }])
    out = pd.concat([out, summary], ignore_index=True)
    return out.reindex(columns=CANDIDATE_COLUMNS)
