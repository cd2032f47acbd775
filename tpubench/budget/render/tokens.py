"""The markdown of a token budget (budget/tokens.py, `tpubench budget serve|generate|tokens`): traffic
and SLOs, the ranked options, how to buy (budget/render/buying.py), and the platforms that miss the SLOs."""

from __future__ import annotations

import pandas as pd

from tpubench.budget.render.buying import buying_markdown, tco_markdown
from tpubench.budget.render.estimated import estimates_markdown
from tpubench.budget.render.footer import budget_footer, budget_notes
from tpubench.budget.tokens import SIZING_SPLIT
from tpubench.output.report import format as f
from tpubench.output.report.markdown_parts import table


def _slo_text(slo) -> str:
    parts = []
    if slo.ttft_p99_s:
        parts.append(f"TTFT p99 ≤ {f.ms(slo.ttft_p99_s)} ms")
    if slo.tpot_p99_s:
        parts.append(f"TPOT p99 ≤ {f.ms(slo.tpot_p99_s)} ms")
    return ", ".join(parts) or "none"


def render_budget_markdown(result, max_rows: int = 50) -> str:
    """A BudgetResult as markdown: traffic, SLOs, the ranked options, platforms that miss the SLOs, and
    the estimates apart (budget/render/estimated.py) where the budget has them."""
    t, s = result.traffic, result.slo
    estimated = result.estimates is not None
    split = result.sizing == SIZING_SPLIT
    basis = ("Sized on the input/output split: tokens/s/chip is for this traffic's input/output mix"
             if split else "Sized on blended tokens: tokens/s/chip is each point's at its own measured "
                           "input/output mix (--split sizes on this traffic's mix)")
    out = ["# tpubench budget", "",
           f"Traffic: {t.tokens_per_day:,.0f} tokens/day, {t.output_share:.0%} output, peak ×{t.peak_factor:g} "
           f"→ {t.peak_tokens_per_s:,.0f} tokens/s at peak. SLOs: {_slo_text(s)}"
           f"{' (the estimates: at their service level, below)' if estimated and _slo_text(s) == 'none' else ''}. "
           "Month = 730 h. "
           f"{basis} (see tpubench.budget.tokens).", ""]
    out += budget_notes(result)
    options = result.options
    if len(options):
        compare = "saving_vs_current_usd_per_month" in options
        energy = bool(options["monthly_kwh"].notna().any()) if "monthly_kwh" in options else False
        headers = ["Workload", "#", "Platform", "Plan", "Monthly", "Instances (chips)",
                   "Tokens/s/chip (split)" if split else "Tokens/s/chip (blended)",
                   "Point", "TTFT/TPOT p99 ms", "Hardware", "Software", "Price as of"]
        if energy:
            headers += ["Energy/month", "CO2e/month"]
        if compare:
            headers += [f"vs {result.current}"]
        rows = []
        for _, r in options.head(max_rows).iterrows():
            cells = [f.workload_label(r), str(r["rank_overall"]), f.platform_label(r), f.plan_label(r["plan"]),
                     f.with_ci(r["monthly_usd"], r["monthly_usd_ci95_low"], r["monthly_usd_ci95_high"], f.usd_whole),
                     f"{r['instances']} ({r['rented_chips']})",
                     f.sig(r["tokens_per_s_per_chip"]) + ("" if split else
                                                          f" at {f.share(r.get('point_output_share'))} output"),
                     f.point_label(r), f"{f.ms(r['ttft_p99_s'])} / {f.ms(r['tpot_p99_s'])}",
                     f.hardware_label(r), f.software_label(r), str(r["price_as_of"])]
            if energy:
                cells += [f.energy_month_label(r), f.carbon_month_label(r)]
            if compare:
                cells.append("current" if r.get("is_current") else
                             f"{f.usd_whole(r['saving_vs_current_usd_per_month'])}/month "
                             f"({f.pct(r['saving_vs_current_pct'])}, {r['vs_current']})")
            rows.append(cells)
        out += [f"## {'Measured options' if estimated else 'Options'}, cheapest first", "", table(headers, rows), ""]
    else:
        out += [f"No {'measured option: no ' if estimated else ''}priced platform has a valid point meeting the SLOs.",
                ""]
    out += buying_markdown(result, table, max_rows) + tco_markdown(result, table, max_rows)
    if len(result.infeasible):
        rows = [[f"{r['priced_accelerator']} · {r['cloud']} {r['instance_type']} ({r['region']})",
                 f"{f.point_label(r)} ×{f.number(r['chips'])}"
                 + (f" ({f.stack_label(r)}, {f.kind_label(r)})" if f.kind_label(r) != "offline" else ""),
                 r["misses"]] for _, r in result.infeasible.iterrows()]
        out += ["## Platforms with no point meeting the SLOs (closest point)", "",
                table(["Platform", "Closest point", "Misses"], rows), ""]
    out += estimates_markdown(result, table, max_rows)
    return "\n".join(out + budget_footer(result.unpriced, _priced(options, result.estimates)))


def _priced(options: pd.DataFrame, estimates) -> pd.DataFrame:
    """The price rows the budget's options rest on, the estimates' too (the footer's sources)."""
    frames = [d[["price_source", "price_as_of"]] for d in (options, estimates.options if estimates else options)
              if len(d)]
    return pd.concat(frames, ignore_index=True) if frames else options
