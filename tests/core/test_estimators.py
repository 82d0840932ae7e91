"""Tests for jobs.core.estimators (stats, estimators, shrinkage) and the accuracy study."""
import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq

from jobs.core import estimators as est
from jobs.core.estimators_shrinkage import (PRIOR_CHAINS, apply_group_priors, choose_prior,
                                            fit_group_priors, group_key_from_url)


def stats_from(rows, t, changed, n, lm=None):
    return est.add_observations(est.empty_stats(n), np.asarray(rows), np.asarray(t, float),
                                np.asarray(changed, bool), lm)


def test_stats_columns_are_fixed_and_empty_is_zero():
    s = est.empty_stats(3)
    assert list(s.columns) == list(est.STATS_COLUMNS)
    assert len(est.STATS_COLUMNS) == 2 * est.N_BINS + 5
    assert (s.to_numpy() == 0).all()


def test_add_observations_bins_and_sums():
    s = stats_from([0, 0, 0, 1], [1.0, 1.1, 30.0, 2.0], [True, True, False, True], 2)
    k1 = est.interval_bin(1.0)
    assert est.interval_bin(1.1) == k1
    assert s.loc[0, est.CHANGED_COUNT_COLUMNS[k1]] == 2
    assert s.loc[0, est.CHANGED_TSUM_COLUMNS[k1]] == pytest.approx(2.1)
    assert s.loc[0, "unch_t"] == 30.0 and s.loc[0, "unch_n"] == 1
    assert s.loc[1, list(est.CHANGED_COUNT_COLUMNS)].sum() == 1
    assert est.interval_bin([1e-5, 1e5]).tolist() == [0, est.N_BINS - 1]


def test_last_modified_routing():
    lm = np.array([0.25, np.nan, 5.0, 3.0])   # trusted, untrusted, inconsistent (> t), unchanged
    s = stats_from([0, 0, 0, 0], [1.0, 1.0, 2.0, 4.0], [True, True, True, False], 1, lm)
    assert s.loc[0, "lm_changes"] == 1 and s.loc[0, "lm_n"] == 2
    assert s.loc[0, "lm_exposure"] == pytest.approx(0.25 + 4.0)
    assert s.loc[0, list(est.CHANGED_COUNT_COLUMNS)].sum() == 2   # untrusted + inconsistent


@pytest.mark.parametrize("bad", [dict(t=[0.0]), dict(t=[np.nan]), dict(rows=[5]),
                                 dict(changed=[2]), dict(lm=[-1.0])])
def test_add_observations_rejects_bad_input(bad):
    args = dict(rows=[0], t=[1.0], changed=[1], lm=[np.nan]) | bad
    with pytest.raises(ValueError):
        est.add_observations(est.empty_stats(1), np.asarray(args["rows"]), np.asarray(args["t"]),
                             np.asarray(args["changed"]), np.asarray(args["lm"]))


def test_decay_halves_after_one_half_life():
    s = stats_from([0, 0], [1.0, 3.0], [True, False], 1)
    d = est.decay_stats(s, 30.0, 30.0)
    np.testing.assert_allclose(d.to_numpy(), 0.5 * s.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(est.decay_stats(s, 10.0, np.inf).to_numpy(), s.to_numpy())
    with pytest.raises(ValueError):
        est.decay_stats(s, 1.0, 0.0)


def test_incremental_two_days_equals_one_shot():
    rng = np.random.default_rng(1)
    n, h = 50, 20.0
    r1, r2 = rng.integers(0, n, 200), rng.integers(0, n, 150)
    t1, t2 = rng.exponential(2, 200) + 0.01, rng.exponential(2, 150) + 0.01
    c1, c2 = rng.random(200) < 0.4, rng.random(150) < 0.4
    day1 = est.add_observations(est.empty_stats(n), r1, t1, c1)
    inc = est.add_observations(est.decay_stats(day1, 1.0, h), r2, t2, c2)
    # One shot: day-1 observations weighted by the one-day decay factor.
    w1 = np.exp2(-1.0 / h)
    one = est.add_observations(est.empty_stats(n), np.r_[r1, r2], np.r_[t1, t2], np.r_[c1, c2])
    day1_only = est.add_observations(est.empty_stats(n), r1, t1, c1)
    expected = one.to_numpy() - (1 - w1) * day1_only.to_numpy()
    np.testing.assert_allclose(inc.to_numpy(), expected, rtol=1e-12, atol=1e-12)
    nodecay = est.add_observations(day1, r2, t2, c2)
    np.testing.assert_allclose(nodecay.to_numpy(), one.to_numpy(), rtol=1e-12)


def test_update_state_frame_adds_new_urls_and_decays_old():
    state = pd.concat([pd.DataFrame({"url": ["a"]}), est.empty_stats(1)], axis=1)
    state.loc[0, "unch_t"] = 8.0
    obs = pd.DataFrame({"url": ["b", "b", "a"], "interval_days": [1.0, 2.0, 1.0],
                        "changed": [True, False, False], "lm_age_days": [np.nan] * 3})
    out = est.update_state_frame(state, obs, elapsed_days=10.0, half_life_days=10.0)
    assert list(out["url"]) == ["a", "b"]
    assert out.loc[0, "unch_t"] == pytest.approx(4.0 + 1.0)
    assert out.loc[1, "unch_t"] == 2.0 and out.loc[1, list(est.CHANGED_COUNT_COLUMNS)].sum() == 1


def test_all_unchanged_small_finite_and_all_changed_large_finite():
    s = stats_from(np.repeat([0, 1], 20), np.ones(40), np.r_[np.zeros(20), np.ones(20)], 2)
    res = est.estimate_censored_mle(s)
    lam = res["lambda_hat"].to_numpy()
    assert np.isfinite(lam).all() and res["converged"].all()
    assert 0 < lam[0] < 0.05          # 0.5 / (20 + 0.5): half a pseudo-change
    assert lam[0] == pytest.approx(0.5 / 20.5, rel=1e-12)
    assert 3.0 < lam[1] < 6.0         # beyond what daily checks can resolve, yet finite
    assert (res["lambda_lo"] < res["lambda_hat"]).all()
    assert (res["lambda_hat"] < res["lambda_hi"]).all() and np.isfinite(res["lambda_hi"]).all()


@pytest.mark.parametrize("n, x, interval", [(20, 7, 1.0), (10, 9, 0.25), (50, 1, 7.0)])
def test_equal_intervals_match_closed_form_without_prior(n, x, interval):
    s = stats_from(np.zeros(n, int), np.full(n, interval), np.arange(n) < x, 1)
    lam = est.estimate_censored_mle(s, prior_shape=0.0, prior_rate=0.0)["lambda_hat"].iloc[0]
    assert lam == pytest.approx(-np.log(1 - x / n) / interval, rel=1e-10)


def test_vectorised_equals_scalar_brentq():
    rng = np.random.default_rng(7)
    n = 300
    rows = np.repeat(np.arange(n), 15)
    t = rng.exponential(1.0, rows.size) * 10 ** rng.uniform(-1, 1, n)[rows] + 0.01
    lam_true = 10 ** rng.uniform(-2, 1, n)
    changed = rng.random(rows.size) < -np.expm1(-lam_true[rows] * t)
    s = stats_from(rows, t, changed, n)
    res = est.estimate_censored_mle(s)
    b = est.default_prior_rate(s)
    counts = s[list(est.CHANGED_COUNT_COLUMNS)].to_numpy()
    tsum = s[list(est.CHANGED_TSUM_COLUMNS)].to_numpy()
    for i in range(n):
        keep = counts[i] > 0
        c, tb = counts[i, keep], tsum[i, keep] / counts[i, keep]

        def equation(lam):
            with np.errstate(over="ignore"):
                return (c * tb / np.expm1(lam * tb)).sum() + 0.5 / lam - s.loc[i, "unch_t"] - b[i]

        root = brentq(equation, 1e-12, 1e6, xtol=1e-15, rtol=1e-14)
        assert res["lambda_hat"].iloc[i] == pytest.approx(root, rel=1e-6)
    assert res["converged"].all() and res["iterations"].max() <= 12


def test_last_modified_closed_form_and_naive():
    s = stats_from([0, 0, 0], [1.0, 1.0, 2.0], [True, True, False], 1, [0.5, 0.25, 2.0])
    lm = est.estimate_last_modified(s, prior_shape=0.5, prior_rate=0.5).iloc[0]
    assert lm["lambda_hat"] == pytest.approx(2.5 / (0.5 + 0.75 + 2.0))
    assert lm["lambda_lo"] < lm["lambda_hat"] < lm["lambda_hi"]
    # Same fetches without LM: the joint estimator equals the censored MLE.
    plain = stats_from([0, 0, 0], [1.0, 1.0, 2.0], [True, True, False], 1)
    assert est.estimate_rate(plain).iloc[0]["lambda_hat"] == pytest.approx(
        est.estimate_censored_mle(plain).iloc[0]["lambda_hat"])
    assert est.estimate_naive(plain).iloc[0]["lambda_hat"] == pytest.approx(2 / 4)


def test_naive_is_biased_low_as_documented():
    rng = np.random.default_rng(3)
    for r, expected in ((1.0, -0.368), (2.0, -0.568)):
        n = 4000
        rows = np.repeat(np.arange(n), 20)
        changed = rng.random(rows.size) < -np.expm1(-r)
        res = est.estimate_naive(stats_from(rows, np.ones(rows.size), changed, n))
        assert res["lambda_hat"].mean() / r - 1 == pytest.approx(expected, abs=0.01)


def test_interval_coverage_is_near_nominal():
    rng = np.random.default_rng(11)
    n, lam = 3000, 0.7
    rows = np.repeat(np.arange(n), 30)
    t = np.exp(rng.normal(0, 0.5, rows.size))
    changed = rng.random(rows.size) < -np.expm1(-lam * t)
    res = est.estimate_censored_mle(stats_from(rows, t, changed, n))
    coverage = ((res["lambda_lo"] <= lam) & (lam <= res["lambda_hi"])).mean()
    assert 0.87 <= coverage <= 0.93    # nominal 0.90, binomial sd 0.0055


def test_shrinkage_new_url_inherits_prior_and_helpers():
    urls = ["https://Ex.com/news/a", "http://ex.com:8080/news/b?x=1", "https://other.org/", "junk"]
    assert group_key_from_url(urls).tolist() == ["ex.com", "ex.com", "other.org", ""]
    assert group_key_from_url(urls, "template").tolist()[:3] == ["ex.com/news", "ex.com/news",
                                                                "other.org"]
    rng = np.random.default_rng(5)
    n = 41
    rows = np.repeat(np.arange(n - 1), 20)
    changed = rng.random(rows.size) < -np.expm1(-0.3 * np.exp(rng.normal(0, 0.3, n - 1))[rows])
    s = stats_from(rows, np.ones(rows.size), changed, n)
    priors = fit_group_priors(s, np.zeros(n))
    assert priors["method"].iloc[0] == "em" and priors["converged"].iloc[0]
    assert priors["prior_mean"].iloc[0] == pytest.approx(0.3, rel=0.25)
    res = apply_group_priors(s, np.zeros(n), priors)
    prior = priors.iloc[0]
    assert res["lambda_hat"].iloc[-1] == pytest.approx(prior["prior_shape"] / prior["prior_rate"])
    unknown = apply_group_priors(s, np.ones(n), priors)   # group without a prior → default
    pd.testing.assert_series_equal(unknown["lambda_hat"], est.estimate_rate(s)["lambda_hat"])


def test_each_group_fits_as_if_alone_in_its_bucket():
    """The EM freezes converged groups and drops their rows from the working set: a group's
    prior must not depend on which groups share its bucket, fast or slow to converge."""
    rng = np.random.default_rng(8)
    per_group, interval = 60, 1.0
    # Groups that converge at very different speeds: tight and spread, slow and fast pages,
    # and a group too small for EM (pooled) beside them.
    spec = [(0.05, 0.2), (0.4, 1.5), (3.0, 0.1), (0.9, 0.8), (0.2, 2.5)]
    rows, t, changed, labels, n = [], [], [], [], 0
    for g, (rate, spread) in enumerate(spec):
        lam = rate * np.exp(rng.normal(0, spread, per_group))
        r = np.repeat(np.arange(n, n + per_group), 12)
        rows.append(r)
        t.append(np.full(r.size, interval))
        changed.append(rng.random(r.size) < -np.expm1(-lam[r - n] * interval))
        labels += [f"g{g}"] * per_group
        n += per_group
    rows.append(np.repeat([n, n + 1], 12))
    t.append(np.full(24, interval))
    changed.append(rng.random(24) < 0.5)
    labels += ["tiny", "tiny"]
    n += 2
    s = stats_from(np.concatenate(rows), np.concatenate(t), np.concatenate(changed), n)
    labels = np.array(labels, dtype=object)
    together = fit_group_priors(s, labels, min_urls=3)
    assert set(together["method"]) == {"em", "pooled"}
    assert together["iterations"].nunique() > 2  # groups converge at different speeds
    for g in together.index:
        alone = fit_group_priors(s[labels == g].reset_index(drop=True), labels[labels == g],
                                 min_urls=3).loc[g]
        row = together.loc[g]
        assert row["method"] == alone["method"] and row["iterations"] == alone["iterations"]
        for c in ("prior_shape", "prior_rate", "log_mean"):
            assert row[c] == pytest.approx(alone[c], rel=1e-12, nan_ok=True), (g, c)


# (url, host, template, class): the shrinkage groups of URLs that passed ingest's URL rule
# (host = jobs.core.hosts.url_host), tricky on purpose; tests/stages/test_update_state_spark.py checks
# the Spark expressions of update_state give the same keys.
GROUP_KEY_CASES = [
    ("https://ex.com/news/2024/x", "ex.com", "ex.com/news", "*/news"),
    ("HTTPS://EX.COM/News/a", "ex.com", "ex.com/News", "*/News"),
    ("https://ex.com", "ex.com", "ex.com", "*"),                  # one front page, however
    ("https://ex.com/", "ex.com", "ex.com", "*"),                 # spelled (Spark used to
    ("https://ex.com/?page=2", "ex.com", "ex.com", "*"),          # file the bare one apart)
    ("https://ex.com?q=1", "ex.com", "ex.com", "*"),
    ("https://ex.com#top", "ex.com", "ex.com", "*"),
    ("https://ex.com//double", "ex.com", "ex.com", "*"),
    ("https://ex.com:8443/feed", "ex.com", "ex.com/feed", "*/feed"),
    ("https://ex.com./feed/", "ex.com", "ex.com/feed", "*/feed"),
    ("https://ex.com/feed?x=/y", "ex.com", "ex.com/feed", "*/feed"),
    ("https://ex.com/feed#/z", "ex.com", "ex.com/feed", "*/feed"),
    ("https://ex.com/2024/05/x", "ex.com", "ex.com/2024", "*/"),
    ("https://ex.com/item-123_4.5/x", "ex.com", "ex.com/item-123_4.5", "*/item"),
    ("https://ex.com/v2api", "ex.com", "ex.com/v2api", "*/vapi"),
    ("https://ex.com/\u0661\u0662", "ex.com", "ex.com/\u0661\u0662", "*/\u0661\u0662"),
    ("https://ex.com/%E2%82%AC-7", "ex.com", "ex.com/%E2%82%AC-7", "*/%E%%AC"),
    ("https://ex.com/stra\u00dfe/1", "ex.com", "ex.com/stra\u00dfe", "*/stra\u00dfe"),
    ("https://ex.com/\U0001f600x", "ex.com", "ex.com/\U0001f600x", "*/\U0001f600x"),
    ("https://ex.com/a;b=1/c", "ex.com", "ex.com/a;b=1", "*/a;b="),
    ("https://b\u00fccher.example/x", "xn--bcher-kva.example", "xn--bcher-kva.example/x", "*/x"),
    ("https://[::1]:8080/x", "[::1]", "[::1]", "*"),
    ("http://10.0.0.1/cgi-bin/x", "10.0.0.1", "10.0.0.1/cgi-bin", "*/cgi-bin"),
]


def test_group_keys_of_tricky_urls():
    urls = [u for u, *_ in GROUP_KEY_CASES]
    for i, level in enumerate(("host", "template", "class")):
        want = [case[1 + i] for case in GROUP_KEY_CASES]
        assert group_key_from_url(urls, level).tolist() == want, level
        hosts = pd.Series([h for _, h, *_ in GROUP_KEY_CASES], index=range(10, 10 + len(urls)))
        assert group_key_from_url(urls, level, hosts=hosts).tolist() == want, level
    assert group_key_from_url(["junk", None, "ftp://x/"], "template").tolist() == ["", "", ""]


def test_choose_prior_takes_first_em_then_first_pooled():
    nan = np.nan
    #            template      class        host
    shape = [[2.0, 3.0, 4.0],   # template EM
             [2.0, 3.0, 4.0],   # template pooled, class EM -> class
             [nan, 1.0, 4.0],   # no template prior, class pooled, host EM -> host
             [nan, 1.0, 1.0],   # only pooled priors -> the most specific one (class)
             [nan, nan, nan],   # nothing -> NaN (default smoothing prior)
             [1.0, nan, nan]]   # template pooled only
    rate = np.array(shape) * 10
    em = [[True, True, True], [False, True, True], [False, False, True],
          [False, False, False], [False, False, False], [False, False, False]]
    got_shape, got_rate = choose_prior(shape, rate, em)
    np.testing.assert_array_equal(got_shape, [2.0, 3.0, 4.0, 1.0, nan, 1.0])
    np.testing.assert_array_equal(got_rate, [20.0, 30.0, 40.0, 10.0, nan, 10.0])
    # An EM flag on a level without a prior (cannot come from fit_group_priors) is ignored.
    assert np.isnan(choose_prior([[nan]], [[nan]], [[True]])[0]).all()
    assert choose_prior(np.empty((0, 3)), np.empty((0, 3)), np.empty((0, 3), bool))[0].shape \
        == (0,)
    with pytest.raises(ValueError):
        choose_prior([[1.0, 2.0]], [[1.0]], [[True, True]])


def test_prior_chains_cover_every_configured_level():
    from jobs.config import PRIOR_LEVELS

    assert tuple(PRIOR_CHAINS) == PRIOR_LEVELS
    assert PRIOR_CHAINS["hierarchical"] == ("template", "class", "host")


def test_reduced_study_meets_accuracy_and_shrinkage_requirements():
    from lab.studies.study_estimation import run_study
    tables = run_study(reps=40, n_hosts=60, seed=123, drift=False)
    assert tables["all_converged"]
    assert tables["mle_region_median"] <= 0.25
    assert tables["low_history_shrunk"] < 0.8 * tables["low_history_plain"]
    assert tables["binning_p99"] < 0.05
    naive_r1 = tables["by_r"].loc[("naive", 1.0), "bias_mean"]
    assert naive_r1 == pytest.approx(-0.37, abs=0.05)


def test_lognormal_prior_mode_solves_its_equation_for_every_history():
    # ℓ'(u) = Σ c φ(λt) − S_u λ − P(u − m) = 0, m = log(α/β), P = α (Laplace-matched normal).
    rng = np.random.default_rng(21)
    n = 60
    rows = np.repeat(np.arange(n - 3), 12)
    t = rng.uniform(0.2, 3.0, rows.size)
    changed = rng.random(rows.size) < -np.expm1(-(10 ** rng.uniform(-2, 1, n))[rows] * t)
    # Three special rows: every fetch changed, none changed, no observation at all.
    rows = np.r_[rows, np.full(12, n - 3), np.full(12, n - 2)]
    t = np.r_[t, np.ones(24)]
    changed = np.r_[changed, np.ones(12, bool), np.zeros(12, bool)]
    s = stats_from(rows, t, changed, n)
    alpha, beta = 0.8, 0.8 / 0.4            # m = log 0.4, τ² = 1.25
    res = est.estimate_rate(s, alpha, beta, prior_family="lognormal")
    assert res["converged"].all() and np.isfinite(res["lambda_hat"]).all()
    assert res["lambda_hat"].iloc[-1] == pytest.approx(0.4, rel=1e-12)   # prior alone: e^m
    # All changed: above the prior centre; none in 12 days: 12λ = α(m − u) at λ ≈ 0.0955.
    assert res["lambda_hat"].iloc[n - 3] > 2.0 and 0.09 < res["lambda_hat"].iloc[n - 2] < 0.1
    counts = s[list(est.CHANGED_COUNT_COLUMNS)].to_numpy()
    tsum = s[list(est.CHANGED_TSUM_COLUMNS)].to_numpy()
    for i in range(n - 1):
        keep = counts[i] > 0
        c, tb = counts[i, keep], tsum[i, keep] / counts[i, keep]

        def score(u):
            lam = np.exp(u)
            with np.errstate(over="ignore"):
                return ((c * lam * tb / np.expm1(lam * tb)).sum() - s.loc[i, "unch_t"] * lam
                        - alpha * (u - np.log(alpha / beta)))

        root = brentq(score, -30.0, 30.0, xtol=1e-14)
        assert np.log(res["lambda_hat"].iloc[i]) == pytest.approx(root, abs=1e-8)
    assert (res["lambda_lo"] < res["lambda_hat"]).all()
    assert (res["lambda_hat"] < res["lambda_hi"]).all()
    # NaN rows keep the default Gamma prior whatever the family.
    mixed = est.estimate_rate(s, np.r_[np.nan, np.full(n - 1, alpha)],
                              np.r_[np.nan, np.full(n - 1, beta)], prior_family="lognormal")
    assert mixed["lambda_hat"].iloc[0] == pytest.approx(est.estimate_rate(s)["lambda_hat"].iloc[0])
    np.testing.assert_allclose(mixed["lambda_hat"].iloc[1:], res["lambda_hat"].iloc[1:])


def test_prior_only_rows_get_the_normal_prior_interval_in_closed_form():
    """A URL with no observation under a group prior: mode e^m, interval
    exp(m ± sqrt(2 drop / P)), log_sd 1/sqrt(P), the same (to the search's tolerance) as a
    row with a vanishing exposure, which goes through the root search."""
    from scipy import stats as sps

    from jobs.core.estimators_solver import CensoredPosterior, likelihood_ratio_interval

    alpha, beta, level = 0.8, 2.0, 0.9
    m, drop = np.log(alpha / beta), 0.5 * sps.chi2.ppf(level, 1)
    s = stats_from(np.array([], int), np.array([]), np.array([], bool), 2)
    s.loc[1, "unch_t"] = 1e-12   # not prior-only: searched
    res = est.estimate_rate(s, alpha, beta, prior_family="lognormal", level=level)
    want = np.exp([m - np.sqrt(2 * drop / alpha), m + np.sqrt(2 * drop / alpha)])
    assert res["lambda_hat"].iloc[0] == pytest.approx(alpha / beta, rel=1e-12)
    np.testing.assert_allclose(res.loc[0, ["lambda_lo", "lambda_hi"]].to_numpy(float), want,
                               rtol=1e-14)
    assert res["log_sd"].iloc[0] == pytest.approx(1 / np.sqrt(alpha), rel=1e-14)
    np.testing.assert_allclose(res.loc[1, ["lambda_lo", "lambda_hi"]].to_numpy(float), want,
                               rtol=1e-8)
    assert res["log_sd"].iloc[1] == pytest.approx(1 / np.sqrt(alpha), rel=1e-8)
    # The endpoints sit exactly `drop` below the mode.
    post = CensoredPosterior(np.zeros((1, 1)), np.ones((1, 1)), [0.0], [0.0], [m], [alpha])
    lo, hi = likelihood_ratio_interval(post, np.array([alpha / beta]), drop)
    for end in (lo[0], hi[0]):
        gap = post.logpost(np.array([np.log(end)]), np.array([0]))[0] - (-drop)
        assert abs(gap) < 1e-12


def _lognormal_root(counts, tsum, unch_t, alpha, beta):
    keep = counts > 0
    c, tb = counts[keep], tsum[keep] / counts[keep]

    def score(u):
        lam = np.exp(u)
        with np.errstate(over="ignore"):
            return ((c * lam * tb / np.expm1(lam * tb)).sum() - unch_t * lam
                    - alpha * (u - np.log(alpha / beta)))

    return brentq(score, -40.0, 40.0, xtol=1e-14)


def test_a_weak_prior_and_every_fetch_changed_converge_to_the_mode():
    """Newton from the prior's centre stepped far above the mode (the prior's pull is weak,
    the changed bits' almost flat), the step back landed on the bracket end it came from,
    and the two alternated for all 100 iterations: λ̂ came back as the prior's centre (or the
    far end), unconverged. A backtest page, λ = 50/day, 26 changed fetches, group prior
    0.208/day: λ̂ was 0.208 in [0.196, 2e13]. 10-31 such URLs per seed of the backtest."""
    s = est.empty_stats(1)
    counts = np.zeros(est.N_BINS)
    tsum = np.zeros(est.N_BINS)
    counts[2:9] = [2.84, 9.8, 6.65, 1.97, 0.98, 0.93, 1.76]
    tsum[2:9] = [0.61, 2.748, 3.177, 1.521, 1.509, 3.617, 11.145]
    s.loc[0, list(est.CHANGED_COUNT_COLUMNS)] = counts
    s.loc[0, list(est.CHANGED_TSUM_COLUMNS)] = tsum
    for alpha in (0.05, 0.2, 0.5, 1.0, 2.0):
        beta = alpha / 0.20817688810736226
        res = est.estimate_rate(s, alpha, beta, prior_family="lognormal")
        assert res["converged"].all()
        root = _lognormal_root(counts, tsum, 0.0, alpha, beta)
        assert np.log(res["lambda_hat"].iloc[0]) == pytest.approx(root, abs=1e-8)
        assert res["lambda_lo"].iloc[0] < res["lambda_hat"].iloc[0] < res["lambda_hi"].iloc[0]
    # And any all-changed history under any prior weight: the mode, converged.
    rng = np.random.default_rng(8)
    n = 300
    rows = np.repeat(np.arange(n), 10)
    t = 10 ** rng.uniform(-1.5, 0.7, rows.size)
    s = stats_from(rows, t, np.ones(rows.size, bool), n)
    alpha = 10 ** rng.uniform(-1.5, 1.0, n)
    beta = alpha / 10 ** rng.uniform(-2, 1, n)
    res = est.estimate_rate(s, alpha, beta, prior_family="lognormal")
    assert res["converged"].all()
    counts = s[list(est.CHANGED_COUNT_COLUMNS)].to_numpy()
    tsums = s[list(est.CHANGED_TSUM_COLUMNS)].to_numpy()
    for i in range(0, n, 7):
        root = _lognormal_root(counts[i], tsums[i], 0.0, alpha[i], beta[i])
        assert np.log(res["lambda_hat"].iloc[i]) == pytest.approx(root, abs=1e-8)


def test_prior_family_is_checked():
    s = stats_from([0], [1.0], [True], 1)
    with pytest.raises(ValueError):
        est.estimate_rate(s, prior_family="beta")
    with pytest.raises(ValueError):                       # the MLE (0, 0) has no log-normal
        est.estimate_censored_mle(s, 0.0, 0.0, prior_family="lognormal")


@pytest.mark.parametrize("chunk_rows", [1, 70, 150, 10_000])
def test_chunks_of_whole_groups_fit_the_same_priors(chunk_rows):
    """The EM runs on chunks of whole groups to bound its memory: any chunking (one group
    per chunk, several, one group larger than a chunk, all in one) gives the same fits."""
    rng = np.random.default_rng(11)
    sizes = [60, 5, 140, 2, 33, 90]  # 140 > 70: a group alone in a chunk larger than asked
    rows, t, changed, labels, n = [], [], [], [], 0
    for g, size in enumerate(sizes):
        lam = 0.3 * (g + 1) * np.exp(rng.normal(0, 0.8, size))
        r = np.repeat(np.arange(n, n + size), 8)
        rows.append(r)
        t.append(rng.uniform(0.5, 2.0, r.size))
        changed.append(rng.random(r.size) < -np.expm1(-lam[r - n] * t[-1]))
        labels += [f"g{g}"] * size
        n += size
    s = stats_from(np.concatenate(rows), np.concatenate(t), np.concatenate(changed), n)
    s.iloc[::7] = 0.0  # unobserved URLs between observed ones: not in any chunk's rows
    labels = np.array(labels, dtype=object)
    perm = rng.permutation(n)  # groups interleaved, as a shuffle delivers them
    s, labels = s.iloc[perm].reset_index(drop=True), labels[perm]
    whole = fit_group_priors(s, labels, min_urls=3, chunk_rows=10**9)
    chunked = fit_group_priors(s, labels, min_urls=3, chunk_rows=chunk_rows)
    assert list(chunked.index) == list(whole.index)
    assert (chunked["method"] == whole["method"]).all()
    assert (chunked["iterations"] == whole["iterations"]).all()
    for c in ("prior_shape", "prior_rate", "log_mean"):
        np.testing.assert_allclose(chunked[c], whole[c], rtol=1e-12, equal_nan=True)


def test_group_chunks_cover_every_group_once():
    from jobs.core.estimators_shrinkage import _group_chunks

    k = np.array([3.0, 0.0, 5.0, 12.0, 1.0, 0.0, 4.0])
    chunks = list(_group_chunks(k, 6))
    assert chunks == [(0, 2, 0, 3), (2, 3, 3, 8), (3, 4, 8, 20), (4, 7, 20, 25)]
    assert list(_group_chunks(np.zeros(3), 6)) == []


def test_age_at_first_fetch_known_answers_and_decay():
    """A change ``a`` days before the first fetch and none since: λ e^(−λa), weighted as
    every decayed sum is. Known answers, the integral of the decay, and fold-then-decay
    equal to fold-later (the statistics' one rule, decay_stats)."""
    from scipy.integrate import quad
    s = est.add_age_at_first_fetch(est.empty_stats(3), [2, 0], [30.0, 90.0], [0.0, 0.0], np.inf)
    assert s[["lm_n", "lm_changes", "lm_exposure"]].to_numpy().tolist() == [
        [1.0, 1.0, 90.0], [0.0, 0.0, 0.0], [1.0, 1.0, 30.0]]
    h, a, since = 90.0, 90.0, 10.0
    s = est.add_age_at_first_fetch(est.empty_stats(1), [0], [a], [since], h)
    assert s.loc[0, "lm_changes"] == pytest.approx(2 ** (-(a + since) / h), rel=1e-12)
    assert s.loc[0, "lm_n"] == s.loc[0, "lm_changes"]
    exposure, _ = quad(lambda u: 2 ** (-u / h), since, since + a)
    assert s.loc[0, "lm_exposure"] == pytest.approx(exposure, rel=1e-9)
    # However old the Last-Modified, at most h / ln 2 days of exposure.
    epoch = est.add_age_at_first_fetch(est.empty_stats(1), [0], [20_000.0], [0.0], h)
    assert epoch.loc[0, "lm_exposure"] == pytest.approx(h / np.log(2), rel=1e-9)
    # Folded now and decayed 10 days = folded 10 days after the first fetch.
    now = est.decay_stats(est.add_age_at_first_fetch(est.empty_stats(1), [0], [a], [0.0], h),
                          since, h)
    np.testing.assert_allclose(now.to_numpy(), s.to_numpy(), rtol=1e-12)
    # The MLE of the age alone (no decay, vanishing prior) is 1/a.
    lm = est.estimate_last_modified(
        est.add_age_at_first_fetch(est.empty_stats(1), [0], [40.0], [0.0], np.inf),
        prior_shape=1e-9, prior_rate=1e-9).iloc[0]
    assert lm["lambda_hat"] == pytest.approx(1 / 40.0, rel=1e-6)


def test_ages_at_first_fetch_of_poisson_pages_estimate_their_rate():
    """The age of a Poisson process at an instant independent of it is Exp(λ): pooled, the
    ages of many pages give back λ (20,000 draws: the MLE's sd is 0.7 %)."""
    rng = np.random.default_rng(5)
    for lam in (0.01, 0.3, 4.0):
        ages = rng.exponential(1 / lam, 20_000)
        s = est.add_age_at_first_fetch(est.empty_stats(len(ages)), np.arange(len(ages)), ages,
                                       np.zeros(len(ages)), np.inf)
        assert s["lm_changes"].sum() / s["lm_exposure"].sum() == pytest.approx(lam, rel=0.03)


@pytest.mark.parametrize("rows, age, since", [
    ([0], [0.0], [1.0]), ([0], [-1.0], [1.0]), ([0], [np.nan], [1.0]), ([0], [np.inf], [1.0]),
    ([0], [1.0], [-1.0]), ([0, 0], [1.0, 2.0], [1.0, 1.0]), ([3], [1.0], [1.0]),
    ([0.5], [1.0], [1.0]), ([0], [1.0, 2.0], [1.0])])
def test_age_at_first_fetch_refuses_bad_input(rows, age, since):
    with pytest.raises(ValueError):
        est.add_age_at_first_fetch(est.empty_stats(2), np.asarray(rows), age, since, 90.0)
