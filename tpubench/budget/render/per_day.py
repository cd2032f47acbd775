"""The markdown of a per-day budget of any unit (budget/per_day.py, `tpubench budget audio-seconds` for
a unit "audio seconds"): per platform and plan the fleet, its monthly cost with CI, and the point it
is sized on, in the unit's own words."""

from __future__ import annotations

from tpubench.budget.render.footer import budget_footer, budget_notes
from tpubench.output.report import format as f
from tpubench.output.report.markdown_parts import table
from tpubench.scenarios.registry import row_label


def unit_budget_markdown(result, max_rows: int = 50) -> str:
    unit = result.unit
    out = [f"# tpubench budget: {unit.plural}", "",
           f"Traffic: {result.per_day:,.0f} {unit.plural}/day, peak ×{result.peak_factor:g} → "
           f"{result.peak_per_s:,.3g} {unit.plural}/s at peak. Month = 730 h. Per platform and plan, the valid "
           f"point with the most {unit.plural}/s per chip (see tpubench.budget.per_day).", ""]
    out += budget_notes(result)
    options = result.options
    if len(options):
        rate = f"{unit.throughput}_per_chip"
        energy = bool(options["monthly_kwh"].notna().any())
        headers = ["Workload", "#", "Platform", "Plan", "Monthly", "Instances (chips)",
                   f"{unit.plural.capitalize()}/s/chip", unit.price_words, "Point", "Hardware", "Price as of"]
        headers += ["Energy/month", "CO2e/month"] if energy else []
        rows = []
        for _, r in options.head(max_rows).iterrows():
            cells = [f.workload_label(r), str(r["rank_overall"]), f.platform_label(r), f.plan_label(r["plan"]),
                     f.with_ci(r["monthly_usd"], r["monthly_usd_ci95_low"], r["monthly_usd_ci95_high"], f.usd_whole),
                     f"{r['instances']} ({r['rented_chips']})", f.ci_cell(r, rate), f.ci_cell(r, unit.headline),
                     row_label(r), f.hardware_label(r), str(r["price_as_of"])]
            if energy:
                cells += [f.energy_month_label(r), f.carbon_month_label(r)]
            rows.append(cells)
        out += ["## Options, cheapest first", "", table(headers, rows), ""]
    else:
        out += [f"No priced platform has a valid point in {unit.plural}.", ""]
    return "\n".join(out + budget_footer(result.unpriced, options))
