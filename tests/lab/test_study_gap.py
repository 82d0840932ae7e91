"""lab.studies.study_gap: optimal's gain over the oracle net of the visits it took."""
import numpy as np
import pandas as pd
import pytest

from lab.studies.study_gap import evidence_class, gap_table


def test_a_group_is_charged_for_the_visits_it_took_from_the_others():
    # Two pages of weight 2; the oracle's total weighted freshness is 2*0.5 + 2*0.5 = 2.
    pages = pd.DataFrame({"kind": ["poisson", "daily"], "lam": [5.0, 0.5],
                          "lambda_hat": [5.0 * np.e, 0.5], "cls": ["lm", "none"],
                          "importance": [2.0, 2.0], "F": [0.4, 0.8], "F_oracle": [0.5, 0.5],
                          "f": [1.0, 3.0], "f_oracle": [2.0, 2.0]})
    out = gap_table(pages, mu=0.1).reset_index().set_index("kind")
    # poisson: 2*(0.4-0.5) - 0.1*(1-2) = -0.1 -> -5 %; daily: 2*0.3 - 0.1*1 = 0.5 -> +25 %
    assert out.loc["poisson", "net"] == pytest.approx(-5.0)
    assert out.loc["daily", "net"] == pytest.approx(25.0)
    assert out.loc["poisson", "log_err"] == pytest.approx(1.0)
    assert str(out.loc["poisson", "decade"]) == "(3.0, 10.0]"
    with pytest.raises(ValueError):
        gap_table(pages, mu=float("nan"))


def test_evidence_class_prefers_last_modified_then_push():
    assert evidence_class([True, False, False, True], [False, True, False, True]).tolist() == \
        ["lm", "push", "none", "lm"]
