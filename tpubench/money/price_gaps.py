"""A plan the price table lacks for a chip, said in words and never dropped silently.

The shipped `tpubench/data/unpriced.csv` lists what has no public price (a chip, or one plan of
it: `plan` empty means every plan) with the reason and where to look; `missing_price` turns a
(chip, plan) with no price row into the sentence the answer and the budget show ("no 3-year
commitment price for Trainium2: ..."), and `plan_gaps` finds, per workload and plan, the chips a
verdict decides between on another plan that this plan cannot price. Pure functions over tables.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from tpubench.money import plans as plan_vocab

# Where a user adds a price the table lacks (the one page that says how).
ADD_A_PRICE = "add a row of your own with --prices (docs/extending/prices.md)"


def _records(notes: pd.DataFrame | list[dict] | None) -> list[dict]:
    """The unpriced table's rows as dicts (the table is a few dozen rows, asked once per chip and
    plan of a report, where pandas' filtering cost milliseconds a question); rows pass as they are."""
    if isinstance(notes, list):
        return notes
    if notes is None or notes.empty or "accelerator" not in notes:
        return []
    return notes.to_dict("records")


def _matching(notes: list[dict], accelerator: str, plan: str) -> list[dict]:
    """The unpriced rows of `accelerator` that cover `plan` (their own plan, or every plan), the
    plan's own rows first."""
    chip = str(accelerator).lower()
    mine = [r for r in notes if str(r["accelerator"]).lower() == chip]
    plan_of = [("" if pd.isna(r.get("plan")) else str(r.get("plan"))) for r in mine]
    base = plan_vocab.base_plan_name(plan)
    return ([r for r, p in zip(mine, plan_of) if p == base]
            + [r for r, p in zip(mine, plan_of) if p in ("", "nan")])


def missing_price(accelerator: str, plan: str, notes: pd.DataFrame | list[dict] | None) -> str:
    """'no 1-year commitment price for H100: <reason> (<source>, checked <date>)', or, where the
    unpriced table (a DataFrame, or its rows as dicts) says nothing of it, where the table stops and
    how to add one."""
    label = plan_vocab.plan_label(plan)
    hit = _matching(_records(notes), accelerator, plan)
    if not hit:
        return f"no {label} price for {accelerator} in the price table: {ADD_A_PRICE}"
    r = hit[0]
    where = ", ".join(x for x in (_text(r.get("source")), f"checked {r['as_of']}" if _text(r.get("as_of")) else "") if x)
    return f"no {label} price for {accelerator}: {r['reason']}" + (f" ({where})" if where else "")


def _text(value) -> str:
    return "" if value is None or pd.isna(value) else str(value)


def plan_gaps(options: pd.DataFrame, notes: pd.DataFrame | None) -> dict[tuple[str, str], list[str]]:
    """Per (workload, plan) of `options` (columns workload, plan, accelerator, in_verdict), one
    `missing_price` line for each chip that takes part in the verdict on another plan of that
    workload but has no option in the verdict on this one."""
    if options is None or options.empty:
        return {}
    ranked = options[options["in_verdict"].astype(bool)]
    notes = _records(notes)
    out: dict[tuple[str, str], list[str]] = {}
    for workload, rows in options.groupby("workload", sort=False):
        contenders = list(dict.fromkeys(ranked.loc[ranked["workload"] == workload, "accelerator"].astype(str)))
        for plan in dict.fromkeys(rows["plan"]):
            here = set(ranked.loc[(ranked["workload"] == workload) & (ranked["plan"] == plan), "accelerator"].astype(str))
            lines = [missing_price(chip, plan, notes) for chip in contenders if chip not in here]
            if lines:
                out[(workload, plan)] = lines
    return out


def gap_words(lines: Iterable[str]) -> str | None:
    """The line beside a verdict naming what its plan cannot price, or None."""
    lines = list(lines)
    return ("Not in this verdict: " + "; ".join(lines)) if lines else None


__all__ = ["ADD_A_PRICE", "gap_words", "missing_price", "plan_gaps"]
