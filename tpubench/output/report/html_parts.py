"""The pieces every HTML section is made of: escaped text, a table, figures. Apart from
html.py (the page) so that a unit's own section (report/sections.py) builds with them without
importing the page that lays the sections out."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from tpubench.output.report.chart_page import escape_html, figure_html


def html_table(headers, rows, numeric=frozenset(), row_classes=None, cell_classes=None, wrap=frozenset()) -> str:
    out = ['<div class="scroll"><table><thead><tr>', *(f"<th>{escape_html(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = row_classes[i] if row_classes else ""
        out.append(f'<tr class="{cls}">' if cls else "<tr>")
        for j, cell in enumerate(row):
            classes = []
            if j in numeric:
                classes.append("num")
            if j in wrap:
                classes.append("wrap")
            if cell_classes and cell_classes.get(j):
                classes.append(cell_classes[j](cell))
            attr = f' class="{" ".join(c for c in classes if c)}"' if classes else ""
            out.append(f"<td{attr}>{escape_html(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


# While a page is built (charts_on_page), the charts its sections placed: the page then adds the
# filters over them and the scripts that draw them (report/chart_page.py), once.
_placed: ContextVar[list | None] = ContextVar("charts_placed", default=None)


@contextmanager
def charts_on_page():
    """Within it, html_figures records each chart it places in the list this yields."""
    placed: list = []
    reset = _placed.set(placed)
    try:
        yield placed
    finally:
        _placed.reset(reset)


def html_figures(charts) -> str:
    """The figures of `charts` (report/charts.Chart), drawn by the browser (report/chart_page.py)."""
    placed = _placed.get()
    if placed is not None:
        placed.extend(charts)
    return "".join(figure_html(chart) for chart in charts)


__all__ = ["charts_on_page", "escape_html", "html_figures", "html_table"]
