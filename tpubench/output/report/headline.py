"""The report's first section, "At a glance": how many rows of each kind the report holds
(measured, published, estimated: DESIGN s24, never mixed without saying which), then per unit of
output (registry.units(): inference tokens, training tokens, images...; one table each, never
mixed, each titled, costed and labelled as its unit declares) and per workload and purchase plan
the cheapest option with its 95% CI: the row the summary tables below mark 'cheapest'.

Picked once from the summaries data.py already built (no per-result work); markdown and HTML only
format the cells below.
"""

from __future__ import annotations

import pandas as pd

from tpubench.output.answer.options import ESTIMATE, PUBLISHED
from tpubench.output.report.format import ci_cell, plan_label, platform_label, stack_label, validity_label, workload_label
from tpubench.output.report.point_labels import point_label_of
from tpubench.scenarios import registry

NUMERIC = {3}
WRAP = {2, 5, 6}      # long text the HTML table may break over lines
NOTE = ("The cheapest option of each plan among the options (platform and stack) priced in that plan; "
        "'within noise' counts the others whose cost differs from it by less than the noise (their "
        "'vs cheapest' verdict in the tables below): they may be as cheap.")


def cheapest_per_plan(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of `summary` (data.summarise's output) marked 'cheapest', one per workload, scale
    and plan, with `compared` (options priced in that plan) and `ties` (of those, how many are a
    tie within noise)."""
    if summary is None or summary.empty or "vs_cheapest" not in summary:
        return pd.DataFrame()
    verdict = summary["vs_cheapest"].astype(str)
    # As strings: a missing scale is a group of its own, not a key that matches nothing.
    group = summary["workload"].map(str) + "\x1f" + summary["scale"].map(str) + "\x1f" + summary["plan"].map(str)
    compared = group.map(group.value_counts())
    ties = group.map(group[verdict.str.startswith("tie")].value_counts()).fillna(0)
    best = summary.assign(compared=compared.astype(int), ties=ties.astype(int))[verdict == "cheapest"]
    return best.reset_index(drop=True)


def _units_by_title() -> dict:
    return {unit.title: unit for unit in registry.units()}


def pick(data) -> pd.DataFrame:
    """Every unit's cheapest option per workload and plan, with a `kind` column (the unit's title)."""
    parts = [cheapest_per_plan(data.summary_of(unit)).assign(kind=unit.title) for unit in registry.units()]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def tables(headline: pd.DataFrame, units=None) -> list[tuple[str, list[str], pd.DataFrame]]:
    """(title, headers, rows) per unit present (of `units`, every registered one by default), in
    registry order."""
    if headline is None or headline.empty:
        return []
    out = []
    for unit in registry.units() if units is None else units:
        rows = headline[headline["kind"] == unit.title]
        if len(rows):
            measure = unit.headline_words
            out.append((f"{unit.title}: the cheapest option per plan",
                        ["Workload", "Plan", "Cheapest option", f"{measure[:1].upper()}{measure[1:]} (95% CI)",
                         "Options compared", "Point", "Validity"], rows))
    return out


def cells(row) -> list[str]:
    unit = _units_by_title()[row["kind"]]
    others = f"{int(row['compared'])}" + (f" ({int(row['ties'])} within noise)" if row["ties"] else "")
    return [workload_label(row), plan_label(row["plan"]), f"{platform_label(row)} · {stack_label(row)}",
            ci_cell(row, unit.headline), others, point_label_of(unit)(row), validity_label(row)]


def status_counts(data) -> str:
    """The report's first sentence about its result files: how many ran, how many are invalid
    (priced for reference only, never ranked: records/usable.py) or noisy (used, marked)."""
    c = data.counts
    return (f"{c['results']} result(s): {c['ok']} ok ({c['invalid']} invalid: reference only, never ranked; "
            f"{c['noisy']} noisy: used, marked), {c['failed']} failed; {c['priced']} priced, "
            f"{c['unpriced']} not priced.")


def row_counts(data) -> str:
    """How many rows of each kind the report holds, in one sentence (the line above it breaks the
    measured ones down by status)."""
    published = data.published_rows
    options = data.answer.options
    estimated = int((options["source"] == ESTIMATE).sum()) if len(options) else 0
    beside = int((options["source"] == PUBLISHED).sum()) if len(options) else 0
    return (f"Rows: {data.counts['results']} measured (your result files, {data.counts['priced']} priced); "
            f"{published} published (shipped with tpubench or imported; {beside} priced beside yours in the options "
            f"below, all listed apart); {estimated} estimated (" + (
                "for the chips each workload is decided between: its `compare_on`, or `--on`; labelled, never "
                "measurements)." if estimated else
                "name the chips a workload is decided between with `compare_on` in it, `tpubench report --on`, "
                "or `tpubench estimate --out`)."))


def tables_besides_answer(headline: pd.DataFrame) -> list[tuple[str, list[str], pd.DataFrame]]:
    """The per-unit 'cheapest option' tables of the units the answer table does not cover (the
    answer holds the first unit's, inference tokens)."""
    return tables(headline, registry.units()[1:])
