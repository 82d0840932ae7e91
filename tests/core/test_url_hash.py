"""The vectorised URL hash (XXH64) and the audit sample's uniform numbers built on it."""
import numpy as np
import pytest

from jobs.core import audit_sample, url_hash

# Spark's xxhash64(col) is XXH64 with seed 42 (as signed long); these values are Spark
# 4.3's, and tests/stages/test_allocate_spark.py checks the agreement on random strings live.
SPARK_XXHASH64 = {
    "": -7444071767201028348, "a": -8582455328737087284, "abc": 1423657621850124518,
    "https://h0.example/p0": 1013589566830707571, "x" * 40: -5348608777870439244,
    "https://例え.jp/パス?q=1": 5397557641701625652,
}


def test_xxh64_reference_values():
    # The xxHash reference implementation's values for seed 0.
    got = url_hash.xxh64(["", "a", "abc"], 0)
    assert got.tolist() == [0xEF46DB3751D8E999, 0xD24EC4F1A98C6E5B, 0x44BC2CF5AD770999]
    spark = url_hash.xxh64(list(SPARK_XXHASH64), 42).view(np.int64)
    assert spark.tolist() == list(SPARK_XXHASH64.values())


def test_xxh64_of_a_string_does_not_depend_on_its_batch():
    # Every branch (stripes, 8-byte words, a 4-byte word, single bytes) at every length
    # and byte alignment, alone and among longer or shorter strings.
    rng = np.random.default_rng(5)
    alphabet = list("abcdefghij/:.-_?=&%") + ["é", "日", "🙂"]
    strings = ["".join(rng.choice(alphabet, n)) for n in rng.integers(0, 150, 300)]
    batch = url_hash.xxh64(strings, 7)
    alone = np.array([url_hash.xxh64([s], 7)[0] for s in strings], dtype=np.uint64)
    np.testing.assert_array_equal(batch, alone)
    np.testing.assert_array_equal(url_hash.xxh64(strings[::-1], 7), batch[::-1])


def test_values_that_are_not_strings_hash_as_their_str():
    np.testing.assert_array_equal(url_hash.xxh64([1, None, "x"], 3),
                                  url_hash.xxh64(["1", "None", "x"], 3))
    assert url_hash.xxh64([], 3).size == 0


def test_units_are_uniform_even_for_near_identical_urls():
    urls = np.array([f"https://a.example/p{i}" for i in range(200_000)], dtype=object)
    u = audit_sample.url_unit(urls)
    assert u.min() >= 0.0 and u.max() < 1.0
    counts = np.bincount((u * 100).astype(int), minlength=100)
    chi2 = float(((counts - 2000.0) ** 2 / 2000.0).sum())
    assert chi2 < 160  # 99 degrees of freedom: P(chi2 > 160) ~ 1e-4
    assert abs(np.mean(u < 0.01) - 0.01) < 5 * np.sqrt(0.01 * 0.99 / urls.size)
    # The day's number is a different hash: uncorrelated with membership, new every day.
    d0, d1 = audit_sample.day_unit(urls, 100), audit_sample.day_unit(urls, 101)
    assert abs(np.corrcoef(u, d0)[0, 1]) < 0.01 and abs(np.corrcoef(d0, d1)[0, 1]) < 0.01
    assert abs(d0.mean() - 0.5) < 0.005


def test_audit_sample_is_a_pure_function_of_the_url():
    urls = [f"https://b.example/{i}" for i in range(5000)]
    first = audit_sample.in_audit_sample(urls, 0.1)
    assert first.tolist() == audit_sample.in_audit_sample(list(reversed(urls)), 0.1)[::-1].tolist()
    assert audit_sample.in_audit_sample(urls, 0.0).sum() == 0
    assert audit_sample.in_audit_sample(urls, 1.0).all()
    with pytest.raises(ValueError):
        audit_sample.in_audit_sample(urls, 1.5)
