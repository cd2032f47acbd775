"""The cost tables `tpubench run` shows after a sweep (console.render_run_cost): one per unit of
output the points were priced in, each on the cheapest priced instance per plan. A unit names its
own table (OutputUnit.run_cost_table) or gets `per_unit_cost_table`; both use the cells below."""

from __future__ import annotations

from rich.table import Table

from tpubench import units
from tpubench.money.plans import plan_label
from tpubench.output.safe_text import escape  # rich markup and control characters
from tpubench.records import usable
from tpubench.scenarios.registry import row_label
from tpubench.scenarios.run_table import MISSING


def cost_table(title: str, columns: tuple[str, ...]) -> Table:
    """A table of priced points: the point and where it is priced left, dollars right."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, justify="left" if col in ("point", "priced as", "plan") else "right")
    return table


def number(value, fmt: str) -> str:
    return units.fixed(value, fmt, MISSING)


def usd(value) -> str:
    return units.usd_cents(value, MISSING, below_a_dollar=4)


def priced_as(r) -> str:
    """Where a row is priced, marked when its price is flagged (pricing's `price_flagged`)."""
    text = escape(f"{r['cloud']} {r['region']} {r['instance_type']} ({r['chips']} of "
                  f"{r['chips_per_instance']} {r['priced_accelerator']})")
    return text + (" [yellow]⚠ flagged price[/yellow]" if bool(r.get("price_flagged")) else "")


def priced_label(r) -> str:
    """A priced row's point, as short as its scenario names it, marked when it is noisy or not
    usable (records/usable.py)."""
    if not usable.row_is_usable(r):
        return f"{row_label(r)} (INVALID: reference only)"
    noise = usable.noise_label(r)
    return f"{row_label(r)} ({noise})" if noise else row_label(r)


def with_ci(r, column: str) -> str:
    """A cost with its 95% CI from the `_ci95_low` / `_ci95_high` columns."""
    return f"{usd(r[column])} ({usd(r[column + '_ci95_low'])}-{usd(r[column + '_ci95_high'])})"


def per_unit_cost_table(console, priced, unit):
    """Points priced in `unit` (an OutputUnit): its per-chip rate and its headline cost with CI on the
    cheapest priced instance per plan. Returns the row the first line's price came from."""
    title = f"cost per {unit.scale_words} {unit.plural} (cheapest instance per plan)"
    table = cost_table(title, ("point", "priced as", "plan", unit.throughput_words, f"{unit.price_words} (95% CI)"))
    best = (priced.sort_values(unit.headline, kind="stable").drop_duplicates(["file", "plan"])
            .sort_values(["file", "plan"]))
    rate = unit.per_chip_columns()[0]
    for _, r in best.iterrows():
        table.add_row(escape(priced_label(r)), priced_as(r), plan_label(str(r["plan"])),
                      number(r.get(rate), unit.throughput_format), with_ci(r, unit.headline))
    console.print(table)
    return best.iloc[0]
