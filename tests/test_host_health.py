import numpy as np
import pytest

from jobs.core.host_health import next_cap_factor


def test_aimd_cuts_multiplicatively_and_recovers_additively():
    f = [np.nan]
    days = [(100, 20, 0, 300.0)] * 3 + [(100, 0, 0, 300.0)] * 4
    for n, err, thr, lat in days:
        f.append(next_cap_factor([f[-1]], [n], [err], [thr], [lat])[0])
    assert f[1:] == pytest.approx([0.5, 0.25, 0.125, 0.225, 0.325, 0.425, 0.525])


@pytest.mark.parametrize("n, err, thr, lat, expected", [
    (100, 4, 0, 300.0, 0.9),        # 4 % errors: within the 5 % limit, +0.1
    (100, 6, 0, 300.0, 0.4),        # 6 %: cut
    (100, 0, 1, 300.0, 0.4),        # any 429: cut
    (100, 0, 0, 2500.0, 0.4),       # slow: cut
    (3, 3, 0, 300.0, 0.8),          # too few fetches to judge: unchanged
    (100, 0, 0, np.nan, 0.9),       # unknown latency is not held against the host
])
def test_aimd_rules(n, err, thr, lat, expected):
    assert next_cap_factor([0.8], [n], [err], [thr], [lat])[0] == pytest.approx(expected)


def test_floor():
    assert next_cap_factor([0.06], [10], [10], [0], [1.0], min_cap_factor=0.05)[0] == 0.05
