"""Host-classification study on the synthetic web (lab/sim), whose host validator classes are known.

The legacy crawler of ``lab.sim.legacy`` fetches the web (conditional GETs wherever it holds
a validator), except that a share ``audit_share`` of the requests to hosts are sent without
validators (audit full fetches). Each day's fetch log goes through the production fold
(``jobs.core.state_update.fold_day``) and host update (``jobs.core.trust.update_hosts``),
in one process, exactly as update_state runs them per bucket. Reported:

* the share of hosts whose ``validator_class`` matches the truth (sim ``honest`` →
  ``honest_etag``, ``lm_only`` → ``honest_lm``, ``none`` → ``no_validators``,
  ``frozen_lm`` → ``frozen_lm``, ``volatile_etag`` → ``volatile_etag``), per true class,
  after the last day, counting ``unverified`` as wrong;
* for frozen-LM hosts, the number of audits (full fetches of the host compared with a
  stored copy) until the host was first classified ``frozen_lm``.

Run: ``python -m lab.studies.study_trust`` (seed 7, 4000 URLs, 60 hosts, 21 days, audit share 0.05).
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from jobs.config import load_config
from jobs.core import state_update, trust
from jobs.params import trust_params, update_params
from lab.sim import Simulation, WebParams
from lab.sim.legacy import LegacyCrawler
from lab.sim.rand import uniform

TRUE_TO_CLASS = {"honest": "honest_etag", "lm_only": "honest_lm", "none": "no_validators",
                 "frozen_lm": "frozen_lm", "volatile_etag": "volatile_etag"}


def _health_counts(logs: pd.DataFrame) -> pd.DataFrame:
    st = logs["status"]
    return pd.DataFrame({"host": logs["host"], "fetches": 1, "timeouts": (st == 0).astype(int),
                         "errors_5xx": (st >= 500).astype(int),
                         "throttled_429": (st == 429).astype(int),
                         "latency_sum_ms": logs["elapsed_ms"].fillna(0).astype(float),
                         "latency_n": logs["elapsed_ms"].notna().astype(int)}
                        ).groupby("host", as_index=False).sum()


def run_study(n_urls=4000, n_hosts=60, days=21, audit_share=0.05, seed=7) -> dict:
    cfg = load_config()
    params = WebParams(n_urls=n_urls, n_hosts=n_hosts, seed=seed, start="2024-01-01")
    sim = Simulation(params)
    crawler = LegacyCrawler(sim.web)
    upd = update_params(cfg)
    state, hosts = state_update.empty_state(), pd.DataFrame(columns=list(trust.HOST_COLUMNS))
    truth = sim.web.truth_hosts().set_index("host")["validator"]
    audits = pd.Series(0, index=truth.index, dtype=np.int64)
    first_caught = pd.Series(np.nan, index=truth.index)
    for day in range(days):
        run_date = params.date_of(day).isoformat()
        req = crawler.requests_for_day(day)
        audit = uniform(sim.web.pages.url_key[req.page], day, 0xA0D17) < audit_share
        req.inm_present = req.inm_present & ~audit
        req.ims_present = req.ims_present & ~audit
        out: list = []
        table, _ = sim.run_requests(req, day, out)
        crawler.observe(req, out[0], day)
        logs = table.to_pandas()
        t = hosts.set_index("host")[["trust_etag", "trust_lm"]] if len(hosts) else None
        logs["trust_etag"] = logs["host"].map(t["trust_etag"]).fillna(False) if t is not None else False
        logs["trust_lm"] = logs["host"].map(t["trust_lm"]).fillna(False) if t is not None else False
        folded = state_update.fold_day(state, logs, run_date, upd)
        state = folded[state_update.STATE_COLUMNS]
        ev = folded.groupby("host")[list(trust.VALIDATOR_EVIDENCE + trust.SIGNAL_EVIDENCE)].sum()
        ev["urls_known"] = folded.groupby("host").size()
        today = ev.join(_health_counts(logs).set_index("host"), how="outer").reset_index()
        hosts = trust.update_hosts(hosts, today, run_date, trust_params(cfg))
        # Audits of a host: 2xx full fetches compared with a stored copy (on a frozen-LM
        # host every conditional request gets a 304, so these are exactly its audits).
        audits = audits.add(folded.groupby("host")["ev_compared"].sum(), fill_value=0)
        caught = hosts.set_index("host")["validator_class"].eq("frozen_lm")
        newly = caught[caught].index.difference(first_caught.dropna().index)
        first_caught.loc[newly] = audits.loc[newly]
    final = hosts.set_index("host")["validator_class"].reindex(truth.index)
    expected = truth.map(TRUE_TO_CLASS)
    table = pd.DataFrame({"true": truth, "expected": expected, "got": final})
    by_class = table.groupby("true").apply(
        lambda g: pd.Series({"hosts": len(g), "right": int((g.got == g.expected).sum()),
                             "share_right": float((g.got == g.expected).mean())}),
        include_groups=False)
    frozen = first_caught[truth == "frozen_lm"]
    confusion = pd.crosstab(table["true"], table["got"])
    return {"accuracy": float((table.got == table.expected).mean()), "by_class": by_class,
            "confusion": confusion, "frozen_audits": frozen,
            "frozen_detected_share": float(frozen.notna().mean()) if len(frozen) else float("nan")}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=4000)
    ap.add_argument("--hosts", type=int, default=60)
    ap.add_argument("--days", type=int, default=21)
    ap.add_argument("--audit-share", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    res = run_study(a.urls, a.hosts, a.days, a.audit_share, a.seed)
    pd.set_option("display.width", 140)
    print(f"== classification accuracy == {res['accuracy']:.3f}")
    print(res["by_class"].to_string())
    print("== confusion (rows: true, columns: classified) ==")
    print(res["confusion"].to_string())
    fa = res["frozen_audits"]
    print(f"== frozen_lm: detected {res['frozen_detected_share']:.2f} of {len(fa)} hosts; audits "
          f"until detection: median {fa.median():.0f}, max {fa.max():.0f} ==")
    print(fa.describe().to_string())
    return res


if __name__ == "__main__":
    main()
