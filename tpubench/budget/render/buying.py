"""The token budget's markdown sections for how to buy over a horizon (budget/purchase_mixes.py) and
for TCO tiers beside list prices (money/tco.py); render/tokens.py appends them when present,
passing its `table` (markdown table writer) in."""

from __future__ import annotations

from tpubench.output.report import format as f


def _vs_list(saving) -> str:
    if not f.finite(saving):
        return "–"
    return f"{f.usd_whole(saving)}/month less" if saving >= 0 else f"{f.usd_whole(-saving)}/month more"


def _break_evens(result, row) -> str:
    """'1-year commit 63% (base)' for each commitment priced on the row's platform."""
    c = result.commitments
    if c is None or c.empty:
        return "–"
    mine = c[(c["workload"] == row["workload"]) & (c["cloud"] == row["cloud"]) & (c["region"] == row["region"])
             & (c["instance_type"] == row["instance_type"])
             & ((c["scale"] == row["scale"]) | (c["scale"].isna() & (row["scale"] != row["scale"])))]
    parts = [f"{f.plan_label(r['plan'])} {f.share(r['break_even_utilisation'])}"
             + (f" ({r['bought_for']})" if r["bought_for"] else "") for _, r in mine.iterrows()]
    return "; ".join(parts) or "–"


def _layer(plan, instances) -> str:
    return "–" if plan is None or instances <= 0 else f"{int(instances)} × {f.plan_label(plan)}"


def buying_markdown(result, table, max_rows: int = 50) -> list[str]:
    """'How to buy' per platform: the mix, its monthly cost with CI, the saving, break-evens."""
    mixes = getattr(result, "mixes", None)
    if mixes is None:
        return []
    p = result.profile
    out = ["## How to buy, cheapest first", "",
           f"Over {f.number(result.months)} months. Base "
           f"{f.sig(p.base_tokens_per_s)} tokens/s all day; peak {f.sig(p.peak_tokens_per_s)} tokens/s "
           + (f"for {f.number(p.peak_hours)} h a day" if p.peak_hours is not None else "(flat load)")
           + ". Each layer on its cheapest plan over the horizon: the base (busy all day) never on spot, the "
             "extra peak instances on any plan (spot priced with its preemption overhead, a commitment paid "
             "for every hour of its whole terms); break-even = the utilisation above which a commitment "
             "beats on-demand over the horizon (see tpubench.budget.buying).", ""]
    if mixes.empty:
        return out + ["No platform to buy for.", ""]
    compare = "saving_vs_current_usd_per_month" in mixes
    headers = ["Workload", "#", "Platform", "Base", "Peak extra", "Monthly", "All on-demand at peak",
               "Break-even"] + ([f"vs {result.current}"] if compare else [])
    rows = []
    for _, r in mixes.head(max_rows).iterrows():
        cells = [f.workload_label(r), str(r["rank"]), f.platform_label(r),
                 _layer(r["base_plan"], r["base_instances"]),
                 _layer(r["peak_plan"], r["peak_instances"] - r["base_instances"]),
                 f.with_ci(r["monthly_usd"], r["monthly_usd_ci95_low"], r["monthly_usd_ci95_high"], f.usd_whole),
                 f.usd_whole(r["on_demand_monthly_usd"]), _break_evens(result, r)]
        if compare:
            cells.append("current" if r.get("is_current") else
                         f"{f.usd_whole(r['saving_vs_current_usd_per_month'])}/month "
                         f"({f.pct(r['saving_vs_current_pct'])}, {r['vs_current']})")
        rows.append(cells)
    return out + [table(headers, rows), ""]


def tco_markdown(result, table, max_rows: int = 50) -> list[str]:
    """Each platform's fleet at each TCO tier's rate beside its list on-demand cost."""
    tiers = getattr(result, "tco", None)
    if tiers is None:
        return []
    out = ["## TCO tiers beside list prices", "",
           "The same fleet per platform (rented chips) at each tier's rate from --tco; list = on-demand "
           "(see tpubench.money.tco).", ""]
    if tiers.empty:
        return out + ["No tier matches a platform of this budget.", ""]
    headers = ["Workload", "Platform", "Chips", "List on-demand", "Tier", "$/chip-h", "Monthly", "vs list",
               "Source (as of)"]
    rows = [[f.workload_label(r), f.platform_label(r), str(r["rented_chips"]), f.usd_whole(r["list_monthly_usd"]),
             r["tier"], f"{f.usd(r['tier_usd_per_chip_hour'])} ({r['tier_basis']})",
             f.with_ci(r["monthly_usd"], r["monthly_usd_ci95_low"], r["monthly_usd_ci95_high"], f.usd_whole)
             + (" incl. energy" if r["energy_in_monthly_usd"] else ""),
             _vs_list(r["saving_vs_list_usd_per_month"]), f"{r['tier_source']} ({r['tier_as_of']})"]
            for _, r in tiers.head(max_rows).iterrows()]
    return out + [table(headers, rows), ""]
