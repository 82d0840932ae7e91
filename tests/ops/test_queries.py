"""Every query in docs/queries.md runs, and answers right, so the examples cannot rot.

Fast tier: the DuckDB blocks against a small root whose plan rows come from allocate's real
third pass (jobs.core.host_plan.plan_bucket) and whose metrics and run records follow the
contract. The Spark SQL blocks (and the DuckDB ones again) run on a root built by the real
stages in tests/ops/test_explain.py (e2e).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import metrics, schemas
from jobs.config import load_config
from jobs.core import host_plan
from tests.conftest import REPO
from tests.core.test_host_plan import LEVELS, _bucket, _ctx

DOC = os.path.join(REPO, "docs", "queries.md")
DEMO_ROOT = "var/demo/data"
EXAMPLE_URL = "https://h0032.example.com/docs/item-104"
DAYS = ("2026-11-27", "2026-11-28", "2026-11-29")  # the first: rebuilt, no plan


def query_blocks(engine: str) -> list[tuple[str, str]]:
    """(section title, SQL text) of every ```sql <engine> block of docs/queries.md."""
    text = open(DOC).read()
    out, section = [], None
    for m in re.finditer(r"^## ([^\n]+)$|^```sql (\w+)\n(.*?)^```$", text, re.M | re.S):
        if m.group(1):
            section = m.group(1)
        elif m.group(2) == engine:
            out.append((section, m.group(3)))
    return out


def localised(sql: str, root: str, url: str) -> str:
    """A block's text with the demo root and the example URL replaced."""
    assert DEMO_ROOT in sql
    return sql.replace(DEMO_ROOT, root.rstrip("/")).replace(EXAMPLE_URL, url)


def statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]


def run_duckdb(sql: str) -> pd.DataFrame:
    import duckdb

    con = duckdb.connect()
    try:
        *setup, last = statements(sql)
        for s in setup:
            con.execute(s)
        return con.execute(last).df()
    finally:
        con.close()


def build_root(root: str) -> dict:
    """plan/ and metrics/ of three days (plan rows from the real pass 3, metrics rows from
    jobs.metrics); the first day was only rebuilt, so its row has no plan."""
    cfg = load_config(None, [f"paths.root={root}"])
    plans = {}
    for i, day in enumerate(DAYS):
        upd = {"urls_known": 400 + i, "urls_gone": 0, "log_rows": 100, "audit_n": 30 + i,
               "audit_freshness": 0.7 + 0.05 * i, "audit_freshness_lo": 0.6,
               "audit_freshness_hi": 0.9}
        if i == 0:
            metrics.write(cfg, day, metrics.metrics_row(cfg, day, upd, None, None,
                                                        "rebuild_state"))
            continue
        plan_cols = metrics.plan_columns(
            cfg, {"due_total": 600, "expected_freshness": 0.8 + 0.01 * i, "refresh_value": 0.05},
            {"planned_total": 450 + i, "planned_refresh": 300, "planned_fast": 100 + i,
             "planned_discovery": 30 - i, "planned_audit": 20, "hosts": 10}, 500, "fixed")
        metrics.write(cfg, day, metrics.metrics_row(cfg, day, upd, {}, plan_cols,
                                                    "build_schedule"))
        out = host_plan.plan_bucket(_bucket(seed=i), _ctx("optimal", level=LEVELS[0]))
        plan = out[out.reason.notna()].infer_objects().reset_index(drop=True)
        from tests.core.test_host_plan import ts  # NaN-safe: NaT where no copy

        for at, secs in (("last_success_at", "last_success_s"), ("stale_since_at", "stale_since_s")):
            plan[at] = ts(plan[secs].to_numpy(float)).to_numpy()
        table = pa.Table.from_pandas(plan[schemas.PLAN.names], preserve_index=False)
        os.makedirs(os.path.join(root, "plan", f"dt={day}"))
        pq.write_table(table.cast(schemas.PLAN.arrow_schema()),
                       os.path.join(root, "plan", f"dt={day}", "part-0.parquet"))
        plans[day] = plan
    return plans


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("queries"))
    return root, build_root(root)


def test_the_doc_has_both_engines_for_every_question():
    duck, spark = query_blocks("duckdb"), query_blocks("spark")
    sections = {s for s, _ in duck}
    assert len(sections) == 4 and sections == {s for s, _ in spark}
    assert len(duck) == len(spark) >= 5


def check_answers(blocks: list[tuple[str, pd.DataFrame]], plan: pd.DataFrame, url: str,
                  days_with_metrics: int, days: int) -> None:
    """The answers of the five blocks, in the doc's order, against the latest plan."""
    (_, fresh), (_, stale), (_, budget), (_, lanes), (_, why) = blocks
    assert len(fresh) == days and fresh.expected_freshness.notna().sum() == days_with_metrics
    assert fresh.audit_freshness.notna().any() or fresh.audit_n.fillna(0).eq(0).all()
    live = plan[(plan.lane != "discovery") & (plan.reason != "gone_recheck")]
    want = (live.assign(w=live.importance * live.p_stale_now).groupby("host").w.sum()
            .sort_values(ascending=False))
    assert list(stale.host) == list(want.index[:len(stale)])
    np.testing.assert_allclose(stale.stale_importance, want.round(3).iloc[:len(stale)])
    assert len(budget) == days_with_metrics
    assert (budget.unused == budget.budget - budget.planned_total).all()
    assert lanes.pages.sum() == len(plan)
    np.testing.assert_allclose(lanes.visits_per_day.sum(),
                               plan.planned_rate.sum(), atol=0.01 * len(lanes))
    row = plan[plan.url == url].iloc[0]
    assert 1 <= len(why) <= days_with_metrics and why.reason.iloc[-1] == row.reason
    assert why.multiplier.notna().all()


def test_every_duckdb_query_runs_and_answers_right(small_root):
    root, plans = small_root
    plan = plans[DAYS[-1]]
    url = plan[plan.reason == "multiplier"].url.iloc[0]
    answers = [(s, run_duckdb(localised(sql, root, url))) for s, sql in query_blocks("duckdb")]
    for section, frame in answers:
        assert len(frame), section
    check_answers(answers, plan, url, days_with_metrics=2, days=3)
    fresh = answers[0][1]
    np.testing.assert_allclose(fresh.audit_freshness, [0.7, 0.75, 0.8])
