"""The reports' training section (rows priced per training token, scenarios/train/unit.py): per
workload, platform and plan training tokens/s per chip against $ per million training tokens
(table, and in HTML a figure), then every training run. Named by the unit's `report_section`."""

from __future__ import annotations

from tpubench.output.report import format as f
from tpubench.output.report.data import result_rows

_NUMERIC_TRAINING = {2, 4, 6, 7, 8}
_NUMERIC_TRAINING_RUNS = {4, 5, 6, 8}


def section(data, fmt: str, unit, max_rows: int = 200, figures: bool = True) -> list[str]:
    """Markdown lines, or HTML fragments with fmt "html"; nothing when no training row was priced."""
    summary = data.summary_of(unit)
    if not len(summary):
        return []
    runs = result_rows(data, unit)
    if fmt == "md":
        from tpubench.output.report.markdown_parts import runs_section, table

        out = []
        for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
            out += [f"## Training, {f.workload_label(group.iloc[0])}: $ per million training tokens per platform "
                    "and plan", ""]
            out.append(table(f.TRAINING_HEADERS, [f.training_cells(r) for _, r in group.iterrows()]))
            out.append("")
        out += [f"- {note}" for note in f.TRAINING_NOTES] + [""]
        return out + runs_section(data, "Training runs", runs, f.TRAINING_RUN_HEADERS, f.training_run_cells,
                                  max_rows, energy_figure=unit.carbon_figure)

    from tpubench.output.report.html_parts import escape_html, html_figures, html_table

    body = []
    for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
        body.append(f"<h2>Training, {escape_html(f.workload_label(group.iloc[0]))}: $ per million training tokens "
                    "per platform and plan</h2>")
        body.append(html_table(f.TRAINING_HEADERS, [f.training_cells(r) for _, r in group.iterrows()],
                           _NUMERIC_TRAINING, f.validity_classes(group),
                           {5: lambda v: f"verdict-{v.split()[0]}" if v else "", 13: lambda v: "validity"}))
    body.append('<ul class="note">' + "".join(f"<li>{escape_html(n)}</li>" for n in f.TRAINING_NOTES) + "</ul>")
    if figures:
        from tpubench.output.report.figures import training_figures

        body.append("<h2>Training figures</h2>" + html_figures(training_figures(summary)))
    shown = runs.head(max_rows)
    headers = [h.format(plan=f.plan_label(data.primary_plan or "")) for h in f.TRAINING_RUN_HEADERS]
    headers, cells = f.with_energy_column(runs, unit.carbon_figure, headers, f.training_run_cells)
    body.append(f"<h2>Training runs ({len(runs)})</h2>")
    body.append(html_table(headers, [cells(r) for _, r in shown.iterrows()], _NUMERIC_TRAINING_RUNS,
                       f.validity_classes(shown), {10: lambda v: "validity"}))
    if len(runs) > max_rows:
        body.append(f'<p class="note">… {len(runs) - max_rows} more run(s): use --format csv for all rows.</p>')
    return body
