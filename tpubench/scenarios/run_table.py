"""What every scenario's run table is made of: the table, its cells and the row of a failed point.
Units are chosen in tpubench.units; a scenario's table module picks its columns from these."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from tpubench import units
from tpubench.records.usable import cv_words

# The terminal's mark for a value that is absent or not finite (the reports use an en dash).
MISSING = "-"


def ms(seconds) -> str:
    return units.ms(seconds, spec=".1f", missing=MISSING)


def percent(fraction) -> str:
    return units.share(fraction, MISSING)


def human_bytes(n) -> str:
    return units.human_bytes(n, MISSING)


def number(value, fmt: str) -> str:
    return units.fixed(value, fmt, MISSING)


def rate_with_ci(m: dict, name: str) -> str:
    return units.with_range(m.get(name), m.get(f"{name}_ci95_low"), m.get(f"{name}_ci95_high"), missing=MISSING)


def p50_p99(m: dict, name: str) -> str:
    """'12.3 / 45.6': a time's median and 99th percentile in ms."""
    return f"{ms(m.get(f'{name}_p50_s'))} / {ms(m.get(f'{name}_p99_s'))}"


def run_table(title: str, columns: tuple[str, ...]) -> Table:
    """A table of measured points: the point and validity left, figures right."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, justify="right" if col not in ("point", "valid") else "left")
    return table


def measured(table: Table, outcomes: list, label):
    """(outcome, result, metrics) of each measured point; a failed or skipped one gets its row of
    dashes here."""
    for o in outcomes:
        if o.result is None:
            continue
        if o.result.status == "failed":
            table.add_row(label(o.point), *[MISSING] * (len(table.columns) - 2), "[red]failed[/red]")
            continue
        if o.result.status == "skipped":   # not measured, on purpose (the runner's steering)
            table.add_row(label(o.point), *[MISSING] * (len(table.columns) - 2),
                          "[dim]skipped: " + escape(str(o.result.error)) + "[/dim]")
            continue
        yield o, o.result, o.result.metrics


def valid_cell(r) -> str:
    """'yes', 'yes, noisy: CV 25.4%' (usable, its figures spread: records/usable.py) or 'no: reasons'."""
    if not r.validity.valid:
        return "[yellow]no: " + escape("; ".join(r.validity.reasons)) + "[/yellow]"
    if r.validity.noise:
        return f"[green]yes[/green], [yellow]noisy{cv_words(r.validity.cv)}[/yellow]"
    return "[green]yes[/green]"


def energy_columns(outcomes: list, metric: str, header: str) -> tuple[str, ...]:
    """The energy column, for a table where some point has `metric` (none has without a source)."""
    shown = any(o.result is not None and o.result.status == "ok" and o.result.metrics.get(metric) is not None
                for o in outcomes)
    return (header,) if shown else ()


def energy_cells(columns: tuple[str, ...], r, metric: str) -> list[str]:
    """The energy cell of a row when the table has the column: joules, marked when modelled."""
    if not columns:
        return []
    text = number(r.metrics.get(metric), ".3g")
    return [text + (" (modelled)" if r.energy.get("method") == "modelled" and text != MISSING else "")]
