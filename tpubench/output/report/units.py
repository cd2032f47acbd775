"""The report section of a unit of output that names none of its own (OutputUnit.report_section
None): per workload, platform and plan its cheapest point by the unit's headline cost, with its
per-chip rate, its energy per unit where measured, the point and its validity. Everything in it
comes from the unit's declaration (scenarios/output_units.py), so a new scenario's unit is
reported with no change here (tests/demo_scenario/)."""

from __future__ import annotations

from tpubench.output.report import format as f
from tpubench.output.report.point_labels import point_label_of
from tpubench.units import finite, sig

_NUMERIC = {2, 4, 6, 7}


def headers(unit) -> list[str]:
    return ["Platform", "Plan", "$/chip-h", "Price as of", f"{unit.price_words} (95% CI)", "vs cheapest",
            f"{unit.throughput_words} (95% CI)", f"J per {unit.singular}", "Point", "Hardware", "Validity"]


def energy_cell(row, unit) -> str:
    """Joules per unit of the unit's carbon figure (its first figure when it declares none),
    marked when modelled; '–' without energy."""
    column = f"{unit.carbon_figure or unit.figures[0]}{unit.energy_suffix}"
    joules = row.get(column)
    if not finite(joules):
        return "–"
    return f"{sig(joules)} J" + (" (modelled)" if row.get("energy_method") == "modelled" else "")


def cells(row, unit) -> list[str]:
    return [f.platform_label(row), f.plan_label(row["plan"]), f.usd(row["usd_per_chip_hour"]), str(row["price_as_of"]),
            f.ci_cell(row, unit.headline), str(row.get("vs_cheapest", "")), f.ci_cell(row, unit.per_chip_columns()[0]),
            energy_cell(row, unit), point_label_of(unit)(row), f.hardware_label(row), f.validity_label(row)]


def section(data, fmt: str, unit, max_rows: int = 200, figures: bool = True) -> list[str]:
    """Markdown lines, or HTML fragments with fmt "html"; nothing when no row of `unit` was priced."""
    summary = data.summary_of(unit)
    if not len(summary):
        return []
    note = (f"{unit.price_words} = chip-seconds per {unit.singular} x price per chip-second x "
            f"{unit.price_scale:,.0f}; chip-seconds per {unit.singular} from the scenario's cost basis. "
            "CI from the chip-seconds' CI.")
    groups = list(summary.groupby(["workload", "scale"], sort=False, dropna=False))
    title = f"$ per {unit.scale_words} {unit.plural} per platform and plan"
    if fmt == "md":
        from tpubench.output.report.markdown_parts import table

        out = []
        for _, group in groups:
            out += [f"## {unit.title}, {f.workload_label(group.iloc[0])}: {title}", "",
                    table(headers(unit), [cells(r, unit) for _, r in group.head(max_rows).iterrows()]), ""]
        return out + [f"- {note}", ""]

    from tpubench.output.report.html_parts import escape_html, html_table

    body = []
    for _, group in groups:
        body.append(f"<h2>{escape_html(unit.title)}, {escape_html(f.workload_label(group.iloc[0]))}: {escape_html(title)}</h2>")
        body.append(html_table(headers(unit), [cells(r, unit) for _, r in group.head(max_rows).iterrows()], _NUMERIC,
                           f.validity_classes(group.head(max_rows)),
                           {5: lambda v: f"verdict-{v.split()[0]}" if v else "", 10: lambda v: "validity"}))
    body.append(f'<ul class="note"><li>{escape_html(note)}</li></ul>')
    return body
