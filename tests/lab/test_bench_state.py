"""The benchmark's synthetic state meets the STATE and FRONTIER contracts."""
import numpy as np
import pandas as pd

from jobs import partitions, schemas, storage
from lab.studies.bench_state import host_sizes, write_synthetic


def test_host_sizes_sum_to_urls_and_are_skewed():
    sizes = host_sizes(100_000, 200, np.random.default_rng(0))
    assert sizes.sum() == 100_000 and sizes.min() >= 1
    assert sizes.max() > 10 * np.median(sizes)  # a few big hosts hit their cap


def test_synthetic_tables_pass_their_contracts_and_are_deterministic(tmp_path):
    made = write_synthetic(str(tmp_path / "a"), "2024-01-02", 5000, 50, chunk_rows=2000)
    write_synthetic(str(tmp_path / "b"), "2024-01-02", 5000, 50, chunk_rows=2000)
    assert made == {"state_rows": 5000, "frontier_rows": 250, "hosts": 50}
    for table in ("state", "hosts"):  # allocate reads only committed partitions
        assert partitions.committed_files(str(tmp_path / "a" / table / "dt=2024-01-02"), table)
    for table, contract in (("state", schemas.STATE), ("frontier", schemas.FRONTIER),
                            ("hosts", schemas.HOSTS)):
        files = storage.list_parquet_files(str(tmp_path / "a" / table / "dt=2024-01-02"))
        schemas.check_files(contract, files)
    state = pd.read_parquet(tmp_path / "a" / "state" / "dt=2024-01-02")
    again = pd.read_parquet(tmp_path / "b" / "state" / "dt=2024-01-02")
    assert len(state) == 5000 and state.url.is_unique and state.host.nunique() == 50
    assert (state.lambda_hat > 0).all() and set(state.lane) == {"refresh", "fast"}
    assert (state.last_fetch_at < pd.Timestamp("2024-01-03", tz="UTC")).all()
    pd.testing.assert_frame_equal(state, again)
