"""`recrawl report`: the aggregation (small frames), escaping of hostile strings, the reads of
committed partitions on a hand-made root (no Spark), and the page in a real headless browser
(e2e, on a root the real stages produced)."""
from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from jobs import console, partitions, report, storage
from jobs.core import daily_report as dr
from jobs.partitions import MissingPartitionError
from jobs.paths import run_record_path
from jobs.report_html import bar_chart, esc, render
from tests.conftest import make_config

HOSTILE = 'evil"><script>alert(1)</script>\'.example'
DAYS = ["2026-11-27", "2026-11-28", "2026-11-29"]


def _metrics(dt, **kw):
    row = {"dt": pd.Timestamp(dt).date(), "policy": "optimal", "urls_known": 100,
           "urls_gone": 0, "log_rows": 50, "quarantined_rows": 2, "budget": 40,
           "planned_total": 30, "planned_refresh": 25, "planned_fast": 3,
           "planned_discovery": 2, "due_total": 36, "carried_over": 6, "hosts": 3,
           "expected_freshness": 0.8, "audit_freshness": 0.75, "audit_freshness_lo": 0.6,
           "audit_freshness_hi": 0.86, "audit_n": 20, "config_json": "{}"}
    row.update(kw)
    return row


def _plan(hosts=("a.example", "b.example", HOSTILE)):
    n = len(hosts)
    return pd.DataFrame({
        "host": [h for h in hosts for _ in range(3)],
        "url": [f"https://{h}/p{k}" for h in hosts for k in range(3)],
        "lane": ["refresh", "fast", "discovery"] * n,
        "importance": [1.0, 4.0, 9.0] * n,
        "lambda_hat": [0.002, 2.0, 0.0] * n,
        "p_stale_now": [0.5, 0.25, 1.0] * n,
        "visits": [1, 2, 1] * n,
        "cap_binds": [h == HOSTILE for h in hosts for _ in range(3)],
        "host_cap": [5] * (3 * n)})


# --- aggregation --------------------------------------------------------------------------

def test_freshness_series_pairs_each_audit_with_the_previous_runs_forecast():
    m = {DAYS[0]: _metrics(DAYS[0], expected_freshness=0.7),
         DAYS[1]: "metrics/dt=2026-11-28: missing",
         DAYS[2]: _metrics(DAYS[2], expected_freshness=0.9, audit_freshness=0.72)}
    s = dr.freshness_series(DAYS, m)
    assert list(s["dt"]) == DAYS
    assert np.isnan(s.loc[0, "forecast"]) and np.isnan(s.loc[2, "forecast"])  # D-1 missing
    assert s.loc[1, "missing"].startswith("metrics/dt=2026-11-28") and np.isnan(s.loc[1, "audit"])
    m[DAYS[1]] = _metrics(DAYS[1], expected_freshness=0.8, audit_freshness=0.7,
                          audit_freshness_lo=0.65, audit_freshness_hi=0.75)
    s = dr.freshness_series(DAYS, m)
    assert list(s["forecast"].iloc[1:]) == [0.7, 0.8]
    fit = dr.forecast_match(s)
    # day 2: audit 0.70 vs 0.70 (inside); day 3: 0.72 vs 0.80 (inside [0.6, 0.86])
    assert fit["days"] == 2 and fit["covered"] == 2
    assert fit["mean_abs_error"] == pytest.approx(0.04) and fit["bias"] == pytest.approx(-0.04)
    assert dr.forecast_match(s.iloc[:1])["mean_abs_error"] is None  # no pair: None, not 0


def test_host_health_series_gives_the_error_rate_and_leaves_unknown_days_nan():
    m = {DAYS[0]: "metrics/dt=2026-11-27: missing",
         DAYS[1]: _metrics(DAYS[1], hosts_limited=3, hosts_blocked=1, host_fetches=200,
                           host_errors=50, host_throttled=40, capacity_withheld=900),
         DAYS[2]: _metrics(DAYS[2], host_fetches=0, host_errors=0)}
    h = dr.host_health_series(DAYS, m).set_index("dt")
    assert np.isnan(h.loc[DAYS[0]]).all()
    assert h.loc[DAYS[1]].to_dict() == {"hosts_limited": 3, "hosts_blocked": 1,
                                        "host_fetches": 200, "error_rate": 0.25,
                                        "host_throttled": 40, "capacity_withheld": 900}
    assert np.isnan(h.loc[DAYS[2], "error_rate"])  # no fetches: no rate, not 0


def test_lane_budget_counts_unused_budget_per_lane_and_in_total():
    cut = {"refresh": {"budget": 100, "candidates": 60, "selected": 60},
           "fast": {"budget": 20, "candidates": 50, "selected": 20},
           "discovery": {"budget": 5, "candidates": 0, "selected": 0}}
    t = dr.lane_budget(cut).set_index("lane")
    assert t.loc["refresh", "unused"] == 40 and t.loc["fast", "unused"] == 0
    assert t.loc["discovery", "unused"] == 5
    assert t.loc["total"].to_dict() == {"budget": 125, "candidates": 110, "planned": 80,
                                        "to_backfill": 0, "unused": 45}
    # backfill spends what the lanes left (45): the day's budget stays 125, the lanes' 45 are
    # "left to backfill", and only backfill's own leftover (15) is unused, per lane and in total
    cut["backfill"] = {"budget": 45, "candidates": 30, "selected": 30}
    t = dr.lane_budget(cut).set_index("lane")
    assert t.loc["total"].to_dict() == {"budget": 125, "candidates": 140, "planned": 110,
                                        "to_backfill": 45, "unused": 15}
    assert t.loc["refresh", "to_backfill"] == 40 and t.loc["refresh", "unused"] == 0
    assert t.loc["backfill"].to_dict() == {"budget": 45, "candidates": 30, "planned": 30,
                                           "to_backfill": 0, "unused": 15}
    assert t.drop("total")["unused"].sum() == t.loc["total", "unused"]


def test_budget_text_and_chart_say_the_same_unused_budget():
    """The chart's "unused" marks sum to the text's unused figure; backfill is named."""
    cut = {"refresh": {"budget": 4500, "candidates": 4116, "selected": 4116},
           "fast": {"budget": 500, "candidates": 900, "selected": 500},
           "backfill": {"budget": 384, "candidates": 1000, "selected": 384}}
    lanes = dr.lane_budget(cut)
    doc = {**_doc(), "lanes": lanes}
    page = render(doc)
    assert "Unused budget: 0 of 5,000 visits" in page
    assert "The lanes left 384 visits" in page and "lane backfill" in page
    unused_marks = [float(x) for x in __import__("re").findall(r"unused: ([0-9.,]+)</title>",
                                                               page)]
    assert sum(unused_marks) == 0 and "left to backfill: 384</title>" in page


def test_fast_lane_share_is_explained_as_a_floor_for_budget_aware_policies():
    record = {"policy": "optimal", "fast_floor": True, "fast_rate": 6.0,
              "budget_cut": {"fast": {"budget": 4100, "candidates": 3000, "selected": 2516},
                             "refresh": {"budget": 4500, "candidates": 2000, "selected": 2000},
                             "audit": {"budget": 400, "candidates": 10, "selected": 10},
                             "discovery": {"budget": 100, "candidates": 0, "selected": 0}}}
    note = dr.fast_lane_note(record, 0.1)
    assert note["target"] == 910 and note["planned"] == 2516
    page = render({**_doc(), "fast_lane": note})
    assert "fast_share = 0.1" in page and "floor, not a cap" in page and "2,516" in page
    note = dr.fast_lane_note({**record, "fast_floor": False, "policy": "adaptive"}, 0.1)
    assert "floor, not a cap" not in render({**_doc(), "fast_lane": note})


def test_due_planned_carried_leaves_a_missing_day_nan_not_zero():
    f = dr.due_planned_carried(DAYS, {DAYS[0]: _metrics(DAYS[0]), DAYS[1]: "missing",
                                      DAYS[2]: _metrics(DAYS[2], due_total=50, carried_over=20)})
    assert f.loc[0, ["due", "planned", "carried_over"]].tolist() == [36, 30, 6]
    assert f.loc[1, ["due", "planned", "carried_over"]].isna().all()
    assert f.loc[2, "carried_over"] == 20


def test_host_sums_merge_across_batches_and_rank_stale_hosts():
    plan = _plan()
    whole = dr.host_sums(plan)
    merged = dr.merge_host_sums([dr.host_sums(plan.iloc[:4]), dr.host_sums(plan.iloc[4:])])
    pd.testing.assert_frame_equal(whole, merged)
    a = whole.set_index("host").loc["a.example"]
    # the frontier page counts as a page but holds no copy: no importance, no stale weight
    assert a["urls"] == 3 and a["importance"] == 5.0 and a["visits"] == 4
    assert a["stale_weight"] == pytest.approx(1.0 * 0.5 + 4.0 * 0.25)
    top = dr.top_stale_hosts(whole, 2)
    assert len(top) == 2 and top["stale_share"].iloc[0] == pytest.approx(1.5 / 5.0)
    cap = dr.hosts_at_cap(whole)
    assert list(cap["host"]) == [HOSTILE] and cap.loc[0, "host_cap"] == 5


def test_lambda_counts_skip_frontier_pages_and_sum_over_batches():
    plan = _plan()
    counts = dr.lambda_counts(plan["lambda_hat"], plan["lane"])
    assert counts.sum() == 6 and len(counts) == len(dr.lambda_bin_labels())
    labels = dr.lambda_bin_labels()
    assert counts[labels.index("0.001-0.003")] == 3 and counts[labels.index("1-3")] == 3
    assert dr.lambda_counts([np.nan, 1e6], ["refresh", "refresh"])[-1] == 1


def test_quarantine_counts_by_source_and_reason():
    rows = pd.DataFrame({"source": ["fetch_logs"] * 3 + ["importance"],
                         "reason": ["bad_url", "bad_url", "null_url", "bad_importance"]})
    q = dr.quarantine_counts(rows)
    assert q.iloc[0].to_dict() == {"source": "fetch_logs", "reason": "bad_url", "rows": 2}
    assert q["rows"].sum() == 4 and dr.quarantine_counts(pd.DataFrame()).empty


CURVE = {"curve_freshness_050": 0.6, "curve_freshness_075": 0.7, "curve_freshness_090": 0.77,
         "curve_freshness_110": 0.82, "curve_freshness_125": 0.85, "curve_freshness_150": 0.88,
         "curve_freshness_200": 0.9, "curve_age_days_050": 3.0, "curve_age_days_075": 2.0,
         "curve_age_days_090": 1.7, "curve_age_days_110": 1.4, "curve_age_days_125": 1.2,
         "curve_age_days_150": 1.0, "curve_age_days_200": 0.8, "expected_age_days": 1.5,
         "refresh_marginal_value": 0.012, "days_per_pass": 2.5, "budget_per_url": 0.4,
         "fetches_folded": 40, "fetches_304": 10, "bytes_saved_304": 123456,
         "fetches_unchanged": 30}


def test_budget_curve_frame_puts_today_among_the_what_if_points_and_reads_it():
    curve = dr.budget_curve_frame(_metrics(DAYS[2], **CURVE))
    assert list(curve["factor"]) == [0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0]
    assert list(curve["budget"]) == [20, 30, 36, 40, 44, 50, 60, 80]
    assert curve.loc[curve["today"], "freshness"].tolist() == [0.8]
    assert curve.loc[curve["factor"] == 1.25, "age_days"].tolist() == [1.2]
    assert dr.budget_reading(curve) == ("+25 % budget (50 fetches/day instead of 40) would "
                                        "raise expected freshness from 0.800 to 0.850")
    # a row from before the curve: NaN points, no reading
    old = dr.budget_curve_frame(_metrics(DAYS[2]))
    assert old.loc[~old["today"], "freshness"].isna().all() and dr.budget_reading(old) is None


def test_budget_series_takes_the_multiplier_and_the_log_shares():
    m = {DAYS[0]: "missing", DAYS[1]: _metrics(DAYS[1], policy_level=0.5),
         DAYS[2]: _metrics(DAYS[2], **CURVE)}
    s = dr.budget_series(DAYS, m).set_index("dt")
    assert s.loc[DAYS[0]].isna().all()
    assert s.loc[DAYS[1], "multiplier"] == 0.5 and np.isnan(s.loc[DAYS[1], "share_304"])
    assert s.loc[DAYS[2], "multiplier"] == 0.012
    assert s.loc[DAYS[2], ["share_304", "share_unchanged", "days_per_pass"]].tolist() == [
        0.25, 0.75, 2.5]


# --- rendering and escaping ---------------------------------------------------------------

def _doc(**over):
    metrics = {d: _metrics(d) for d in DAYS}
    metrics[DAYS[-1]].update(CURVE)
    metrics[DAYS[0]] = f"metrics/dt={DAYS[0]}: missing; run {HOSTILE}"
    series = dr.freshness_series(DAYS, metrics)
    sums = dr.host_sums(_plan())
    plan = _plan()
    doc = {"run_date": DAYS[-1], "days": DAYS, "metrics": metrics[DAYS[-1]],
           "missing": {DAYS[0]: metrics[DAYS[0]]}, "freshness": series,
           "forecast": dr.forecast_match(series),
           "lanes": dr.lane_budget({"refresh": {"budget": 30, "candidates": 20, "selected": 20},
                                    HOSTILE: {"budget": 10, "candidates": 9, "selected": 9}}),
           "flow": dr.due_planned_carried(DAYS, metrics), "hosts_at_cap": dr.hosts_at_cap(sums),
           "health": dr.host_health_series(DAYS, metrics),
           "hosts_planned": len(sums),
           "lambda": pd.DataFrame({"bin": dr.lambda_bin_labels(),
                                   "pages": dr.lambda_counts(plan["lambda_hat"], plan["lane"])}),
           "quarantine": dr.quarantine_counts(pd.DataFrame({"source": ["fetch_logs"],
                                                            "reason": [HOSTILE]})),
           "stale_hosts": dr.top_stale_hosts(sums, 10), "top": 10}
    doc["budget_curve"] = dr.budget_curve_frame(metrics[DAYS[-1]])
    doc["budget_reading"] = dr.budget_reading(doc["budget_curve"])
    doc["budget_series"] = dr.budget_series(DAYS, metrics)
    doc["metrics"]["policy"] = HOSTILE
    doc.update(over)
    return doc


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_hostile_strings_are_escaped_everywhere_on_the_page():
    page = render(_doc())
    assert "<script" not in page.lower() and HOSTILE not in page
    assert esc(HOSTILE) in page  # shown, as text
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert sum(HOSTILE in t for t in parser.text) >= 4  # host tables, lane, reason, policy, note
    # every SVG is well-formed XML (an unescaped quote or '<' in a label would break it)
    svgs = page.split("<svg")[1:]
    assert len(svgs) == 7  # 4 + the budget curve (freshness, age) and the multiplier
    for s in svgs:
        ET.fromstring("<svg" + s.split("</svg>")[0] + "</svg>")
    assert "Content-Security-Policy" in page and "http" not in page.split("<body>")[0].replace(
        'http-equiv', '')


def test_missing_days_are_said_on_the_page_not_left_blank():
    page = render(_doc())
    assert 'class="missing"' in page and f"{DAYS[0]}: metrics/dt={DAYS[0]}: missing" in page
    assert ">missing</text>" in page  # in the freshness chart, at that day
    # a bar chart slot without data says n/a instead of drawing a zero bar
    svg = bar_chart("t", ["x", "y"], [("s", [np.nan, 3.0])], ylabel="v", xlabel="c")
    assert ">n/a</text>" in svg and svg.count("<rect") == 1 + 1  # legend box + one bar


def test_input_warnings_of_the_run_records_are_on_the_page_once_each():
    stale = f"importance: the latest committed snapshot is dt=2026-11-01 {HOSTILE}"
    warnings = dr.input_warnings([{"warnings": [stale]}, {"warnings": [stale, "b"]}, {}])
    assert warnings == [stale, "b"]
    page = render(_doc(warnings=warnings))
    assert "Input warnings" in page and page.count(esc(stale)) == 1 and HOSTILE not in page
    assert "Input warnings" not in render(_doc(warnings=[]))
    assert "Input warnings" not in render(_doc())  # a doc built before the key


def test_a_day_without_audit_fetches_is_flagged():
    doc = _doc()
    doc["freshness"].loc[2, "audit"] = np.nan
    assert "no audit fetch scored" in render(doc)
    doc["freshness"].loc[1, "audit"] = np.nan  # two days in a row: one line for both
    page = render(doc)
    assert f"{DAYS[1]} .. {DAYS[2]} (2 days): no audit fetch scored" in page
    assert page.count("no audit fetch scored") == 1


def test_empty_sections_say_so_instead_of_drawing_an_empty_table():
    doc = _doc()
    page = render({**doc, "hosts_at_cap": doc["hosts_at_cap"].iloc[:0],
                   "stale_hosts": doc["stale_hosts"].iloc[:0],
                   "quarantine": doc["quarantine"].iloc[:0]})
    assert "0 of 3 planned hosts are at their daily cap." in page
    assert "No known page with a positive importance in plan/dt=2026-11-29." in page
    assert "No input row was quarantined on 2026-11-29." in page
    # freshness, lanes, budget curve and budget figures, due/planned/carried, host health
    assert page.count("<table>") == 6


# --- reads of committed partitions (no Spark) --------------------------------------------

def _commit(path, frame):
    storage.write_parquet(f"{path}/part-00000.parquet",
                          __import__("pyarrow").Table.from_pandas(frame, preserve_index=False))
    partitions.commit_files(path, os.path.basename(os.path.dirname(path)),
                            [f"{path}/part-00000.parquet"])


@pytest.fixture()
def hand_root(tmp_path):
    cfg = make_config(str(tmp_path))
    for d in DAYS[1:]:  # no metrics for the first day
        _commit(cfg.paths.table("metrics", d), pd.DataFrame([_metrics(d)]))
    d = DAYS[-1]
    plan = _plan()
    _commit(cfg.paths.table("plan", d), plan.iloc[:5])
    storage.write_parquet(f"{cfg.paths.table('plan', d)}/part-00001.parquet",
                          __import__("pyarrow").Table.from_pandas(plan.iloc[5:]))
    partitions.commit_files(cfg.paths.table("plan", d), "plan",
                            [f"{cfg.paths.table('plan', d)}/part-0000{k}.parquet" for k in (0, 1)])
    storage.write_json(run_record_path(cfg, d, "allocate"), {"budget_cut": {
        "refresh": {"budget": 30, "candidates": 20, "selected": 20}}})
    storage.write_json(run_record_path(cfg, d, "update_state"), {})
    q = f"{cfg.paths.table('quarantine', d)}/source=fetch_logs/part-0.parquet"
    storage.write_parquet(q, __import__("pyarrow").table(
        {"reason": ["bad_url", "bad_url", "null_url"], "url": ["x", HOSTILE, None],
         "row_json": ["{}"] * 3}))
    return cfg


def test_build_reads_committed_partitions_and_marks_missing_days(hand_root):
    doc = report.build(hand_root, DAYS[-1], days=3, top=5)
    assert list(doc["missing"]) == [DAYS[0]] and "is missing" in doc["missing"][DAYS[0]]
    assert doc["hosts_planned"] == 3 and list(doc["hosts_at_cap"]["host"]) == [HOSTILE]
    assert int(doc["lambda"]["pages"].sum()) == 6
    assert doc["quarantine"].to_dict("records") == [
        {"source": "fetch_logs", "reason": "bad_url", "rows": 2},
        {"source": "fetch_logs", "reason": "null_url", "rows": 1}]
    assert doc["forecast"]["days"] == 1 and doc["lanes"].iloc[-1]["unused"] == 10
    assert doc["warnings"] == []  # the run records have none


def test_missing_partition_of_the_date_itself_is_a_named_error(hand_root, tmp_path, capsys):
    with pytest.raises(MissingPartitionError, match=r"\[metrics\].*dt=2026-11-30"):
        report.build(hand_root, "2026-11-30", days=2)
    shutil.rmtree(hand_root.paths.table("plan", DAYS[-1]))
    with pytest.raises(MissingPartitionError, match=r"\[plan\]"):
        report.build(hand_root, DAYS[-1])
    out = tmp_path / "r.html"
    code = console.main(["report", "--date", DAYS[-1], "--out", str(out),
                         "--set", f"paths.root={hand_root.paths.root}"])
    assert code == 2 and not out.exists()
    assert "MissingPartitionError: [plan]" in capsys.readouterr().err


def test_an_unwritable_out_is_one_line_and_a_failed_build_keeps_the_old_page(hand_root,
                                                                              tmp_path, capsys):
    sets = ["--set", f"paths.root={hand_root.paths.root}"]
    pages = tmp_path / "pages"
    pages.mkdir()
    for out in (pages, pages / "no-such-dir" / "r.html"):
        assert console.main(["report", "--date", DAYS[-1], "--out", str(out), *sets]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and f"OutputError: --out {out}: cannot be written" in err[0]
    old = pages / "r.html"
    old.write_text("yesterday's page")
    assert console.main(["report", "--date", "2026-11-30", "--out", str(old), *sets]) == 2
    assert "MissingPartitionError" in capsys.readouterr().err
    assert old.read_text() == "yesterday's page" and os.listdir(pages) == ["r.html"]
    assert console.main(["report", "--date", DAYS[-1], "--out", str(old), *sets]) == 0
    assert old.read_text().startswith("<!doctype html>")
    assert oct(old.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_console_writes_the_page(hand_root, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert console.main(["report", "--date", DAYS[-1], "--days", "3", "--out", str(out),
                         "--set", f"paths.root={hand_root.paths.root}"]) == 0
    page = out.read_text()
    # 4 + the multiplier; no curve in a row from before it (said instead)
    assert page.startswith("<!doctype html>") and page.count("<svg") == 5
    assert "No what-if curve for this day" in page
    assert "<script" not in page and esc(HOSTILE) in page
    assert json.loads(json.dumps(str(out))) in capsys.readouterr().out


# --- the page in a real headless browser (e2e) --------------------------------------------

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCREENSHOT_COPY = "/tmp/report_screenshot.png"


@pytest.fixture(scope="module")
def demo_data(demo_run):
    """The README demo's data root (tests/conftest.py ``demo_run``): the real DAG for four
    days, a simulated fleet executing three of the published schedules, audits included."""
    from jobs.config import load_config

    return {"cfg": load_config(str(demo_run["workdir"] / "recrawl.toml")),
            "run_date": demo_run["run_date"]}


def _browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            pytest.fail(f"{exe} is missing: apt-get install -y chromium chromium-driver "
                        f"(infra/setup.sh does it when run as root)")
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,900", f"--user-data-dir={tmp_path / 'chrome-profile'}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


@pytest.mark.e2e
def test_report_renders_in_headless_chromium(demo_data, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    cfg, d = demo_data["cfg"], demo_data["run_date"]
    days = 8  # reaches back before the history began: those days must say "missing"
    doc = report.build(cfg, d, days=days, top=10)
    assert doc["forecast"]["days"] >= 3 and len(doc["missing"]) >= 1
    audited = doc["freshness"].dropna(subset=["audit", "audit_lo", "audit_hi"])
    assert len(audited) >= 3 and (audited["audit_lo"] < audited["audit_hi"]).all()
    page = tmp_path / "report.html"
    assert console.main(["report", "--date", d, "--days", str(days), "--top", "10",
                         "--out", str(page), "--set", f"paths.root={cfg.paths.root}"]) == 0
    # the same figures with a hostile host injected into the tables, as a second page
    hostile = doc["stale_hosts"].copy()
    hostile.loc[0, "host"] = HOSTILE
    evil = tmp_path / "hostile.html"
    evil.write_text(render({**doc, "stale_hosts": hostile,
                            "hosts_at_cap": hostile[["host"]].assign(host_cap=1, visits=1,
                                                                     urls=1)}))

    driver = _browser(tmp_path)
    try:
        driver.get(page.as_uri())
        assert driver.title == f"recrawl daily report {d}"
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe
        svgs = driver.find_elements(By.CSS_SELECTOR, "svg")
        titles = [driver.execute_script("return arguments[0].querySelector('title').textContent",
                                        s) for s in svgs]
        assert titles == ["Freshness: audit (with interval) against the planner's forecast",
                          "Budget by lane: planned and unused",
                          "Expected freshness against the daily budget",
                          "Expected age against the daily budget",
                          "The day's multiplier: value of one more visit/day",
                          "Visits due, planned and carried over per run",
                          "Known pages by estimated change rate λ̂"]
        for s in svgs:  # laid out with a real size, and with marks drawn in it
            assert s.size["width"] > 500 and s.size["height"] > 200
            assert len(s.find_elements(By.CSS_SELECTOR, "rect, circle")) >= 2
        # audited days: a point with its interval (a vertical line) on at least three days
        assert len(svgs[0].find_elements(By.CSS_SELECTOR, "circle")) >= 3
        intervals = [ln for ln in svgs[0].find_elements(By.CSS_SELECTOR, "line")
                     if ln.get_attribute("stroke-width") == "2"
                     and ln.get_attribute("x1") == ln.get_attribute("x2")]
        assert len(intervals) >= 3
        # no contradictory numbers: the chart's "unused" marks sum to the text's figure,
        # what the lanes left to backfill is named, and the fast lane's share is explained
        body = driver.find_element(By.TAG_NAME, "body").text
        lanes = doc["lanes"].set_index("lane")
        unused_text = f"Unused budget: {lanes.loc['total', 'unused']:,} of "
        assert unused_text in body
        marks = [driver.execute_script("return arguments[0].textContent", t)
                 for t in svgs[1].find_elements(By.CSS_SELECTOR, "rect > title")]
        unused_marks = [float(m.rsplit(": ", 1)[1].replace(",", "")) for m in marks
                        if " unused: " in m]
        assert sum(unused_marks) == lanes.loc["total", "unused"]
        if "backfill" in lanes.index:
            assert f"The lanes left {lanes.loc['total', 'to_backfill']:,} visits" in body
        assert "budget.fast_share = " in body and "Fast lane: " in body
        box = driver.find_element(By.CSS_SELECTOR, ".missing")
        assert box.is_displayed() and "Missing inputs" in box.text
        tables = 7 + (len(doc["hosts_at_cap"]) > 0) + (len(doc["quarantine"]) > 0)
        # The Budget section: the curve with today's budget marked, read in one line.
        curve = doc["budget_curve"]
        assert curve["freshness"].notna().all() and curve["age_days"].notna().all()
        fresh = curve["freshness"].to_numpy()
        assert np.all(np.diff(fresh) >= -1e-12)  # more budget never expected to buy less
        reading = driver.find_element(By.ID, "budget-reading")
        assert reading.is_displayed() and reading.text.startswith("+25 % budget (")
        today = curve.loc[curve["today"]].iloc[0]
        assert f"from {today['freshness']:.3f} to" in reading.text
        for s in svgs[2:4]:  # a marker line at today's budget, a point per budget
            assert f"today: {today['budget']:,.0f}" in s.text
            assert len(s.find_elements(By.CSS_SELECTOR, "circle")) == len(curve)
        multiplier = doc["budget_series"]["multiplier"]
        assert multiplier.notna().sum() >= 2  # one bar per planned day
        assert len(svgs[4].find_elements(By.CSS_SELECTOR, "rect")) >= 1 + multiplier.notna().sum()
        assert len(driver.find_elements(By.TAG_NAME, "table")) == tables
        assert driver.find_elements(By.TAG_NAME, "script") == []
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1100, height + 200)
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 20_000
        shutil.copyfile(shot, SCREENSHOT_COPY)

        driver.get(evil.as_uri())
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018 -- the injected script never ran
        assert driver.find_elements(By.TAG_NAME, "script") == []
        cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "td")]
        assert cells.count(HOSTILE) == 2  # shown as text in both host tables
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()
