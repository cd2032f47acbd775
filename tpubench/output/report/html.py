"""One self-contained HTML file: inline CSS, figures as base64 PNG, no scripts, no external URLs
(source URLs are printed as text, not links, so opening the file fetches nothing)."""

from __future__ import annotations

import base64
import html
import re

from tpubench.output.report import format as f
from tpubench.output.report import headline
from tpubench.output.report import kernel_speedups
from tpubench.output.report import profile as profile_section
from tpubench.output.report import published
from tpubench.output.report import published_list
from tpubench.output.report import tco as tco_section
from tpubench.output.report.data import ReportData, image_rows, result_rows

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
img{max-width:100%;height:auto;box-sizing:border-box;border:1px solid #eee}
.verdict-cheapest{font-weight:600;color:#0a7d32}.verdict-dearer{color:#8a1c1c}
@media (max-width:800px){body{margin:1rem auto;padding:0 .5rem}
th:first-child,td:first-child,.glance th:first-child,.glance td:first-child{min-width:7rem;max-width:10rem}}
"""
_NUMERIC_SUMMARY = {2, 4, 5, 6, 8, 9, 10, 11}
_NUMERIC_RUNS = {4, 5, 6, 7, 8}


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _table(headers, rows, numeric=frozenset(), row_classes=None, cell_classes=None, wrap=frozenset()) -> str:
    out = ['<div class="scroll"><table><thead><tr>', *(f"<th>{_e(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = row_classes[i] if row_classes else ""
        out.append(f'<tr class="{cls}">' if cls else "<tr>")
        for j, cell in enumerate(row):
            classes = []
            if j in numeric:
                classes.append("num")
            if j in wrap:
                classes.append("wrap")
            if cell_classes and cell_classes.get(j):
                classes.append(cell_classes[j](cell))
            attr = f' class="{" ".join(c for c in classes if c)}"' if classes else ""
            out.append(f"<td{attr}>{_e(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _figures(data: ReportData, make=None) -> str:
    from tpubench.output.report.figures import encode_figure, report_figures

    parts = []
    for fig_id, caption, fig, kind in (make or report_figures)(data):
        mime, blob = encode_figure(fig, kind)
        encoded = base64.b64encode(blob).decode("ascii")
        parts.append(f'<figure id="{_e(fig_id)}"><img class="figure" alt="{_e(caption)}" '
                     f'src="data:{mime};base64,{encoded}"><figcaption>{_e(caption)}</figcaption></figure>')
    return "".join(parts)


_NUMERIC_TRAINING = {2, 4, 6, 7, 8}
_NUMERIC_TRAINING_RUNS = {4, 5, 6, 8}


def _training(data: ReportData, max_rows: int, figures: bool) -> list[str]:
    """The training section: per workload, platform and plan, training tokens/s per chip against
    $ per million training tokens (table and figure), then every training run."""
    if not len(data.training):
        return []
    body = []
    for _, group in data.training.groupby(["workload", "scale"], sort=False, dropna=False):
        body.append(f"<h2>Training, {_e(f.workload_label(group.iloc[0]))}: $ per million training tokens "
                    "per platform and plan</h2>")
        body.append(_table(f.TRAINING_HEADERS, [f.training_cells(r) for _, r in group.iterrows()],
                           _NUMERIC_TRAINING, ["" if bool(v) else "invalid" for v in group["valid"]],
                           {5: lambda v: f"verdict-{v.split()[0]}" if v else "", 13: lambda v: "validity"}))
    body.append('<ul class="note">' + "".join(f"<li>{_e(n)}</li>" for n in f.TRAINING_NOTES) + "</ul>")
    if figures:
        from tpubench.output.report.figures import training_figures

        body.append("<h2>Training figures</h2>" + _figures(data, training_figures))
    runs = result_rows(data, training=True)
    shown = runs.head(max_rows)
    headers = [h.format(plan=f.plan_label(data.primary_plan or "")) for h in f.TRAINING_RUN_HEADERS]
    headers, cells = f.with_energy_column(runs, "train", headers, f.training_run_cells)
    body.append(f"<h2>Training runs ({len(runs)})</h2>")
    body.append(_table(headers, [cells(r) for _, r in shown.iterrows()], _NUMERIC_TRAINING_RUNS,
                       ["" if bool(v) else "invalid" for v in shown["valid"]], {10: lambda v: "validity"}))
    if len(runs) > max_rows:
        body.append(f'<p class="note">… {len(runs) - max_rows} more run(s): use --format csv for all rows.</p>')
    return body


def _images(data: ReportData) -> list[str]:
    """The diffusion section (report/images.py): $ per 1,000 images with seconds per image by stage
    per workload, platform and plan, then the Pareto front of images/s per chip against latency."""
    if not len(data.images):
        return []
    from tpubench.output.report import images

    placement = images.placements(data.results)
    body = []
    for _, group in data.images.groupby(["workload", "scale"], sort=False, dropna=False):
        body.append(f"<h2>Images, {_e(f.workload_label(group.iloc[0]))}: $ per 1,000 images per platform "
                    "and plan</h2>")
        body.append(_table(images.HEADERS, [images.cells(r, placement) for _, r in group.iterrows()],
                           images.NUMERIC, ["" if bool(v) else "invalid" for v in group["valid"]],
                           {5: lambda v: f"verdict-{v.split()[0]}" if v else "", 13: lambda v: "validity"}))
    front = images.pareto(image_rows(data.priced))
    if len(front):
        body.append("<h2>Images: Pareto front of images/s per chip against seconds per call</h2>")
        body.append(_table(images.PARETO_HEADERS, [images.pareto_cells(r) for _, r in front.iterrows()], {3, 4, 5}))
    body.append('<ul class="note">' + "".join(f"<li>{_e(n)}</li>" for n in images.NOTES) + "</ul>")
    return body


def _published(data: ReportData, figures: bool = True) -> list[str]:
    """Your points beside published ones (report/published.py); nothing when none were imported."""
    if not data.published_rows:
        return []
    body = ["<h2>Published results beside yours</h2>"]
    if data.published.empty:
        return body + [f'<p class="note">{_e(published.empty_note(data.published_rows))}</p>']
    rows = [published.cells(r) for _, r in data.published.iterrows()]
    body.append(_table(published.HEADERS, rows, published.NUMERIC,
                       cell_classes={11: lambda v: "verdict-cheapest" if v.startswith("agrees")
                                     else "verdict-dearer" if v.startswith("differs") else ""}))
    body.append(f'<p class="note">{_e(published.NOTE)}</p>')
    if figures:
        from tpubench.output.report.figures import published_figures

        body.append(_figures(data, published_figures))
    return body


def _published_list(data: ReportData, max_rows: int, figures: bool = True) -> list[str]:
    """Every published row, shipped and imported, apart from yours (report/published_list.py)."""
    rows = published_list.listing(data.published_list)
    if rows.empty:
        return []
    body = [f"<h2>Published results (not measured here): {len(rows)} row(s), "
            f"{_e(published_list.counts(rows))}</h2>"]
    if figures:
        body.append(_figures(data, published_list.figures))
    body.append(_table(published_list.HEADERS, [published_list.cells(r) for _, r in rows.head(max_rows).iterrows()],
                       published_list.NUMERIC, wrap=published_list.WRAP))
    if len(rows) > max_rows:
        body.append(f'<p class="note">… {len(rows) - max_rows} more published row(s).</p>')
    body.append(f'<p class="note">{_e(published_list.NOTE)}</p>')
    return body


_CODE = re.compile(r"`([^`]+)`")      # a command named in `backticks` (escaped text: no markup inside)


def _glance(data: ReportData) -> list[str]:
    """The first section (report/headline.py): what the report holds, and the cheapest option per plan."""
    counts = _CODE.sub(r"<code>\1</code>", _e(headline.row_counts(data)))
    body = ['<section class="glance" id="at-a-glance"><h2>At a glance</h2>', f"<p>{counts}</p>"]
    for title, headers, rows in headline.tables(data.headline):
        body.append(f"<h3>{_e(title)}</h3>")
        body.append(_table(headers, [headline.cells(r) for _, r in rows.iterrows()], headline.NUMERIC,
                           ["" if bool(v) else "invalid" for v in rows["valid"]], {6: lambda v: "validity"},
                           wrap=headline.WRAP))
    if len(data.headline):
        body.append(f'<p class="note">{_e(headline.NOTE)}</p>')
    return body + ["</section>"]


def render_html(data: ReportData, max_rows: int = 200, figures: bool = True) -> str:
    c = data.counts
    body = ["<h1>tpubench cost report</h1>",
            f"<p>Generated {_e(data.generated_at)} by tpubench {_e(data.tpubench_version)}. "
            f"{c['results']} result(s): {c['ok']} ok ({c['invalid']} invalid), {c['failed']} failed; "
            f"{c['priced']} priced, {c['unpriced']} not priced. Plans: "
            f"{_e(', '.join(f.plan_label(p) for p in data.plans) or 'none')}.</p>"]
    body += _glance(data)
    if data.warnings:
        body.append('<div class="warn"><strong>Warnings</strong><ul>'
                    + "".join(f"<li>{_e(w)}</li>" for w in data.warnings) + "</ul></div>")

    summary = data.summary
    if len(summary):
        for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
            rows = [f.summary_cells(r) for _, r in group.iterrows()]
            classes = ["" if bool(v) else "invalid" for v in group["valid"]]
            body.append(f"<h2>{_e(f.workload_label(group.iloc[0]))}: cheapest point per platform and plan</h2>")
            body.append(_table(f.SUMMARY_HEADERS, rows, _NUMERIC_SUMMARY, classes,
                               {7: lambda v: f"verdict-{v.split()[0]}", 15: lambda v: "validity"}))
        body.append('<ul class="note">' + "".join(f"<li>{_e(n)}</li>" for n in f.METHOD_NOTES) + "</ul>")
        for title, rows in tco_section.sections(data):     # with --tco: $/Mtok per TCO tier
            body.append(f"<h2>{_e(title)}</h2>" + (_table(tco_section.HEADERS, rows) if rows
                                                    else f"<p>{_e(tco_section.EMPTY)}</p>"))
        if data.tco is not None:
            body.append(f'<p class="note">{_e(tco_section.NOTE)}</p>')
    elif not len(data.training) and not len(data.images):
        body.append("<p>No result could be priced.</p>")

    drawn = _figures(data) if figures else ""
    if drawn:
        body.append("<h2>Figures</h2>" + drawn)

    runs = result_rows(data)
    if len(runs):
        shown = runs.head(max_rows)
        headers = [h.format(plan=f.plan_label(data.primary_plan or "")) for h in f.RUN_HEADERS]
        headers, cells = f.with_energy_column(runs, "blended", headers, f.run_cells)
        body.append(f"<h2>Runs ({len(runs)})</h2>")
        body.append(_table(headers, [cells(r) for _, r in shown.iterrows()], _NUMERIC_RUNS,
                           ["" if bool(v) else "invalid" for v in shown["valid"]],
                           {headers.index("Validity"): lambda v: "validity"}))
        if len(runs) > max_rows:
            body.append(f'<p class="note">… {len(runs) - max_rows} more run(s): use --format csv for all rows.</p>')

    body += _training(data, max_rows, figures)
    body += _images(data)
    body += kernel_speedups.html(data.kernel_speedups, _table, _e)
    body += profile_section.html(data.results, _table, _e)
    body += _published(data, figures)
    body += _published_list(data, max_rows, figures)

    if len(data.unpriced):
        grouped = (data.unpriced.assign(accelerator=data.unpriced["accelerator"].astype(str))
                   .groupby(["status", "accelerator", "reason"], dropna=False, sort=True)
                   .agg(runs=("file", "size"), example=("file", "first")).reset_index())
        body.append("<h2>Not priced</h2>")
        body.append(_table(["Status", "Accelerator", "Reason", "Runs", "Example file"],
                           [[r.status, r.accelerator, r.reason, r.runs, r.example] for r in grouped.itertuples()],
                           {3}, ["invalid" if r.status != "ok" else "" for r in grouped.itertuples()], wrap={2}))

    body.append("<h2>Price sources</h2>")
    body.append(_table(["Source", "As of", "Age (days)", "Instance rows"],
                       [[r.source, r.as_of, f"{r.age_days}" + (" (stale)" if r.stale else ""), r.instance_rows]
                        for r in data.price_sources.itertuples()], {2, 3}, wrap={0}))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>tpubench cost report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
