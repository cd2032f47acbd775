"""The markdown of a training budget (budget/training.py, `tpubench budget train`): per platform and plan,
dollars, hours and what to rent."""

from __future__ import annotations

from tpubench.budget.render.footer import budget_footer, budget_notes
from tpubench.output.report import format as f
from tpubench.output.report.markdown_parts import table


def render_training_budget_markdown(result, max_rows: int = 50) -> str:
    """A budget.TrainingBudget as markdown: per platform and plan, dollars, hours and what to rent."""
    out = ["# tpubench training budget", "",
           f"Token budget: {result.train_tokens:,.0f} training tokens. Per platform and plan, the point with "
           "the most training tokens/s per rented chip; replicas of its world run data-parallel on the "
           "rented slice or instance, billed by the second (see tpubench.budget.training.plan_training).", ""]
    out += budget_notes(result)
    options = result.options
    if len(options):
        headers = ["Workload", "#", "Platform", "Plan", "Dollars", "Hours", "Rent", "Training tok/s/chip",
                   "$/M training tokens", "MFU", "Point", "Hardware", "Software", "Price as of"]
        rows = []
        for _, r in options.head(max_rows).iterrows():
            rows.append([f.workload_label(r), str(r["rank_overall"]), f.platform_label(r), f.plan_label(r["plan"]),
                         f.with_ci(r["usd"], r["usd_ci95_low"], r["usd_ci95_high"], f.usd),
                         f.with_ci(r["hours"], r["hours_ci95_low"], r["hours_ci95_high"]),
                         f.rent_label(r), f.ci_cell(r, "train_tokens_per_s_per_chip"),
                         f.ci_cell(r, "train_usd_per_mtok"), f.share(r["mfu"]), f.train_point_label(r),
                         f.hardware_label(r), f.software_label(r), str(r["price_as_of"])])
        out += ["## Options, cheapest first", "", table(headers, rows), ""]
    else:
        out += ["No priced platform has a valid training point.", ""]
    return "\n".join(out + budget_footer(result.unpriced, options))
