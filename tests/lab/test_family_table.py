"""lab.tools.family_table: a run of optimal alone scored against another run's oracle."""
import numpy as np
import pandas as pd

from lab.tools.family_table import table


def _report(path, policies, fresh):
    data = path / "data"
    data.mkdir(parents=True)
    rows, mets = [], []
    for pol, f in zip(policies, fresh):
        rows.append(pd.DataFrame({
            "policy": pol, "seed": 0, "kind": np.array([0, 0, 1, 1]),
            "front": np.array([False, True, False, False]), "importance": np.ones(4),
            "obs_days": np.full(4, 10.0), "fresh_days": np.array(f, float),
            "visits_per_day": np.full(4, 0.5)}))
        mets.append({"policy": pol, "seed": 0, "politeness_gap_violations": 0,
                     "politeness_cap_violations": 0, "budget_overrun": 0})
    pd.concat(rows).to_parquet(data / "pages.parquet")
    pd.DataFrame(mets).to_parquet(data / "metrics.parquet")
    return str(path)


def test_ratios_per_kind_against_the_other_runs_oracle(tmp_path):
    base = _report(tmp_path / "base", ["optimal", "oracle"], [[5, 5, 5, 5], [5, 5, 4, 4]])
    after = _report(tmp_path / "after", ["optimal"], [[5, 5, 6, 6]])
    t = table(base, [("before", base), ("after", after)]).set_index("run")
    assert t.loc["before", "daily"] == 1.25 and t.loc["after", "daily"] == 1.5
    assert t.loc["after", "poisson"] == 1.0 and t.loc["after", "front"] == 1.0
    assert t.loc["after", "all"] == round(22 / 18, 3)
    assert t.loc["after", "visits/day"] == 2.0 and t.loc["after", "budget_overrun"] == 0
    assert t.loc["after", "v/day daily"] == 1.0 and t.loc["oracle", "v/day front"] == 0.5
