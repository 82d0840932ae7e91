import numpy as np
import pandas as pd
import pytest

from jobs.config import load_config
from jobs.core import trust
from jobs.params import trust_params
from lab.studies.study_trust import run_study

PARAMS = trust_params(load_config())


def ev(**counts):
    row = {c: 0.0 for c in trust.VALIDATOR_EVIDENCE + trust.SIGNAL_EVIDENCE}
    row.update(counts)
    return pd.DataFrame([row])


@pytest.mark.parametrize("counts, cls, t_etag, t_lm", [
    (dict(ev_200=10, ev_etag_seen=10, ev_lm_seen=10, ev_etag_agree_chg=3, ev_etag_agree_same=5,
          ev_lm_agree_chg=3, ev_lm_agree_same=5), "honest_etag", True, True),
    (dict(ev_200=10, ev_lm_seen=10, ev_lm_agree_chg=2, ev_lm_agree_same=8), "honest_lm",
     False, True),
    (dict(ev_200=10), "no_validators", False, False),
    (dict(ev_200=10, ev_lm_seen=10, ev_lm_agree_same=8, ev_lm_frozen=1), "frozen_lm", False, False),
    (dict(ev_200=10, ev_etag_seen=10, ev_lm_seen=10, ev_etag_volatile=6, ev_etag_agree_chg=4,
          ev_lm_volatile=6, ev_lm_agree_chg=4), "volatile_etag", False, False),
    (dict(ev_200=10, ev_etag_seen=10, ev_etag_agree_chg=3, ev_etag_frozen=2), "frozen_etag",
     False, False),
    (dict(ev_200=10, ev_lm_seen=10, ev_lm_agree_same=8, ev_lm_agree_chg=1), "unverified",
     False, False),
])
def test_every_class_from_evidence(counts, cls, t_etag, t_lm):
    out = trust.classify(ev(**counts), min_confirmations=2, max_lie_share=0.1,
                         max_volatile_share=0.2).iloc[0]
    assert (out.validator_class, out.trust_etag, out.trust_lm) == (cls, t_etag, t_lm)
    assert out.audit_wanted == (t_etag or t_lm)


def _today(host="h", **counts):
    df = ev(**counts)
    df.insert(0, "host", host)
    df["urls_known"], df["fetches"] = 5, 0
    return df


def test_trust_is_lost_on_a_lie_and_re_earned_as_it_decays():
    honest = dict(ev_200=3, ev_lm_seen=3, ev_lm_agree_chg=3)
    hosts = trust.update_hosts(pd.DataFrame(columns=list(trust.HOST_COLUMNS)), _today(**honest),
                               "2026-11-01", PARAMS)
    assert hosts.trust_lm[0] and hosts.validator_class[0] == "honest_lm"
    hosts = trust.update_hosts(hosts, _today(ev_200=1, ev_lm_seen=1, ev_lm_frozen=1),
                               "2026-11-02", PARAMS)
    assert not hosts.trust_lm[0] and hosts.validator_class[0] == "frozen_lm"
    # Honest behaviour afterwards: one confirmation a week; the lie decays (half-life 60 d).
    day, weeks = pd.Timestamp("2026-11-02"), 0
    while not hosts.trust_lm[0]:
        weeks += 1
        hosts = trust.update_hosts(hosts, _today(ev_200=1, ev_lm_seen=1, ev_lm_agree_chg=1),
                                   (day + pd.Timedelta(weeks * 7, "D")).date().isoformat(), PARAMS)
        assert weeks < 30
    # Frozen share ≤ 0.1 needs 9 decayed confirmations per decayed lie; with the 3 old
    # ones (week w: lie 2^(-7w/60), confirmations ≈ 3·2^(-7w/60) + Σ_k<w 2^(-7k/60))
    # that is reached after 5 weeks.
    assert weeks == 5 and hosts.validator_class[0] == "honest_lm"


def test_signal_accuracy_and_trust():
    acc, ok = trust.signal_trust(ev(ev_sig_correct=9, ev_sig_wrong=1), min_scored=3,
                                 min_accuracy=0.8)
    assert acc[0] == pytest.approx(10 / 12) and ok[0]
    acc, ok = trust.signal_trust(ev(ev_sig_correct=2, ev_sig_wrong=0), min_scored=3,
                                 min_accuracy=0.5)
    assert not ok[0]                      # too few scored claims
    acc, ok = trust.signal_trust(ev(ev_sig_correct=1, ev_sig_wrong=9), min_scored=3,
                                 min_accuracy=0.8)
    assert not ok[0] and acc[0] == pytest.approx(2 / 12)


def test_study_classifies_sim_hosts_and_catches_frozen_lm_within_3_audits():
    res = run_study(n_urls=1500, n_hosts=30, days=12, audit_share=0.05, seed=11)
    assert res["accuracy"] >= 0.9
    by = res["by_class"]
    assert set(by.index) >= {"honest", "lm_only", "frozen_lm", "volatile_etag"}
    assert res["frozen_detected_share"] == 1.0
    assert np.nanmax(res["frozen_audits"]) <= 3


@pytest.mark.parametrize("counts, t_etag, t_lm", [
    # A new host sending both validators, nothing confirmed yet: both trusted provisionally.
    (dict(ev_200=2, ev_etag_seen=2, ev_lm_seen=2), True, True),
    # Last-Modified only, one confirmation short of min_confirmations.
    (dict(ev_200=4, ev_lm_seen=4, ev_lm_agree_chg=1, ev_lm_agree_same=3), False, True),
    # An ETag on a minority of responses is not one to send conditionals with.
    (dict(ev_200=4, ev_etag_seen=1, ev_lm_seen=4), False, True),
])
def test_new_hosts_conditional_trusts_unverified_validators(counts, t_etag, t_lm):
    strict = trust.classify(ev(**counts)).iloc[0]
    assert strict.validator_class == "unverified" and not strict.audit_wanted
    out = trust.classify(ev(**counts), trust_new=True).iloc[0]
    assert out.validator_class == "unverified"
    assert (out.trust_etag, out.trust_lm) == (t_etag, t_lm)
    assert out.audit_wanted  # its conversion audits are what can catch a lie


@pytest.mark.parametrize("counts", [
    dict(ev_200=10, ev_lm_seen=10, ev_lm_agree_same=8, ev_lm_frozen=1),            # frozen_lm
    dict(ev_200=10, ev_etag_seen=10, ev_etag_agree_chg=3, ev_etag_frozen=2),       # frozen_etag
    dict(ev_200=10, ev_etag_seen=10, ev_etag_volatile=6, ev_etag_agree_chg=4),     # volatile
    dict(ev_200=10),                                                               # none sent
])
def test_new_hosts_conditional_never_trusts_a_caught_or_absent_validator(counts):
    assert trust.classify(ev(**counts), trust_new=True).iloc[0][
        ["trust_etag", "trust_lm"]].tolist() == trust.classify(ev(**counts)).iloc[0][
        ["trust_etag", "trust_lm"]].tolist() == [False, False]


def test_a_provisionally_trusted_host_caught_lying_loses_the_trust():
    params = trust_params(load_config(None, ["trust.new_hosts_conditional=true"]))
    empty = pd.DataFrame(columns=list(trust.HOST_COLUMNS))
    hosts = trust.update_hosts(empty, _today(ev_200=3, ev_etag_seen=3), "2026-11-01", params)
    assert hosts.trust_etag[0] and hosts.validator_class[0] == "unverified"
    # A conversion audit: content changed, the ETag did not.
    hosts = trust.update_hosts(hosts, _today(ev_200=1, ev_etag_seen=1, ev_etag_frozen=1),
                               "2026-11-02", params)
    assert not hosts.trust_etag[0] and hosts.validator_class[0] == "frozen_etag"
