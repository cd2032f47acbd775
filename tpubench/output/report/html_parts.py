"""The pieces every HTML section is made of: escaped text, a table, figures. Apart from
html.py (the page) so that a unit's own section (report/sections.py) builds with them without
importing the page that lays the sections out."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable

from tpubench.output import forked
from tpubench.output.report.chart_page import escape_html, figure_html, filter_values


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


class Page:
    """What a page's sections placed while it is built (charts_on_page): its charts, to which the
    page adds the filters over them and the scripts that draw them (report/chart_page.py), and the
    figures drawn ahead in a forked child (`ahead`: html_figures given a function that makes them),
    each marked in the text until the page takes it (`resolve`)."""

    def __init__(self, ahead: bool = False):
        self.ahead = ahead
        self.charts: list = []
        self._later: list[tuple[str, forked.Ahead]] = []

    def draw_ahead(self, make: Callable[[], list], heading: str) -> str:
        marker = f"<!--figures-ahead-{len(self._later)}-->"
        self._later.append((marker, forked.ahead(lambda: _drawn(make(), heading), fork=True)))
        return marker

    def resolve(self, text: str) -> tuple[str, dict[str, list[str]] | None]:
        """(`text` with every figure drawn ahead in its place, the filter values of all its figures:
        chart_page.filter_values), None for the values where the page has no figure."""
        values = {name: set(found) for name, found in filter_values(self.charts).items()}
        drawn = bool(self.charts)
        for marker, pending in self._later:
            html, more, count = pending.result()
            text = text.replace(marker, html, 1)
            drawn = drawn or count > 0
            for name, found in more.items():
                values.setdefault(name, set()).update(found)
        return text, ({name: sorted(found) for name, found in values.items()} if drawn else None)

    def close(self) -> None:
        for _, pending in self._later:
            pending.close()


def _drawn(charts: list, heading: str = "") -> tuple[str, dict[str, list[str]], int]:
    """Figures as the page takes them: their HTML (after `heading`; nothing without a figure), their
    filter values, how many."""
    html = heading + "".join(figure_html(chart) for chart in charts) if charts else ""
    return html, filter_values(charts), len(charts)


_page: ContextVar[Page | None] = ContextVar("page_being_built", default=None)


@contextmanager
def charts_on_page(ahead: bool = False):
    """Within it, html_figures records each chart it places on the Page this yields; with `ahead`,
    figures given as a function are drawn in a forked child meanwhile (forked.ahead: where a fork is
    safe and another CPU is free). A child whose figures were not taken is stopped on the way out."""
    page = Page(ahead)
    reset = _page.set(page)
    try:
        yield page
    finally:
        _page.reset(reset)
        page.close()


def html_figures(charts: list | Callable[[], list], heading: str = "") -> str:
    """The figures of `charts` (report/charts.Chart, or a function that makes them), drawn by the
    browser (report/chart_page.py), after `heading` where there is any. A function's figures are
    made in a child while the page is built, where the page allows it (charts_on_page), and take
    their place when it is finished."""
    page = _page.get()
    if callable(charts):
        if page is not None and page.ahead:
            return page.draw_ahead(charts, heading)
        charts = charts()
    if page is not None:
        page.charts.extend(charts)
    return _drawn(charts, heading)[0]


__all__ = ["Page", "charts_on_page", "escape_html", "html_figures", "html_table"]
