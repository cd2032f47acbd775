"""Markdown for terminals and pull requests: tables and notes, no figures (see the HTML report)."""

from __future__ import annotations

from tpubench.money.budget import SIZING_SPLIT
from tpubench.output.report import answer, headline, kernel_speedups, published, published_list
from tpubench.output.report import format as f
from tpubench.output.report import profile as profile_section
from tpubench.output.report.data import ReportData
from tpubench.output.report.markdown_parts import table
from tpubench.output.report.sections import section_of
from tpubench.records.columns import records
from tpubench.scenarios import registry


def _sources(data: ReportData) -> list[str]:
    out = ["## Price sources", ""]
    rows = [[r.source, r.as_of, str(r.age_days) + (" (stale)" if r.stale else ""), str(r.instance_rows)]
            for r in data.price_sources.itertuples()]
    out.append(table(["Source", "As of", "Age (days)", "Instance rows"], rows))
    return out


def _unpriced(data: ReportData) -> list[str]:
    if data.unpriced.empty:
        return []
    grouped = (data.unpriced.assign(accelerator=data.unpriced["accelerator"].astype(str))
               .groupby(["status", "accelerator", "reason"], dropna=False, sort=True)
               .agg(runs=("file", "size"), example=("file", "first")).reset_index())
    rows = [[r.status, r.accelerator, r.reason, str(r.runs), r.example] for r in grouped.itertuples()]
    return ["## Not priced", "", table(["Status", "Accelerator", "Reason", "Runs", "Example file"], rows), ""]


def _published(data: ReportData) -> list[str]:
    """Your points beside published ones (report/published.py); nothing when none were imported."""
    if not data.published_rows:
        return []
    out = ["## Published results beside yours", ""]
    if data.published.empty:
        return out + [published.empty_note(data.published_rows), ""]
    rows = [published.cells(r) for _, r in data.published.iterrows()]
    return out + [table(published.HEADERS, rows), "", f"- {published.NOTE}", ""]


def _published_list(data: ReportData, max_rows: int) -> list[str]:
    """Every published row, shipped and imported, apart from yours (report/published_list.py)."""
    rows = published_list.listing(data.published_list)
    if rows.empty:
        return []
    out = [f"## Published results (not measured here): {len(rows)} row(s), "
           f"{published_list.counts(rows)}", "",
           table(published_list.HEADERS, [published_list.cells(r) for r in records(rows.head(max_rows))])]
    if len(rows) > max_rows:
        out.append(f"\n… {len(rows) - max_rows} more published row(s).")
    return out + ["", f"- {published_list.NOTE}", ""]


def answer_markdown(data: ReportData) -> list[str]:
    """Per workload and plan the options priced side by side, and the verdict (report/answer.py)."""
    out, result = [], data.answer
    for workload, plan in result.groups():
        rows, v = result.of(workload, plan)
        out += [f"### {answer.title(workload, plan)}", "", table(answer.HEADERS, [answer.cells(r) for r in records(rows)]),
                ""] + [f"**{line}**" if i == 0 else line for i, line in enumerate(answer.verdict_lines(v))] + [""]
    if result.groups():
        out += [f"- {answer.NOTE}"] + [f"- {n}" for n in result.notes] + [""]
    return out


def _glance(data: ReportData) -> list[str]:
    """The first section: what the report holds; the answer (answer_markdown); the other units'
    cheapest option per plan (report/headline.py)."""
    out = ["## At a glance", "", headline.row_counts(data), ""] + answer_markdown(data)
    others = headline.tables_besides_answer(data.headline)
    for title, headers, rows in others:
        out += [f"### {title}", "", table(headers, [headline.cells(r) for r in records(rows)]), ""]
    if others:
        out += [f"- {headline.NOTE}", ""]
    return out


def render_markdown(data: ReportData, max_rows: int = 200) -> str:
    c = data.counts
    out = ["# tpubench cost report", "",
           f"Generated {data.generated_at} by tpubench {data.tpubench_version}. "
           f"{c['results']} result(s): {c['ok']} ok ({c['invalid']} invalid), {c['failed']} failed; "
           f"{c['priced']} priced, {c['unpriced']} not priced. Plans: "
           f"{', '.join(f.plan_label(p) for p in data.plans) or 'none'}.", ""]
    out += _glance(data)
    if data.warnings:
        out += ["**Warnings**", ""] + [f"- {w}" for w in data.warnings] + [""]
    if not any(len(data.summary_of(unit)) for unit in registry.units()):
        out += ["No result could be priced.", ""]
    for unit in registry.units():   # each unit's own section (OutputUnit.report_section)
        out += section_of(unit)(data, "md", unit, max_rows=max_rows)
    out += kernel_speedups.markdown(data.kernel_speedups, table)
    out += profile_section.markdown(data.results, table)
    out += _published(data)
    out += _published_list(data, max_rows)
    out += _unpriced(data)
    out += _sources(data)
    out += ["", "Figures (cost by platform, throughput vs interactivity, latency) are in `--format html`.", ""]
    return "\n".join(out)


def _slo_text(slo) -> str:
    parts = []
    if slo.ttft_p99_s:
        parts.append(f"TTFT p99 ≤ {f.ms(slo.ttft_p99_s)} ms")
    if slo.tpot_p99_s:
        parts.append(f"TPOT p99 ≤ {f.ms(slo.tpot_p99_s)} ms")
    return ", ".join(parts) or "none"


def render_budget_markdown(result, max_rows: int = 50) -> str:
    """A BudgetResult as markdown: traffic, SLOs, the ranked options, platforms that miss the SLOs."""
    t, s = result.traffic, result.slo
    split = result.sizing == SIZING_SPLIT
    basis = ("Sized on the input/output split: tokens/s/chip is for this traffic's input/output mix"
             if split else "Sized on blended tokens: tokens/s/chip is each point's at its own measured "
                           "input/output mix (--split sizes on this traffic's mix)")
    out = ["# tpubench budget", "",
           f"Traffic: {t.tokens_per_day:,.0f} tokens/day, {t.output_share:.0%} output, peak ×{t.peak_factor:g} "
           f"→ {t.peak_tokens_per_s:,.0f} tokens/s at peak. SLOs: {_slo_text(s)}. Month = 730 h. "
           f"{basis} (see tpubench.money.budget).", ""]
    notes = result.notes + f.flagged_price_notes(result.options)
    out += [f"- {n}" for n in notes] + ([""] if notes else [])
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
        out += ["## Options, cheapest first", "", table(headers, rows), ""]
    else:
        out += ["No priced platform has a valid point meeting the SLOs.", ""]
    from tpubench.output.report.budget_buying import buying_markdown, tco_markdown

    out += buying_markdown(result, table, max_rows) + tco_markdown(result, table, max_rows)
    if len(result.infeasible):
        rows = [[f"{r['priced_accelerator']} · {r['cloud']} {r['instance_type']} ({r['region']})",
                 f"{f.point_label(r)} ×{f.number(r['chips'])}"
                 + (f" ({f.stack_label(r)}, {f.kind_label(r)})" if f.kind_label(r) != "offline" else ""),
                 r["misses"]] for _, r in result.infeasible.iterrows()]
        out += ["## Platforms with no point meeting the SLOs (closest point)", "",
                table(["Platform", "Closest point", "Misses"], rows), ""]
    return "\n".join(out + budget_footer(result.unpriced, options))


def budget_footer(unpriced, options) -> list[str]:
    """What a budget could not price, and the sources of the prices it used."""
    out = []
    if len(unpriced):
        out += [f"{len(unpriced)} result(s) not priced; see `tpubench report` for reasons.", ""]
    if len(options):
        sources = options[["price_source", "price_as_of"]].drop_duplicates().sort_values("price_as_of")
        out += ["## Price sources", "", table(["Source", "As of"], sources.values.tolist()), ""]
    return out


def render_training_budget_markdown(result, max_rows: int = 50) -> str:
    """A budget.TrainingBudget as markdown: per platform and plan, dollars, hours and what to rent."""
    out = ["# tpubench training budget", "",
           f"Token budget: {result.train_tokens:,.0f} training tokens. Per platform and plan, the point with "
           "the most training tokens/s per rented chip; replicas of its world run data-parallel on the "
           "rented slice or instance, billed by the second (see tpubench.money.budget.plan_training).", ""]
    notes = result.notes + f.flagged_price_notes(result.options)
    out += [f"- {n}" for n in notes] + ([""] if notes else [])
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
