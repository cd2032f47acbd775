"""Markdown for terminals and pull requests: tables and notes, no figures (see the HTML report)."""

from __future__ import annotations

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
    """Per workload, the answer's block (report/answer.py's layout; numbers from output/answer)."""
    out, result = [], data.answer
    for workload in result.workloads():
        rows, verdicts = result.of(workload)
        out += [f"### {workload}: the answer", ""] + [w for line in answer.service_level_lines(result, workload)
                                                      for w in answer.wrapped(line)] + [""]
        split = result.disagreement(workload)
        if split:
            out += answer.wrapped(f"**{split}.**") + [""]
        notes: dict[str, int] = {}
        for v in verdicts.to_dict("records"):
            lines = answer.verdict_lines(v, notes)
            out += answer.wrapped(f"- **{lines[0]}**") + [w for line in lines[1:] for w in answer.wrapped(f"  {line}")]
        out += [""] + [w for line in answer.refresh_line(verdicts) for w in answer.wrapped(line)]
        out.append("")
        refs = answer.sources(rows)
        ranked = answer.ranked_options(rows)
        if len(ranked):
            out += [table(answer.POINT_HEADERS, [answer.point_cells(r, refs.get(r["reference"], 0))
                                                 for r in records(ranked)]), ""]
            fleet = workload in result.volumes
            priced = rows[rows["option"].isin(set(ranked["option"]))]
            out += [table(answer.PLAN_HEADERS + (answer.FLEET_HEADERS if fleet else []),
                          [answer.plan_cells(r, fleet) for r in records(priced)]), ""]
        reference = answer.reference_rows(rows)
        if len(reference):
            out += ["For reference (not ranked):", ""] + [w for r in records(reference)
                                                          for w in answer.wrapped(f"- {answer.reference_words(r)}")]
            out.append("")
        out += ["Sources:", ""] + [w for ref, n in refs.items() for w in answer.wrapped(f"[{n}] {ref}")] + [""]
        if notes:
            out += ["Prices not in the table:", ""] + [w for why, n in notes.items() for w in answer.wrapped(f"[n{n}] {why}")]
            out.append("")
    if result.workloads():
        out += answer.wrapped(f"- {answer.NOTE}") + [w for n in result.notes for w in answer.wrapped(f"- {n}")] + [""]
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


def render_markdown(data: ReportData, max_rows: int = 200, images=None, html_name: str | None = None) -> str:
    """The markdown report; its figures as the `images` written for it (report/chart_images.Image:
    `tpubench report --figures`), else a line pointing to the HTML report (`html_name`: its file)."""
    out = ["# tpubench cost report", "",
           f"Generated {data.generated_at} by tpubench {data.tpubench_version}. {headline.status_counts(data)} Plans: "
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
    return "\n".join(out + _figures(images, html_name))


def _figures(images, html_name: str | None) -> list[str]:
    """The figures section: each image with its caption, or where the figures are drawn."""
    if images:
        out = ["## Figures", ""]
        for image in images:
            out += [f"![{_alt(image.caption)}]({_link(image.path.as_posix())})", "", f"*{image.caption}*", ""]
        return out
    where = f"[{html_name}]({html_name}) (`--format html --out {html_name}`)" if html_name else "`--format html`"
    return ["", f"Figures (the answer's options, cost by platform, throughput vs interactivity, latency, published rows) "
                f"are drawn interactively in the HTML report: {where}; `--figures` writes them as images beside "
                "this file.", ""]


def _link(path: str) -> str:
    """A link target a space or a bracket in a folder's name does not cut (percent-encoded; the page's
    raw '<' is escaped, so no angle brackets)."""
    from urllib.parse import quote

    return quote(path)


def _alt(text: str) -> str:
    return text.replace("[", "(").replace("]", ")")
