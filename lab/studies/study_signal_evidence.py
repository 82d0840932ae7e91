"""Did a trusted signal's "not changed since the copy" hold? Read from a backtest's data root.

For every day D with ``state/dt=D``, the pages with ``signal_unchanged_at`` (the evidence of
jobs.core.signal_evidence), and the first policy fetch (200 or 304) of each after D: a 304 or
the stored hash means unchanged; a changed page's Last-Modified before the evidence instant
refutes the evidence, after it is a change that came later.

    python -m lab.studies.study_signal_evidence var/backtest/work/seed0/optimal/data
"""
from __future__ import annotations

import argparse
import glob
import json

import pandas as pd

_LM_FORMAT = "%a, %d %b %Y %H:%M:%S GMT"


def evidence_outcomes(root: str) -> dict:
    """Counts over the run: ``evidence`` (page-days), ``next_unchanged``, ``next_changed``,
    ``refuted`` (changed, Last-Modified before the evidence), ``later_change`` (after it)."""
    logs = [pd.read_parquet(p, columns=["url", "fetched_at", "status", "content_hash", "lane",
                                        "last_modified"])
            for p in sorted(glob.glob(f"{root}/fetch_logs/dt=*"))]
    log = pd.concat(logs) if logs else pd.DataFrame(columns=["url", "fetched_at"])
    log = log[(log["lane"].fillna("") != "audit") & log["status"].isin([200, 304])]
    log = log.assign(fetched_at=pd.to_datetime(log["fetched_at"], utc=True)).sort_values(
        "fetched_at", kind="stable")
    out = dict.fromkeys(("evidence", "next_unchanged", "next_changed", "refuted",
                         "later_change"), 0)
    for path in sorted(glob.glob(f"{root}/state/dt=*")):
        day = path.rsplit("dt=", 1)[1]
        st = pd.read_parquet(path)
        if "signal_unchanged_at" not in st:
            continue
        ev = st[st["signal_unchanged_at"].notna()][["url", "signal_unchanged_at",
                                                     "content_hash"]]
        start = pd.Timestamp(day, tz="UTC") + pd.Timedelta(1, "D")
        nxt = log[(log["fetched_at"] >= start) & log["url"].isin(ev["url"])]
        m = ev.set_index("url").join(nxt.groupby("url").first(), rsuffix="_next", how="inner")
        same = (m["status"] == 304) | (m["content_hash"] == m["content_hash_next"])
        lm = pd.to_datetime(m["last_modified"], format=_LM_FORMAT, utc=True, errors="coerce")
        at = pd.to_datetime(m["signal_unchanged_at"], utc=True)
        out["evidence"] += len(ev)
        out["next_unchanged"] += int(same.sum())
        out["next_changed"] += int((~same).sum())
        out["refuted"] += int((~same & (lm < at)).sum())
        out["later_change"] += int((~same & (lm >= at)).sum())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="a policy run's data root (…/work/seed0/<policy>/data)")
    print(json.dumps(evidence_outcomes(ap.parse_args(argv).root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
