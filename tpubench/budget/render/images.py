"""The markdown of an image budget (budget/images.py, `tpubench budget images`): per platform and plan
the fleet, its monthly cost with CI, and the point it is sized on; platforms with no point within
the latency limit, with the closest one."""

from __future__ import annotations

from tpubench.budget.render.footer import budget_footer as footer
from tpubench.budget.render.footer import budget_notes
from tpubench.output.report import format as f
from tpubench.output.report.images import joules_cell, point_label
from tpubench.output.report.markdown_parts import table


def image_budget_markdown(result, max_rows: int = 50) -> str:
    t = result.traffic
    limit = f"p99 seconds per call ≤ {t.max_image_latency_s:g} s" if t.max_image_latency_s is not None else "none"
    out = ["# tpubench budget: images", "",
           f"Traffic: {t.images_per_day:,.0f} images/day, peak ×{t.peak_factor:g} → {t.peak_images_per_s:,.3g} "
           f"images/s at peak. Latency limit: {limit} (an image of a call of B images arrives with the whole "
           "call). Month = 730 h. Per platform and plan, the qualifying point with the most images/s "
           "per chip (see tpubench.budget.images).", ""]
    out += budget_notes(result)
    options = result.options
    if len(options):
        energy = bool(options["monthly_kwh"].notna().any())
        headers = ["Workload", "#", "Platform", "Plan", "Monthly", "Instances (chips)", "Images/s/chip",
                   "s/image p50", "s/call p99", "$/1k images", "J/image", "Point", "Hardware", "Price as of"]
        headers += ["Energy/month", "CO2e/month"] if energy else []
        rows = []
        for _, r in options.head(max_rows).iterrows():
            cells = [f.workload_label(r), str(r["rank_overall"]), f.platform_label(r), f.plan_label(r["plan"]),
                     f.with_ci(r["monthly_usd"], r["monthly_usd_ci95_low"], r["monthly_usd_ci95_high"], f.usd_whole),
                     f"{r['instances']} ({r['rented_chips']})", f.ci_cell(r, "images_per_s_per_chip"),
                     f.sig(r['image_p50_s']), f.sig(r['call_p99_s']), f.ci_cell(r, "image_usd_per_kimage"),
                     joules_cell(r), point_label(r), f.hardware_label(r), str(r["price_as_of"])]
            if energy:
                cells += [f.energy_month_label(r), f.carbon_month_label(r)]
            rows.append(cells)
        out += ["## Options, cheapest first", "", table(headers, rows), ""]
    else:
        out += ["No priced platform has a valid image point within the latency limit.", ""]
    if len(result.infeasible):
        rows = [[f"{r['priced_accelerator']} · {r['cloud']} {r['instance_type']} ({r['region']})",
                 f"{point_label(r)} ×{f.number(r['chips'])}", r["misses"]] for _, r in result.infeasible.iterrows()]
        out += ["## Platforms with no point within the latency limit (closest point)", "",
                table(["Platform", "Closest point", "Misses"], rows), ""]
    return "\n".join(out + footer(result.unpriced, options))
