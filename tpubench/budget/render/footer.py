"""What every budget's markdown says besides its table: its notes (under the heading), what it could
not price and the sources of its prices (at the end)."""

from __future__ import annotations

from tpubench.money.pricing import stale_price_warnings
from tpubench.output.report import format as f
from tpubench.output.report.markdown_parts import table


def budget_notes(result, today=None) -> list[str]:
    """A budget's notes, the flagged prices among its options and the stale ones (money.price_age:
    spot after 30 days, other plans after 180), as a list, then a blank line."""
    notes = result.notes + f.flagged_price_notes(result.options) + stale_notes(result.options, today)
    return [f"- {n}" for n in notes] + ([""] if notes else [])


def stale_notes(options, today=None) -> list[str]:
    """One line per date of the prices a budget's options use that are older than their plan allows."""
    needed = {"plan", "price_as_of", "cloud", "region", "instance_type"}
    if not len(options) or not needed <= set(options.columns):
        return []
    used = options[sorted(needed)].drop_duplicates().rename(columns={"price_as_of": "as_of"})
    return stale_price_warnings(used, today)


def budget_footer(unpriced, options) -> list[str]:
    """What a budget could not price, and the sources of the prices it used."""
    out = []
    if len(unpriced):
        out += [f"{len(unpriced)} result(s) not priced; see `tpubench report` for reasons.", ""]
    if len(options):
        sources = options[["price_source", "price_as_of"]].drop_duplicates().sort_values("price_as_of")
        out += ["## Price sources", "", table(["Source", "As of"], sources.values.tolist()), ""]
    return out
