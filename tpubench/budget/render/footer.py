"""What every budget's markdown says besides its table: its notes (under the heading), what it could
not price and the sources of its prices (at the end)."""

from __future__ import annotations

from tpubench.output.report import format as f
from tpubench.output.report.markdown_parts import table


def budget_notes(result) -> list[str]:
    """A budget's notes and the flagged prices among its options, as a list, then a blank line."""
    notes = result.notes + f.flagged_price_notes(result.options)
    return [f"- {n}" for n in notes] + ([""] if notes else [])


def budget_footer(unpriced, options) -> list[str]:
    """What a budget could not price, and the sources of the prices it used."""
    out = []
    if len(unpriced):
        out += [f"{len(unpriced)} result(s) not priced; see `tpubench report` for reasons.", ""]
    if len(options):
        sources = options[["price_source", "price_as_of"]].drop_duplicates().sort_values("price_as_of")
        out += ["## Price sources", "", table(["Source", "As of"], sources.values.tolist()), ""]
    return out
