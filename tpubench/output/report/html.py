"""One self-contained HTML file: inline CSS, tables, and figures the browser draws from their data
with the charting scripts inlined in the page (report/chart_page.py); no external URL (source URLs
are printed as text, not links), so opening the file fetches nothing, and it works offline."""

from __future__ import annotations

import re

from tpubench.output.report import answer, headline, kernel_speedups, published, published_list
from tpubench.output.report import format as f
from tpubench.output.report import profile as profile_section
from tpubench.output.report.data import ReportData
from tpubench.output.report.html_parts import Page, charts_on_page, escape_html, html_figures, html_table
from tpubench.output.report.sections import section_of
from tpubench.records.columns import records
from tpubench.scenarios import registry

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1800px;
color:#1d232a;padding:0 1rem;line-height:1.4;overflow-wrap:break-word}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
.scroll{overflow-x:auto;max-width:100%;margin:.5rem 0}
table{border-collapse:separate;border-spacing:0;font-size:.8rem;width:100%;
border-top:1px solid #d8dde3;border-left:1px solid #d8dde3}
th,td{border-right:1px solid #d8dde3;border-bottom:1px solid #d8dde3;padding:.25rem .4rem;text-align:left;
vertical-align:top;white-space:nowrap;background:#fff}
th{background:#f2f4f7}
th:first-child,td:first-child{position:sticky;left:0;z-index:1;white-space:normal;overflow-wrap:anywhere;
min-width:18rem;max-width:24rem;box-shadow:inset -2px 0 0 #c4ccd4}
td.wrap{white-space:normal;min-width:30rem}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
tr.invalid td{background:#fff0f0}tr.invalid td.validity{color:#b00020;font-weight:600}
.warn{background:#fff8e1;border-left:4px solid #f0a500;padding:.5rem 1rem;margin:1rem 0}
.glance{background:#f5f9ff;border:1px solid #cfe0f5;padding:.25rem 1rem .5rem;margin:1rem 0}
.glance h2{margin-top:.5rem}.glance h3{font-size:1rem;margin:.75rem 0 .25rem}.glance td{white-space:normal}
.glance td.wrap,.glance th:first-child,.glance td:first-child{min-width:10rem}
.glance td.num,.glance td:nth-child(2){white-space:nowrap}
.note{color:#555;font-size:.85rem}figure{margin:1rem 0;max-width:100%}figcaption{font-size:.85rem;color:#444}
figure.chart{border:1px solid #eee;padding:.5rem}figure.chart .vis{width:100%;overflow-x:auto}
figure.chart .vega-embed{width:100%;display:flex}
.chart-filters{position:sticky;top:0;z-index:3;background:#fafbfc;border:1px solid #d8dde3;padding:.4rem .6rem;
margin:.5rem 0;font-size:.85rem}.chart-filters label{margin-right:.8rem;white-space:nowrap}
.chart-filters select{max-width:16rem}#vg-tooltip-element{font-size:.8rem}
.verdict-cheapest{font-weight:600;color:#0a7d32}.verdict-dearer{color:#8a1c1c}
tr.listed td{color:#5b6470}p.verdict{margin:.4rem 0 .2rem}
@media (max-width:800px){body{margin:1rem auto;padding:0 .5rem}
th:first-child,td:first-child,.glance th:first-child,.glance td:first-child{min-width:7rem;max-width:10rem}}
"""


def _published(data: ReportData, figures: bool = True) -> list[str]:
    """Your points beside published ones (report/published.py); nothing when none were imported."""
    if not data.published_rows:
        return []
    body = ["<h2>Published results beside yours</h2>"]
    if data.published.empty:
        return body + [f'<p class="note">{escape_html(published.empty_note(data.published_rows))}</p>']
    rows = [published.cells(r) for _, r in data.published.iterrows()]
    body.append(html_table(published.HEADERS, rows, published.NUMERIC,
                       cell_classes={11: lambda v: "verdict-cheapest" if v.startswith("agrees")
                                     else "verdict-dearer" if v.startswith("differs") else ""}))
    body.append(f'<p class="note">{escape_html(published.NOTE)}</p>')
    if figures:
        from tpubench.output.report.figures import published_figures

        body.append(html_figures(published_figures(data)))
    return body


def _published_list(data: ReportData, max_rows: int, figures: bool = True) -> list[str]:
    """Every published row, shipped and imported, apart from yours (report/published_list.py)."""
    rows = published_list.listing(data.published_list)
    if rows.empty:
        return []
    body = [f"<h2>Published results (not measured here): {len(rows)} row(s), "
            f"{escape_html(published_list.counts(rows))}</h2>"]
    if figures:
        body.append(html_figures(published_list.figures(data)))
    body.append(html_table(published_list.HEADERS, [published_list.cells(r) for r in records(rows.head(max_rows))],
                       published_list.NUMERIC, wrap=published_list.WRAP))
    if len(rows) > max_rows:
        body.append(f'<p class="note">… {len(rows) - max_rows} more published row(s).</p>')
    body.append(f'<p class="note">{escape_html(published_list.NOTE)}</p>')
    return body


_CODE = re.compile(r"`([^`]+)`")      # a command named in `backticks` (escaped text: no markup inside)


def _with_code(text: str) -> str:
    return _CODE.sub(r"<code>\1</code>", escape_html(text))


def _answer(data: ReportData, figures: bool) -> list[str]:
    """Per workload the answer's block (report/answer.py's layout), then the workload's figure."""
    from tpubench.output.report.figures import answer_figures

    result, body = data.answer, []
    drawings = answer_figures(data) if figures else {}
    for workload in result.workloads():
        rows, verdicts = result.of(workload)
        body.append(f"<h3>{escape_html(workload)}: the answer</h3>")
        body += [f"<p>{_with_code(line)}</p>" for line in answer.service_level_lines(result, workload)]
        split = result.disagreement(workload)
        if split:
            body.append(f'<p class="verdict"><strong>{_with_code(split)}.</strong></p>')
        items, notes = [], {}
        for v in verdicts.to_dict("records"):
            lines = answer.verdict_lines(v, notes)
            items.append(f"<li><strong>{_with_code(lines[0])}</strong>"
                         + "".join(f"<br>{_with_code(line)}" for line in lines[1:]) + "</li>")
        body.append(f'<ul class="verdicts">{"".join(items)}</ul>')
        body += [f"<p>{_with_code(line)}</p>" for line in answer.refresh_line(verdicts)]
        refs = answer.sources(rows)
        ranked = answer.ranked_options(rows)
        if len(ranked):
            body.append(html_table(answer.POINT_HEADERS, [answer.point_cells(r, refs.get(r["reference"], 0))
                                                          for r in records(ranked)], answer.POINT_NUMERIC))
            fleet = workload in result.volumes
            priced = rows[rows["option"].isin(set(ranked["option"]))]
            body.append(html_table(answer.PLAN_HEADERS + (answer.FLEET_HEADERS if fleet else []),
                                   [answer.plan_cells(r, fleet) for r in records(priced)], {2, 4, 5}))
        reference = answer.reference_rows(rows)
        if len(reference):
            body.append("<p>For reference (not ranked):</p><ul>" + "".join(
                f"<li>{_with_code(answer.reference_words(r))}</li>" for r in records(reference)) + "</ul>")
        body.append('<ol class="sources">' + "".join(f"<li>{escape_html(ref)}</li>" for ref in refs) + "</ol>")
        if notes:
            body.append("<p>Prices not in the table:</p><ul>" + "".join(
                f"<li>[n{n}] {escape_html(why)}</li>" for why, n in notes.items()) + "</ul>")
        if workload in drawings:
            body.append(html_figures([drawings[workload]]))
    if result.workloads():
        body.append(f'<p class="note">{escape_html(answer.NOTE)}</p>')
        body += [f'<p class="note">{escape_html(n)}</p>' for n in result.notes]
    return body


def _glance(data: ReportData, figures: bool = True) -> list[str]:
    """The first section: what the report holds; per workload and plan the options side by side with
    a verdict (report/answer.py); the other units' cheapest option per plan (report/headline.py)."""
    counts = _with_code(headline.row_counts(data))
    body = ['<section class="glance" id="at-a-glance"><h2>At a glance</h2>', f"<p>{counts}</p>"]
    body += _answer(data, figures)
    others = headline.tables_besides_answer(data.headline)
    for title, headers, rows in others:
        body.append(f"<h3>{escape_html(title)}</h3>")
        body.append(html_table(headers, [headline.cells(r) for r in records(rows)], headline.NUMERIC,
                           f.validity_classes(rows), {6: lambda v: "validity"},
                           wrap=headline.WRAP))
    if others:
        body.append(f'<p class="note">{escape_html(headline.NOTE)}</p>')
    return body + ["</section>"]


_FILTERS_HERE = "<!--chart-filters-->"     # where the page's figure filters go, once its charts are known
# From this many results a report draws its larger figures in a forked child while the rest of the
# page is written (html_parts.charts_on_page): ~0.15 s of a 10,000-result page, where a fork costs
# ~10 ms; fewer results draw in milliseconds.
AHEAD_MIN_RESULTS = 1000


def _page(body: list[str], page: Page) -> str:
    """The whole page; with charts, the filters over them (where the body marks) and the scripts that
    draw them (report/chart_page.py)."""
    text, values = page.resolve("".join(body))
    scripts = ""
    if values is not None:
        from tpubench.output.report.chart_page import filter_bar
        from tpubench.output.report.chart_page import scripts as chart_scripts

        text = text.replace(_FILTERS_HERE, filter_bar(values), 1)
        scripts = chart_scripts()
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>tpubench cost report</title>"
            f"<style>{_CSS}</style></head><body>{text.replace(_FILTERS_HERE, '')}{scripts}</body></html>")


def render_answer_html(data: ReportData, figures: bool = True) -> str:
    """Only the answer (`tpubench report --table answer --format html`)."""
    counts = _with_code(headline.row_counts(data))
    with charts_on_page() as page:
        body = ['<section class="glance" id="answer"><h2>The answer</h2>', f"<p>{counts}</p>", _FILTERS_HERE,
                *_answer(data, figures), "</section>"]
        return _page(body, page)


def render_html(data: ReportData, max_rows: int = 200, figures: bool = True) -> str:
    with charts_on_page(ahead=len(data.results) >= AHEAD_MIN_RESULTS) as page:
        body = _report_body(data, max_rows, figures)
        return _page(body, page)


def _report_body(data: ReportData, max_rows: int, figures: bool) -> list[str]:
    body = ["<h1>tpubench cost report</h1>",
            f"<p>Generated {escape_html(data.generated_at)} by tpubench {escape_html(data.tpubench_version)}. "
            f"{escape_html(headline.status_counts(data))} Plans: "
            f"{escape_html(', '.join(f.plan_label(p) for p in data.plans) or 'none')}.</p>", _FILTERS_HERE]
    # Each unit's own section (OutputUnit.report_section) made first, though placed after the glance:
    # its figures, drawn ahead in a child (render_html), then have the rest of the page beside them.
    sections = [part for unit in registry.units()
                for part in section_of(unit)(data, "html", unit, max_rows=max_rows, figures=figures)]
    body += _glance(data, figures)
    if data.warnings:
        body.append('<div class="warn"><strong>Warnings</strong><ul>'
                    + "".join(f"<li>{escape_html(w)}</li>" for w in data.warnings) + "</ul></div>")

    if not any(len(data.summary_of(unit)) for unit in registry.units()):
        body.append("<p>No result could be priced.</p>")
    body += sections
    body += kernel_speedups.html(data.kernel_speedups, html_table, escape_html)
    body += profile_section.html(data.results, html_table, escape_html)
    body += _published(data, figures)
    body += _published_list(data, max_rows, figures)

    if len(data.unpriced):
        grouped = (data.unpriced.assign(accelerator=data.unpriced["accelerator"].astype(str))
                   .groupby(["status", "accelerator", "reason"], dropna=False, sort=True)
                   .agg(runs=("file", "size"), example=("file", "first")).reset_index())
        body.append("<h2>Not priced</h2>")
        body.append(html_table(["Status", "Accelerator", "Reason", "Runs", "Example file"],
                           [[r.status, r.accelerator, r.reason, r.runs, r.example] for r in grouped.itertuples()],
                           {3}, ["invalid" if r.status != "ok" else "" for r in grouped.itertuples()], wrap={2}))

    body.append("<h2>Price sources</h2>")
    body.append(html_table(["Source", "As of", "Age (days)", "Instance rows"],
                       [[r.source, r.as_of, f"{r.age_days}" + (" (stale)" if r.stale else ""), r.instance_rows]
                        for r in data.price_sources.itertuples()], {2, 3}, wrap={0}))
    return body
