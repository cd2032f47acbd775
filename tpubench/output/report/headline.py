"""The report's first section, "At a glance": how many rows of each kind the report holds
(measured, published, estimated: DESIGN s24, never mixed without saying which), then per kind
(inference, training, images; one table each, never mixed) and per workload and purchase plan the
cheapest option with its 95% CI: the row the summary tables below mark 'cheapest'.

Picked once from the summaries data.py already built (no per-result work); markdown and HTML only
format the cells below.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import pandas as pd

from tpubench.output.report import images
from tpubench.output.report.format import (ci_cell, plan_label, platform_label, point_label, stack_label,
                                           train_point_label, validity_label, workload_label)


class Kind(NamedTuple):
    attribute: str                  # the ReportData summary it is picked from
    cost_column: str                # the cost its verdicts compare
    title: str
    measure: str                    # the cost's unit, as the header names it
    point: Callable[[object], str]  # how its tables name a point


KINDS = (Kind("summary", "blended_usd_per_mtok", "Inference", "blended $/Mtok", point_label),
         Kind("training", "train_usd_per_mtok", "Training", "$ per million training tokens", train_point_label),
         Kind("images", "image_usd_per_kimage", "Images", "$ per 1,000 images", images.point_label))
_BY_TITLE = {k.title: k for k in KINDS}

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


def pick(data) -> pd.DataFrame:
    """Every kind's cheapest option per workload and plan, with a `kind` column (a Kind's title)."""
    parts = [cheapest_per_plan(getattr(data, k.attribute, None)).assign(kind=k.title) for k in KINDS]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def tables(headline: pd.DataFrame) -> list[tuple[str, list[str], pd.DataFrame]]:
    """(title, headers, rows) per kind present, in KINDS order."""
    if headline is None or headline.empty:
        return []
    out = []
    for kind in KINDS:
        rows = headline[headline["kind"] == kind.title]
        if len(rows):
            out.append((f"{kind.title}: the cheapest option per plan",
                        ["Workload", "Plan", "Cheapest option", f"{kind.measure[:1].upper()}{kind.measure[1:]} (95% CI)", "Options compared",
                         "Point", "Validity"], rows))
    return out


def cells(row) -> list[str]:
    kind = _BY_TITLE[row["kind"]]
    others = f"{int(row['compared'])}" + (f" ({int(row['ties'])} within noise)" if row["ties"] else "")
    return [workload_label(row), plan_label(row["plan"]), f"{platform_label(row)} · {stack_label(row)}",
            ci_cell(row, kind.cost_column), others, kind.point(row), validity_label(row)]


def row_counts(data) -> str:
    """How many rows of each kind the report holds, in one sentence (the line above it breaks the
    measured ones down by status)."""
    published = data.published_rows
    return (f"Rows: {data.counts['results']} measured (your result files, {data.counts['priced']} priced); "
            f"{published} published (" + ("shipped with tpubench or imported; " if published else "")
            + "listed apart, never priced); 0 estimated (`tpubench estimate` makes estimates, which never "
            "enter this report).")
