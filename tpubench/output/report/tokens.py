"""What the token unit (scenarios/token_unit.py) shows beyond the shared tables: its run-cost
table after `tpubench run` (input, output and blended $/Mtok, how they were split, a server's
cache share) and its report section (the cheapest point per platform and plan, TCO tiers,
figures, every run)."""

from __future__ import annotations

from tpubench import units
from tpubench.money.plans import plan_label
from tpubench.records.columns import records


def run_cost_table(console, priced, unit):
    """Per point and plan, its cheapest instance's $/Mtok (OutputUnit.run_cost_table)."""
    # Here, not at the top: rich's tables are for the terminal, not for the report this module also makes.
    from tpubench.output.run_cost import cost_table, priced_as, priced_label, usd, with_ci
    from tpubench.output.safe_text import escape

    best = priced.sort_values(unit.headline).drop_duplicates(["file", "plan"]).sort_values(["file", "plan"])
    # A server's share of input served from its prefix cache, beside its $/Mtok, where known.
    cached = "cached_input_share" in best and any(units.finite(v) for v in best["cached_input_share"])
    table = cost_table(f"cost per {unit.scale_words} {unit.plural} (cheapest instance per plan)",
                       ("point", "priced as", "plan", "$/Mtok input", "$/Mtok output", "in/out split",
                        "$/Mtok blended (95% CI)", *(("cached input",) if cached else ())))
    for _, r in best.iterrows():
        table.add_row(escape(priced_label(r)), priced_as(r), plan_label(str(r["plan"])), usd(r["input_usd_per_mtok"]),
                      usd(r["output_usd_per_mtok"]), escape(str(r.get("split_method") or "-")),
                      with_ci(r, unit.headline), *((units.share(r.get("cached_input_share"), "-"),) if cached else ()))
    console.print(table)
    return best.iloc[0]


# ----------------------------------------------------------------------------- report section

_NUMERIC_SUMMARY = {2, 4, 5, 6, 8, 9, 10, 11}
_NUMERIC_RUNS = {4, 5, 6, 7, 8}


def section(data, fmt: str, unit, max_rows: int = 200, figures: bool = True) -> list[str]:
    """The token unit's report section (OutputUnit.report_section): per workload the cheapest point
    per platform and plan, the method notes and TCO tiers, (HTML) the figures, then every run.
    Markdown lines, or HTML fragments with fmt "html"."""
    from tpubench.output.report import format as f
    from tpubench.output.report import tco as tco_section
    from tpubench.output.report.data import result_rows

    summary = data.summary_of(unit)
    if fmt == "md":
        from tpubench.output.report.markdown_parts import runs_section, table

        out = []
        if len(summary):
            for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
                out += [f"## {f.workload_label(group.iloc[0])}: cheapest point per platform and plan", ""]
                out.append(table(f.SUMMARY_HEADERS, [f.summary_cells(r) for r in records(group)]))
                out.append("")
            out += [f"- {note}" for note in f.METHOD_NOTES] + [""]
            out += tco_section.markdown(data, table)
        runs = result_rows(data, unit)
        if len(runs):
            out += runs_section(data, "Runs", runs, f.RUN_HEADERS, f.run_cells, max_rows)
        return out

    from tpubench.output.report.figures import report_figures
    from tpubench.output.report.html_parts import escape_html, html_figures, html_table

    # The figures first, though placed after the tables: the slowest part of a large page, made in a
    # child while the rest is written where the page allows it (html_parts.charts_on_page).
    drawn = html_figures(lambda: report_figures(data, unit), heading="<h2>Figures</h2>") if figures else ""
    runs = result_rows(data, unit)
    body = []
    if len(summary):
        for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
            rows = [f.summary_cells(r) for r in records(group)]
            classes = f.validity_classes(group)
            body.append(f"<h2>{escape_html(f.workload_label(group.iloc[0]))}: cheapest point per platform and plan</h2>")
            body.append(html_table(f.SUMMARY_HEADERS, rows, _NUMERIC_SUMMARY, classes,
                               {7: lambda v: f"verdict-{v.split()[0]}", 15: lambda v: "validity"}))
        body.append('<ul class="note">' + "".join(f"<li>{escape_html(n)}</li>" for n in f.METHOD_NOTES) + "</ul>")
        for title, rows in tco_section.sections(data):     # with --tco: $/Mtok per TCO tier
            body.append(f"<h2>{escape_html(title)}</h2>" + (html_table(tco_section.HEADERS, rows) if rows
                                                    else f"<p>{escape_html(tco_section.EMPTY)}</p>"))
        if data.tco is not None:
            body.append(f'<p class="note">{escape_html(tco_section.NOTE)}</p>')
    if drawn:
        body.append(drawn)
    if len(runs):
        shown = runs.head(max_rows)
        headers = [h.format(plan=f.plan_label(data.primary_plan or "")) for h in f.RUN_HEADERS]
        headers, cells = f.with_energy_column(runs, unit.carbon_figure, headers, f.run_cells)
        body.append(f"<h2>Runs ({len(runs)})</h2>")
        body.append(html_table(headers, [cells(r) for r in records(shown)], _NUMERIC_RUNS,
                           f.validity_classes(shown),
                           {headers.index("Validity"): lambda v: "validity"}))
        if len(runs) > max_rows:
            body.append(f'<p class="note">… {len(runs) - max_rows} more run(s): use --format csv for all rows.</p>')
    return body
