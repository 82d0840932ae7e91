"""Draw the daily report (``jobs/report.py``'s figures) as one self-contained HTML page.

Figures are inline SVG written here (no plotting library, no scripts, no external CSS or
fonts); a Content-Security-Policy allowing nothing but the inline style is the second line of
defence. Every string that comes from data (hosts, reasons, lanes, policy, missing-input
messages) goes through :func:`esc`: URLs and hosts are hostile input.
"""
from __future__ import annotations

import html
import math

import pandas as pd

from jobs.paths import schedule_date

W, H = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 76
COLOURS = ("#3366aa", "#ee8833", "#55aa55", "#cc4444", "#8866bb")
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:1.5em auto;
max-width:1000px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{padding:2px 8px;border-bottom:1px solid #e4e4e4;text-align:right}
td:first-child,th:first-child{text-align:left;white-space:nowrap}
.missing{background:#fff3cd;border:1px solid #e0b000;padding:.5em 1em;margin:.8em 0}
.headline{font-size:1.05em;background:#eef4ff;padding:.6em 1em;border-left:4px solid #3366aa}
svg{display:block;margin:.4em 0}svg text{font-family:inherit}
"""


def esc(value) -> str:
    """Text for HTML/SVG, quotes included (safe in element content and attribute values)."""
    return html.escape("" if value is None else str(value), quote=True)


def _isnan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(value, fmt: str = "{:,.0f}") -> str:
    """A number for the page; '–' (n/a) for None/NaN."""
    return "n/a" if _isnan(value) else fmt.format(value)


def _nice_max(v: float) -> float:
    if not v > 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= v)


def _frame(title: str, ylabel: str, xlabel: str, ymax: float, yfmt: str, legend) -> list[str]:
    """The SVG's opening, title, y grid with ticks, axis labels and legend."""
    ph = H - TOP - BOTTOM
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}"><title>{esc(title)}</title>',
           f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="14" '
           f'font-weight="bold">{esc(title)}</text>']
    for k in range(6):
        v = ymax * k / 5
        y = TOP + ph - ph * k / 5
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#e6e6e6"/><text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" '
                   f'text-anchor="end">{esc(yfmt.format(v))}</text>')
    out.append(f'<text transform="translate(14,{TOP + ph / 2}) rotate(-90)" '
               f'text-anchor="middle" font-size="12">{esc(ylabel)}</text>')
    out.append(f'<text x="{LEFT + (W - LEFT - RIGHT) / 2}" y="{H - 6}" text-anchor="middle" '
               f'font-size="12">{esc(xlabel)}</text>')
    x = LEFT
    for name, colour, shape in legend:
        mark = (f'<rect x="{x}" y="{TOP - 12}" width="10" height="10" fill="{colour}"/>'
                if shape == "box" else
                f'<line x1="{x}" x2="{x + 10}" y1="{TOP - 7}" y2="{TOP - 7}" '
                f'stroke="{colour}" stroke-width="2"/>')
        out.append(mark + f'<text x="{x + 14}" y="{TOP - 3}" font-size="11">{esc(name)}</text>')
        x += 24 + 7 * len(str(name))
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{TOP + ph}" y2="{TOP + ph}" '
               f'stroke="#888"/>')
    return out


def _xlabels(categories, slot: float) -> list[str]:
    ph = H - TOP - BOTTOM
    step = max(1, math.ceil(len(categories) * 40 / (W - LEFT - RIGHT)))  # no overlapping labels
    longest = max((len(str(c)) for c in categories), default=0)
    tilt = longest * 6.5 > slot * step  # labels wider than their slot are drawn slanted
    out = []
    for i, c in enumerate(categories):
        if i % step:
            continue
        x, y = LEFT + slot * (i + 0.5), TOP + ph + 16
        place = (f'x="{x:.1f}" y="{y}" text-anchor="middle"' if not tilt else
                 f'transform="translate({x:.1f},{y - 4}) rotate(-30)" text-anchor="end"')
        out.append(f'<text {place} font-size="11">{esc(c)}</text>')
    return out


def bar_chart(title: str, categories, series, *, ylabel: str, xlabel: str,
              stacked: bool = False, yfmt: str = "{:,.0f}") -> str:
    """Grouped (or stacked) vertical bars. ``series``: (name, values) pairs; a NaN/None value
    is drawn as the text 'n/a' in its slot, never as a zero bar."""
    categories = list(categories)
    vals = [[None if _isnan(v) else float(v) for v in values] for _, values in series]
    tops = ([sum(v[i] or 0 for v in vals) for i in range(len(categories))] if stacked
            else [v or 0 for col in vals for v in col])
    ymax = _nice_max(max(tops, default=0))
    legend = [(name, COLOURS[k % len(COLOURS)], "box") for k, (name, _) in enumerate(series)]
    out = _frame(title, ylabel, xlabel, ymax, yfmt, legend)
    ph, slot = H - TOP - BOTTOM, (W - LEFT - RIGHT) / max(len(categories), 1)
    inner = slot * 0.8
    width = inner if stacked else inner / max(len(series), 1)
    for i, cat in enumerate(categories):
        x0, base = LEFT + slot * i + slot * 0.1, 0.0
        if all(v[i] is None for v in vals):
            out.append(f'<text x="{LEFT + slot * (i + 0.5):.1f}" y="{TOP + ph - 6}" '
                       f'font-size="11" fill="#b00" text-anchor="middle">n/a</text>')
            continue
        for k, v in enumerate(vals):
            h = ph * (v[i] or 0) / ymax
            x = x0 if stacked else x0 + k * width
            y = TOP + ph - h - (ph * base / ymax if stacked else 0)
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{h:.1f}" '
                       f'fill="{COLOURS[k % len(COLOURS)]}"><title>{esc(cat)} '
                       f'{esc(series[k][0])}: {esc(num(v[i], yfmt))}</title></rect>')
            base += v[i] or 0
    return "\n".join(out + _xlabels(categories, slot) + ["</svg>"])


def freshness_chart(series: pd.DataFrame) -> str:
    """Audit freshness with its interval per day, and the forecast the previous run made for
    that day (its expected freshness); days without data say so in place."""
    title = "Freshness: audit (with interval) against the planner's forecast"
    legend = [("audit (interval)", COLOURS[0], "line"), ("forecast: previous run's expected",
                                                         COLOURS[1], "line")]
    out = _frame(title, "freshness (share of pages current)", "run date (UTC)", 1.0, "{:.1f}",
                 legend)
    ph, slot = H - TOP - BOTTOM, (W - LEFT - RIGHT) / max(len(series), 1)

    def y(v):
        return TOP + ph - ph * min(max(v, 0.0), 1.0)

    pts = []
    for i, r in enumerate(series.itertuples(index=False)):
        x = LEFT + slot * (i + 0.5)
        if r.missing:
            out.append(f'<text x="{x:.1f}" y="{TOP + ph - 6}" font-size="11" fill="#b00" '
                       f'text-anchor="middle">missing</text>')
        elif _isnan(r.audit):
            out.append(f'<text x="{x:.1f}" y="{TOP + ph - 6}" font-size="10" fill="#b00" '
                       f'text-anchor="middle">no audit</text>')
        else:
            lo = r.audit if _isnan(r.audit_lo) else r.audit_lo
            hi = r.audit if _isnan(r.audit_hi) else r.audit_hi
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" '
                       f'stroke="{COLOURS[0]}" stroke-width="2"/>'
                       f'<circle cx="{x:.1f}" cy="{y(r.audit):.1f}" r="4" fill="{COLOURS[0]}">'
                       f'<title>{esc(r.dt)} audit {r.audit:.3f} [{lo:.3f}, {hi:.3f}], '
                       f'n = {esc(num(r.audit_n))}</title></circle>')
        if not _isnan(r.forecast):
            pts.append(f"{x:.1f},{y(r.forecast):.1f}")
            out.append(f'<rect x="{x - 3:.1f}" y="{y(r.forecast) - 3:.1f}" width="6" height="6" '
                       f'fill="{COLOURS[1]}"><title>{esc(r.dt)} forecast '
                       f'{r.forecast:.3f}</title></rect>')
    if len(pts) > 1:
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{COLOURS[1]}" '
                   f'stroke-width="1.5"/>')
    return "\n".join(out + _xlabels([str(d)[5:] for d in series["dt"]], slot) + ["</svg>"])


def xy_chart(title: str, x, y, *, marker_x=None, marker_label: str = "", xlabel: str,
             ylabel: str, yfmt: str = "{:.2f}", xfmt: str = "{:,.0f}", ymax=None) -> str:
    """A line through (x, y) points on numeric axes from 0, each point with its value as a
    tooltip, and a dashed vertical line at ``marker_x`` (labelled). NaN/None points are left
    out of the line and listed as 'n/a' under the title."""
    pts = [(float(a), float(b)) for a, b in zip(x, y) if not (_isnan(a) or _isnan(b))]
    empty = [a for a, b in zip(x, y) if not _isnan(a) and _isnan(b)]
    ytop = ymax if ymax is not None else _nice_max(max((b for _, b in pts), default=0.0))
    xs = [a for a, _ in pts] + ([float(marker_x)] if not _isnan(marker_x) else [])
    xtop = _nice_max(max(xs, default=0.0))
    out = _frame(title, ylabel, xlabel, ytop, yfmt, [(ylabel, COLOURS[0], "line")])
    ph, pw = H - TOP - BOTTOM, W - LEFT - RIGHT

    def px(v):
        return LEFT + pw * v / xtop

    def py(v):
        return TOP + ph - ph * min(max(v, 0.0), ytop) / ytop

    for k in range(6):  # x ticks
        v = xtop * k / 5
        out.append(f'<text x="{px(v):.1f}" y="{TOP + ph + 16}" font-size="11" '
                   f'text-anchor="middle">{esc(xfmt.format(v))}</text>')
    if not _isnan(marker_x):
        out.append(f'<line x1="{px(marker_x):.1f}" x2="{px(marker_x):.1f}" y1="{TOP}" '
                   f'y2="{TOP + ph}" stroke="{COLOURS[3]}" stroke-dasharray="4 3"/>'
                   f'<text x="{px(marker_x) + 4:.1f}" y="{TOP + 12}" font-size="11" '
                   f'fill="{COLOURS[3]}">{esc(marker_label)}</text>')
    if len(pts) > 1:
        line = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLOURS[0]}" '
                   f'stroke-width="2"/>')
    for a, b in pts:
        today = not _isnan(marker_x) and abs(a - float(marker_x)) <= 1e-9 * max(abs(a), 1.0)
        out.append(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="{5 if today else 3.5}" '
                   f'fill="{COLOURS[3] if today else COLOURS[0]}">'
                   f'<title>{esc(xfmt.format(a))}: {esc(yfmt.format(b))}</title></circle>')
    if empty:
        out.append(f'<text x="{W - RIGHT}" y="{TOP - 18}" font-size="10" fill="#b00" '
                   f'text-anchor="end">n/a at {esc(", ".join(xfmt.format(a) for a in empty))}'
                   f'</text>')
    return "\n".join(out + ["</svg>"])


def budget_section(doc: dict) -> list[str]:
    """The Budget section: the day's what-if curve (freshness and age, today's budget
    marked), the reading, and the multiplier and budget figures per day."""
    curve, series = doc["budget_curve"], doc["budget_series"]
    today = curve[curve["today"]]
    budget = today["budget"].iloc[0] if len(today) else None
    has_curve = bool(curve.loc[~curve["today"], "freshness"].notna().any())
    mark = f"today: {num(budget)}"
    parts = ["<h2>Budget</h2>",
             "<p>What the planner expects at other daily budgets (the same caps, side lanes "
             "and floors; the extra or missing visits priced at the level that spends them, "
             "found as today's), and the value of one more visit/day (the multiplier) per "
             "day.</p>"]
    reading = doc.get("budget_reading")
    parts.append(f'<p class="headline" id="budget-reading">{esc(reading)}.</p>' if reading else
                 '<p class="missing">No what-if curve for this day (a policy without a '
                 'budget level, or a row from before the curve).</p>')
    if has_curve:
        parts += [
            xy_chart("Expected freshness against the daily budget", curve["budget"],
                     curve["freshness"], marker_x=budget, marker_label=mark,
                     xlabel="daily budget (visits/day)", ylabel="expected freshness",
                     yfmt="{:.3f}", ymax=1.0),
            xy_chart("Expected age against the daily budget", curve["budget"],
                     curve["age_days"], marker_x=budget, marker_label=mark,
                     xlabel="daily budget (visits/day)", ylabel="expected age (days)"),
            table(curve.assign(today=curve["today"].map({True: "today", False: ""})),
                  {"factor": "{:.2f}", "budget": "{:,.0f}", "freshness": "{:.4f}",
                   "age_days": "{:.3f}"},
                  {"factor": "× budget", "age_days": "age (days)", "today": ""}),
        ]
    parts += [
        bar_chart("The day's multiplier: value of one more visit/day",
                  [str(x)[5:] for x in series["dt"]],
                  [("multiplier", series["multiplier"])], ylabel="importance-weighted freshness "
                  "per visit/day", xlabel="run date (UTC)", yfmt="{:.3g}"),
        table(series, {"multiplier": "{:.4g}", "expected_freshness": "{:.3f}",
                       "expected_age_days": "{:.2f}", "days_per_pass": "{:.2f}",
                       "budget_per_url": "{:.3f}", "share_304": "{:.1%}",
                       "bytes_saved_304": "{:,.0f}", "share_unchanged": "{:.1%}"},
              {"expected_freshness": "freshness", "expected_age_days": "age (days)",
               "days_per_pass": "days per full pass", "budget_per_url": "visits/URL/day",
               "share_304": "304 share", "bytes_saved_304": "bytes saved by 304s",
               "share_unchanged": "fetches found unchanged"}),
    ]
    return parts


def table(df: pd.DataFrame, formats: dict | None = None, headers: dict | None = None) -> str:
    """An HTML table of ``df``; every cell escaped; ``formats``: column -> format string."""
    formats, headers = formats or {}, headers or {}
    head = "".join(f"<th>{esc(headers.get(c, c))}</th>" for c in df.columns)
    rows = []
    for r in df.itertuples(index=False):
        cells = []
        for c, v in zip(df.columns, r):
            text = num(v, formats[c]) if c in formats else ("n/a" if _isnan(v) else v)
            cells.append(f"<td>{esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _missing_box(doc: dict) -> str:
    items = [f"<li>{esc(d)}: {esc(why)}</li>" for d, why in sorted(doc["missing"].items())]
    f = doc["freshness"]
    # consecutive days without a scored audit are one line (a rebuilt history has many)
    runs: list[list] = []
    for i, r in enumerate(f.itertuples(index=False)):
        if r.missing or not _isnan(r.audit):
            continue
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    for a, b in runs:
        days = (esc(f["dt"].iloc[a]) if a == b else
                f"{esc(f['dt'].iloc[a])} .. {esc(f['dt'].iloc[b])} ({b - a + 1} days)")
        n = ("" if a != b else f" (audit_n = {esc(num(f['audit_n'].iloc[a]))})")
        items.append(f"<li>{days}: no audit fetch scored{n}: no achieved freshness "
                     f"{'for this day' if a == b else 'for these days'}</li>")
    if not items:
        return ""
    return (f'<div class="missing" role="alert"><strong>Missing inputs</strong> '
            f'(these days are not in the figures):<ul>{"".join(items)}</ul></div>')


def _warnings_box(doc: dict) -> str:
    """The run records' input warnings (a stale or skipped importance / host_policy snapshot)."""
    items = [f"<li>{esc(w)}</li>" for w in doc.get("warnings") or []]
    if not items:
        return ""
    return (f'<div class="missing" role="alert"><strong>Input warnings</strong> '
            f'(the run used these inputs anyway):<ul>{"".join(items)}</ul></div>')


def _headline(doc: dict) -> str:
    m, fc = doc["metrics"], doc["forecast"]
    audit = m.get("audit_freshness")
    achieved = ("no audit scored" if _isnan(audit) else
                f"audit {audit:.3f} [{num(m.get('audit_freshness_lo'), '{:.3f}')}, "
                f"{num(m.get('audit_freshness_hi'), '{:.3f}')}]")
    match = ("no day with both an audit and a forecast" if not fc["days"] else
             f"forecast vs audit over {fc['days']} day(s): mean |error| "
             f"{fc['mean_abs_error']:.3f}, bias (audit − forecast) {fc['bias']:+.3f}, forecast "
             f"inside the audit interval on {fc['covered']} of {fc['days']}")
    return (f'<p class="headline">Policy <b>{esc(m.get("policy"))}</b>: '
            f'{esc(num(m.get("planned_total")))} visits planned of a budget of '
            f'{esc(num(m.get("budget")))} for {esc(num(m.get("urls_known")))} known URLs on '
            f'{esc(num(m.get("hosts")))} hosts. Expected freshness '
            f'{esc(num(m.get("expected_freshness"), "{:.3f}"))}; achieved: {esc(achieved)}. '
            f'{esc(match)}.</p>')


def _budget_text(lanes: pd.DataFrame, total) -> str:
    """The unused budget in words: the same figures as the chart's "unused" and "left to
    backfill" marks (lane ``backfill`` spends what the other lanes leave)."""
    if total is None:
        return '<p class="missing">allocate\'s run record has no budget cut.</p>'
    text = (f"Unused budget: {num(total['unused'])} of {num(total['budget'])} visits "
            f"(the chart's \u201cunused\u201d).")
    backfill = lanes[lanes["lane"] == "backfill"]
    if len(backfill):
        b = backfill.iloc[0]
        text += (f" The lanes left {num(total['to_backfill'])} visits of their budgets "
                 f"(\u201cleft to backfill\u201d); lane backfill (the next day's visits pulled "
                 f"forward, and push signals not worth a planned visit) planned "
                 f"{num(b['planned'])} of them, so {num(b['unused'])} stayed unused.")
    return f"<p>{esc(text)}</p>"


def _fast_text(note: dict | None) -> str:
    """Why the fast lane planned what it did (its share is a target, and with a budget-aware
    policy a floor: fast pages priced with refresh may take refresh budget)."""
    if not note or note.get("planned") is None:
        return ""
    share = ("n/a" if note.get("fast_share") is None else f"{note['fast_share']:g}")
    text = (f"Fast lane: {num(note['planned'])} visits planned of {num(note['candidates'])} "
            f"candidates. budget.fast_share = {share} sets its target "
            f"floor(fast_share \u00d7 budget) = {num(note['target'])} visits")
    if note.get("fast_floor"):
        text += (f". Policy {note.get('policy')} is budget-aware and lanes.fast_as_floor is on, "
                 f"so that share is a floor, not a cap: fast pages are also priced by the "
                 f"policy together with refresh (each gets max(fast rate, policy rate)), and the "
                 f"fast lane may spend the refresh budget too (its cut budget today: "
                 f"{num(note['cut_budget'])}); what it leaves flows to refresh.")
    else:
        text += (f", its cut budget today {num(note['cut_budget'])} (the fast rate "
                 f"{num(note.get('fast_rate'), '{:.3g}')}/day is all a fast page gets); what "
                 f"the lane leaves flows to refresh.")
    return f"<p>{esc(text)}</p>"


def _overrides_html(ov: dict | None, top: int) -> str:
    """The overrides allocate applied (its run record) and the rows in force now."""
    if not ov:
        return "<p>No override information for this run.</p>"
    rec = ov.get("record") or {}
    by = rec.get("by_action") or {}
    applied = ", ".join(f"{n} {a}" for a, n in sorted(by.items())) or "none"
    text = (f"The run applied {num(rec.get('in_force', 0))} override(s) from overrides/ "
            f"({applied}); {num(rec.get('quarantined', 0))} bad override row(s) quarantined. "
            f"A pin above its host's daily cap is capped (plan reason override_pin_capped): "
            f"politeness always wins.")
    lines = ov.get("lines") or []
    items = "".join(f"<li>{esc(x)}</li>" for x in lines[:top])
    more = f"<p>… and {len(lines) - top} more.</p>" if len(lines) > top else ""
    listing = (f"<p>In force in the table now:</p><ul>{items}</ul>{more}" if lines else
               "<p>No override in force in the table now.</p>")
    return f"<p>{esc(text)}</p>{listing}"


def render(doc: dict) -> str:
    """The page for :func:`jobs.report.build`'s ``doc``."""
    d = doc["run_date"]
    fr, lanes, flow = doc["freshness"], doc["lanes"], doc["flow"]
    per_lane = lanes[lanes["lane"] != "total"]
    cap, q, lam, stale = (doc["hosts_at_cap"], doc["quarantine"], doc["lambda"],
                          doc["stale_hosts"])
    total = lanes[lanes["lane"] == "total"].iloc[0] if len(lanes) else None
    parts = [
        f"<h1>recrawl daily report: run {esc(d)}</h1>",
        f"<p>Plans the 24 h from {esc(schedule_date(d))} 00:00 UTC; "
        f"figures over {len(doc['days'])} days ({esc(doc['days'][0])} to {esc(d)}).</p>",
        _headline(doc), _missing_box(doc), _warnings_box(doc),
        "<h2>Freshness: audit and forecast</h2>", freshness_chart(fr),
        table(fr.drop(columns=["missing"]).assign(missing=fr["missing"].fillna("")),
              {"audit": "{:.3f}", "audit_lo": "{:.3f}", "audit_hi": "{:.3f}",
               "audit_n": "{:,.0f}", "expected": "{:.3f}", "forecast": "{:.3f}"}),
        "<h2>Budget by lane</h2>",
        bar_chart("Budget by lane: planned and unused", per_lane["lane"],
                  [("planned", per_lane["planned"]), ("left to backfill", per_lane["to_backfill"]),
                   ("unused", per_lane["unused"])],
                  ylabel="visits / day", xlabel="lane", stacked=True),
        table(lanes, headers={"to_backfill": "left to backfill"}),
        _budget_text(lanes, total), _fast_text(doc.get("fast_lane")),
        *budget_section(doc),
        "<h2>Due, planned and carried over</h2>",
        bar_chart("Visits due, planned and carried over per run",
                  [str(x)[5:] for x in flow["dt"]],
                  [("due", flow["due"]), ("planned", flow["planned"]),
                   ("carried over", flow["carried_over"])],
                  ylabel="visits", xlabel="run date (UTC)"),
        table(flow, {"due": "{:,.0f}", "planned": "{:,.0f}", "carried_over": "{:,.0f}"}),
        "<h2>Hosts at their cap</h2>",
        f"<p>{len(cap)} of {doc['hosts_planned']} planned hosts are at their daily cap.</p>",
        (table(cap.head(doc["top"]), headers={"host_cap": "cap (visits/day)",
                                              "visits": "candidate visits"}) if len(cap) else "")
        + (f"<p>… and {len(cap) - doc['top']} more.</p>" if len(cap) > doc["top"] else ""),
        "<h2>Host health</h2>",
        "<p>Hosts under a served-rate limit below their politeness cap, or kept out of part of "
        "the next window by a Retry-After; the error rate (status 0, 5xx, 429) of each day's "
        "fetches; the visits/day the limits took from the hosts' caps, which the budget gives "
        "to healthy hosts.</p>",
        table(doc["health"], {"hosts_limited": "{:,.0f}", "hosts_blocked": "{:,.0f}",
                              "host_fetches": "{:,.0f}", "error_rate": "{:.2%}",
                              "host_throttled": "{:,.0f}", "capacity_withheld": "{:,.0f}"},
              headers={"host_throttled": "429/503", "capacity_withheld": "visits withheld"}),
        "<h2>Distribution of λ̂</h2>",
        bar_chart("Known pages by estimated change rate λ̂", lam["bin"],
                  [("pages", lam["pages"])], ylabel="pages", xlabel="λ̂ (changes/day)"),
        "<h2>Operator overrides</h2>", _overrides_html(doc.get("overrides"), doc["top"]),
        "<h2>Quarantined rows by reason</h2>",
        (table(q) if len(q) else f"<p>No input row was quarantined on {esc(d)}.</p>"),
        "<h2>Top stale important hosts</h2>",
        "<p>Stale importance: Σ importance × P(changed since the last confirmed copy: the last "
        "full fetch with a hash, or the last success where the host's 304s are trusted) at "
        "the start of the planned window (plan.p_stale_now).</p>",
        (table(stale, {"stale_weight": "{:,.2f}", "stale_share": "{:.1%}",
                       "importance": "{:,.2f}", "urls": "{:,.0f}"},
               {"stale_weight": "stale importance", "stale_share": "stale share",
                "urls": "pages"}) if len(stale) else
         f"<p>No known page with a positive importance in plan/dt={esc(d)}.</p>"),
    ]
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>recrawl daily report {esc(d)}</title><style>{STYLE}</style></head>'
            f'<body>{"".join(p for p in parts if p)}</body></html>\n')
