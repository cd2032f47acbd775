"""What closes every budget's markdown: what it could not price, and the sources of its prices."""

from __future__ import annotations

from tpubench.output.report.markdown_parts import table


def budget_footer(unpriced, options) -> list[str]:
    """What a budget could not price, and the sources of the prices it used."""
    out = []
    if len(unpriced):
        out += [f"{len(unpriced)} result(s) not priced; see `tpubench report` for reasons.", ""]
    if len(options):
        sources = options[["price_source", "price_as_of"]].drop_duplicates().sort_values("price_as_of")
        out += ["## Price sources", "", table(["Source", "As of"], sources.values.tolist()), ""]
    return out
