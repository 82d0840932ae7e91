"""lab.studies.study_signal_evidence on a hand-made data root."""
import pandas as pd

from lab.studies.study_signal_evidence import evidence_outcomes


def _write(root, table, day, df):
    path = root / table / f"dt={day}"
    path.mkdir(parents=True)
    df.to_parquet(path / "part-0.parquet")


def test_outcomes_of_no_change_evidence(tmp_path):
    ev = pd.Timestamp("2026-01-02", tz="UTC")
    _write(tmp_path, "state", "2026-01-02", pd.DataFrame({
        "url": ["a", "b", "c", "d"], "content_hash": ["h", "h", "h", "h"],
        "signal_unchanged_at": [ev, ev, ev, pd.NaT]}))
    t = pd.Timestamp("2026-01-03T05:00", tz="UTC")
    _write(tmp_path, "fetch_logs", "2026-01-03", pd.DataFrame({
        "url": ["a", "b", "c", "d", "a"], "fetched_at": [t, t, t, t, t + pd.Timedelta(1, "h")],
        "status": [304, 200, 200, 200, 200], "content_hash": [None, "h2", "h3", "h4", "h5"],
        "lane": ["refresh"] * 5,
        "last_modified": [None, "Sat, 03 Jan 2026 01:00:00 GMT",
                          "Thu, 01 Jan 2026 12:00:00 GMT", None, None]}))
    # a: 304 first (unchanged); b: changed after the evidence; c: changed before it (refuted).
    assert evidence_outcomes(str(tmp_path)) == {"evidence": 3, "next_unchanged": 1,
                                                "next_changed": 2, "refuted": 1,
                                                "later_change": 1}
