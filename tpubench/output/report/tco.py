"""The cost report's section of TCO tiers beside list prices (`tpubench report --tco FILE`): each
platform's cheapest on-demand point at each tier's rate (money/tco.tier_usd_per_mtok computed the
figures; this only lays them out)."""

from __future__ import annotations

from tpubench.output.report import format as f

HEADERS = ["Platform", "Stack", "List $/chip-h", "Tier", "Tier $/chip-h", "Blended $/Mtok",
           "InferenceX $/Mtok†", "Source (as of)"]


def cells(row) -> list[str]:
    energy = " excl. energy" if row["excludes_energy"] else ""
    return [f.platform_label(row), f.stack_label(row), f.usd(row["list_usd_per_chip_hour"]), str(row["tier"]),
            f"{f.usd(row['tier_usd_per_chip_hour'])} ({row['tier_basis']})",
            f.ci_cell(row, "blended_usd_per_mtok") + energy, f.ci_cell(row, "inferencex_usd_per_mtok") + energy,
            f"{row['tier_source']} ({row['tier_as_of']})"]


NOTE = ("Each platform's cheapest on-demand point priced at the tier's USD per chip-hour instead of the list "
        "one ($/Mtok scales with it; see tpubench.money.tco). † as above: InferenceX prices with such tiers, "
        "not list prices.")
EMPTY = "No tier matches an on-demand point."


def sections(data) -> list[tuple[str, list[list[str]]]]:
    """(title, rows) per workload; [] without `--tco` (data.tco None), one empty-titled entry when
    no tier matched."""
    tiers = data.tco
    if tiers is None:
        return []
    out = [(f"{f.workload_label(group.iloc[0])}: TCO tiers beside the list on-demand price",
            [cells(r) for _, r in group.iterrows()])
           for _, group in tiers.groupby(["workload", "scale"], sort=False, dropna=False)]
    return out or [("TCO tiers beside the list on-demand price", [])]


def markdown(data, table) -> list[str]:
    """The sections as markdown; `table` is the renderer's table writer."""
    out = []
    for title, rows in sections(data):
        out += [f"## {title}", "", table(HEADERS, rows) if rows else EMPTY, ""]
    return out + ([f"- {NOTE}", ""] if out else [])
